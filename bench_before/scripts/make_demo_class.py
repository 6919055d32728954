"""Regenerate submissions/ (the demo class) from the answer key, with realistic mistakes.

    python scripts/make_demo_class.py

alice gets everything right; the others make the mistakes a class makes: a missing tail mask, one autotune
config, a forbidden import, truncation instead of rounding, a torch fallback, ignored strides, a crash (a store
through a wild pointer) and a hang (an endless loop in the wrapper).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
T = ROOT / "tasks"
OUT = ROOT / "submissions"

T10, T11, T12, T13, T14 = (
    "10_quantize_global_int8", "11_quantize_rowwise_int8", "12_matmul_int8_fused_dequant",
    "13_quantize_global_transpose_int8", "14_backward_dx_int8_fused")


def source(task: str, name: str = "solution.py") -> str:
    path = T / task / name if name == "solution.py" else T / task / "wrong" / name
    text = path.read_text()
    return re.sub(r'\A"""[^"]*"""\n', "", text)  # drop the answer key's docstring


def edit(text: str, old: str, new: str) -> str:
    assert old in text, f"demo edit not applicable: {old!r}"
    return text.replace(old, new, 1)


def crash(task: str) -> str:  # a store 2**40 elements past the output: illegal address on GPU, SIGSEGV on CPU
    return edit(source(task), "tl.store(output_ptr + offsets,", "tl.store(output_ptr + offsets + (1 << 40),")


def hang(task: str) -> str:  # the wrapper never returns
    endless = "    while B > 0:\n        B = B + 1\n"
    return edit(source(task), "    y = torch.empty((B, OUT)", endless + "    y = torch.empty((B, OUT)")


CLASS = {
    "alice": {t: source(t) for t in (T10, T11, T12, T13, T14)},
    "bob": {T10: source(T10, "no_tail_mask.py"), T11: source(T11, "one_config.py"), T12: source(T12),
            T14: source(T14, "per_tensor_only.py")},
    "carol": {T10: source(T10, "forbidden_import.py"), T11: source(T11, "truncate.py"),
              T12: source(T12, "torch_fallback.py"), T13: source(T13, "ignore_strides.py")},
    "dave": {T10: source(T10), T11: crash(T11), T12: hang(T12), T14: source(T14)},
    "erin": {T12: source(T12, "no_bias.py"), T13: source(T13)},
}


# When each file was handed in (the deadline is 2025-11-10 23:59 +03:00): erin is a day late with task 13.
SUBMITTED = {("erin", T13): "2025-11-11T12:00:00+03:00"}
ON_TIME = "2025-11-09T18:00:00+03:00"


def main() -> None:
    shutil.rmtree(OUT, ignore_errors=True)
    rows = ["student,task,submitted_at"]
    for student, files in CLASS.items():
        (OUT / student).mkdir(parents=True)
        for task, text in files.items():
            (OUT / student / f"{task}.py").write_text(f"# {student}, HW4 {task}\n" + text)
            rows.append(f"{student},{task},{SUBMITTED.get((student, task), ON_TIME)}")
    (OUT / "manifest.csv").write_text("\n".join(rows) + "\n")
    print(f"wrote {sum(len(f) for f in CLASS.values())} files for {len(CLASS)} students in {OUT}")


if __name__ == "__main__":
    main()
