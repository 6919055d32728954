"""Where the interpreter's seconds go, as a worker runs the answer key in it: on CUDA the address check's
interpreted re-run of each case (grader/worker/main.py `interpret_runs`), on the CPU the cases themselves; guarded
inputs, the address check's patches, every distinct config, one file per task.

    python scripts/profile_address_check.py [--device cuda|cpu] [--compare overflow|tuples|dots]
                                            [--tasks 10_quantize_global_int8 ...] [--top 25]

Runs every case four times: once to warm up (the interpreter rewrites each kernel's AST on its first run), once
without one of the worker's interpreter patches (grader/worker/interpreter.py; `--compare overflow`: Triton's
overflow checks as they come, `patch_interpreter_overflow_checks`; `--compare tuples`: triton.language's tuples
typed as they are made, `patch_interpreter_tuple_types`; `--compare dots`: 8-bit integer dots in NumPy's integer
matmul, `patch_interpreter_integer_dots`), once with it, and prints per task the seconds of those
two, their ratio, and whether every output and every address finding is the same bit for bit; then, under
cProfile, the functions that took the most time of their own in a fourth pass, with every patch. The CPU sizes
of the cases are used on both devices (those are what the re-run interprets).
"""

from __future__ import annotations

import argparse
import cProfile
import importlib
import importlib.util
import os
import pstats
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DEFAULT = ["10_quantize_global_int8", "11_quantize_rowwise_int8", "12_matmul_int8_fused_dequant",
           "13_quantize_global_transpose_int8", "14_backward_dx_int8_fused"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("--compare", choices=["overflow", "tuples", "dots"], default="overflow")
    ap.add_argument("--tasks", nargs="*", default=DEFAULT)
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args()
    if args.device == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported, as the CPU worker does
    import torch

    from grader.config import load_task
    from grader.protocol import guards
    from grader.worker.address_check import BoundsAudit
    from grader.worker.interpreter import (
        interpreted,
        patch_interpreter_integer_dots,
        patch_interpreter_libdevice,
        patch_interpreter_minmax,
        patch_interpreter_nested_calls,
        patch_interpreter_overflow_checks,
        patch_interpreter_scalars,
        patch_interpreter_tuple_types,
    )
    from grader.worker.main import Instruments, find_autotuners, interpreted_key, run_case, unspecialize

    if args.device == "cuda" and not torch.cuda.is_available():
        print("no GPU: use --device cpu", file=sys.stderr)
        return 2
    if args.device == "cpu":  # patch_interpreter() less the three patches this script toggles (below)
        patch_interpreter_libdevice()
        patch_interpreter_scalars()
        patch_interpreter_nested_calls()
        patch_interpreter_minmax()
    torch.set_num_threads(1)  # as a worker runs
    loaded = []
    for task_id in args.tasks:
        task = load_task(ROOT / "tasks" / task_id)
        oracle = importlib.import_module(f"reference.{task.reference}")
        path = str(ROOT / "tasks" / task_id / "solution.py")
        spec = importlib.util.spec_from_file_location(f"sub_{task_id}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        unspecialize(module)
        tuners = [(t, list(t.configs)) for t in find_autotuners(module)]
        cases = []
        for case in task.cases:
            a, kw = oracle.generate_input(**case.params_for("cpu"))
            cases.append({"id": case.id, "args": list(a), "kwargs": dict(kw)})
        inst = Instruments()
        inst.path = path
        bounds = BoundsAudit(path)
        bounds.install()
        loaded.append((task_id, module, getattr(module, task.entry), tuners, cases, inst, bounds))

    def one_pass(profile: cProfile.Profile | None = None) -> dict[str, tuple[float, list]]:
        out = {}
        for task_id, module, entry, tuners, cases, inst, bounds in loaded:
            n_configs = max([len(c) for _, c in tuners] + [1])
            start, seen = time.perf_counter(), []
            for case in cases:
                keys = set()
                for c in range(n_configs):
                    key = interpreted_key(tuners, c)
                    if key in keys:
                        continue
                    keys.add(key)
                    view = (lambda m=module: interpreted(m, [])) if args.device == "cuda" else None
                    if profile:
                        profile.enable()
                    record = run_case(entry, case, args.device, inst, tuners, c, None, bounds, view=view)
                    if profile:
                        profile.disable()
                    outs = [guards.bits_view(o["tensor"]) for o in record.get("outputs") or [] if "tensor" in o]
                    seen.append((record.get("error"), outs, record.get("bounds")))
            out[task_id] = (time.perf_counter() - start, seen)
        return out

    import dataclasses

    from triton.runtime import interpreter as ti

    import grader.worker.interpreter as gi

    def overflow_patch(on: bool) -> bool:
        """Off: the options as Triton has them, and patch_interpreter (which interpreted() applies on every call)
        leaves them so; on: the grader's patch."""
        gi.patch_interpreter_overflow_checks = patch_interpreter_overflow_checks if on else (lambda: False)
        ti.interpreter_builder.options = dataclasses.replace(ti.interpreter_builder.options,
                                                             sanitize_overflow=not on)
        if not on:
            return False
        return patch_interpreter_overflow_checks() or not ti.interpreter_builder.options.sanitize_overflow

    def tuple_patch(on: bool) -> bool:
        gi.patch_interpreter_tuple_types = patch_interpreter_tuple_types if on else (lambda: False)
        return patch_interpreter_tuple_types(lazy=on)

    def dot_patch(on: bool) -> bool:
        gi.patch_interpreter_integer_dots = patch_interpreter_integer_dots if on else (lambda: False)
        return patch_interpreter_integer_dots(fast=on)

    patches = {"overflow": overflow_patch, "tuples": tuple_patch, "dots": dot_patch}
    toggle = patches[args.compare]
    for name, patch in patches.items():
        patch(name != args.compare)
    one_pass()  # warm-up
    before = one_pass()
    changed = toggle(True)
    after = one_pass()
    profile = cProfile.Profile()
    one_pass(profile)
    print(f"device {args.device}; patch {args.compare!r} applied: {changed}")
    print(f"{'task':<36} {'without it':>12} {'with it':>9} {'ratio':>6}  same outputs and findings")
    for task_id in args.tasks:
        (t0, s0), (t1, s1) = before[task_id], after[task_id]
        same = len(s0) == len(s1) and all(
            e0 == e1 and b0 == b1 and len(o0) == len(o1) and all(torch.equal(x, y) for x, y in zip(o0, o1))
            for (e0, o0, b0), (e1, o1, b1) in zip(s0, s1))
        print(f"{task_id:<36} {t0:>11.2f}s {t1:>8.2f}s {t0 / max(t1, 1e-9):>5.2f}x  {same}")
    total0, total1 = sum(v[0] for v in before.values()), sum(v[0] for v in after.values())
    print(f"{'all':<36} {total0:>11.2f}s {total1:>8.2f}s {total0 / max(total1, 1e-9):>5.2f}x", flush=True)
    pstats.Stats(profile).sort_stats("tottime").print_stats(args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
