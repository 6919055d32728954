"""What the student reads of an error a call raised (its text, bounded, with hints and the grader's words for a
known error) and of an address-check finding; a name from a worker's record is shown only if it has the form of
one."""

from __future__ import annotations

import re

import torch

from grader.judge import known_errors
from grader.protocol import guards

NOISE = ("Search for `cuda", "CUDA kernel errors might", "For debugging consider", "Compile with `TORCH_USE")


ERROR_HINTS = (
    ("arange's range must be a power of 2",
     "tl.arange(start, end) needs end - start to be a power of 2 (1, 2, 4, 8...), and a size of this case is not "
     "one: take a power of two at least as large (triton.next_power_of_2 in the wrapper, or a constexpr rounded up) "
     "and mask the extra lanes, or walk a small dimension with tl.static_range"),
)
"""(what Triton's message says, what it leaves a student to guess): added under the error's own words."""


def _error_text(error: str) -> str:
    lines = [ln for ln in error.splitlines() if ln.strip() and not ln.startswith(NOISE)]
    hints = [hint for key, hint in ERROR_HINTS if key in error]
    return "\n".join(lines[:12] + [f"hint: {h}" for h in hints])


_ACCESS_VERBS = {"tl.load": "read", "tl.store": "wrote", "atomic": "updated", "atomic_cas": "updated"}


_NAME = re.compile(r"(?:[A-Za-z_]\w{0,79}|argument \d{1,3})(?:\[\d{1,3}\])*")
"""What a worker may name: a kernel or a parameter (an identifier), an unnamed argument (`argument 3`), an item of a
tuple argument (`ptrs[1]`)."""


def _worker_name(value, fallback: str) -> str:
    """A name from a worker record (a kernel's, a parameter's) as students read it, if it has the form of one (at
    most 80 characters), else `fallback`: no other worker text reaches a result."""
    return value if isinstance(value, str) and _NAME.fullmatch(value) else fallback


def describe_bounds(finding: dict) -> str:
    """An address-check finding (grader/worker/address_check.py, worker side) as the student reads it."""
    kernel = _worker_name(finding.get("kernel"), "a kernel")
    line = finding.get("line")
    where = kernel + (f" (line {line})" if type(line) is int and line > 0 else "")
    op = finding.get("op") if finding.get("op") in _ACCESS_VERBS else "an access"
    verb = _ACCESS_VERBS.get(op, "touched")
    count = int(finding.get("count", 0))
    if finding.get("buffer") is None:
        text = f"{where}: {op} {verb} {count} address(es) outside every tensor the kernel was given"
    else:
        offsets = sorted(int(o) for o in finding.get("offsets") or [])
        if offsets and count == offsets[-1] - offsets[0] + 1:
            shown = f"{offsets[0]}..{offsets[-1]}"  # every offset between the lowest and the highest
        else:
            shown = ", ".join(str(o) for o in offsets[:-1]) + (", ..., " if count > len(offsets) else ", ") \
                + str(offsets[-1]) if len(offsets) > 1 else "".join(str(o) for o in offsets)
        side = "before the first element of" if finding.get("side") == "before" else "past the end of"
        size = int(finding.get("numel", 0))
        buffer = _worker_name(finding.get("buffer"), "a tensor")
        dtype = finding.get("dtype") if finding.get("dtype") in _DTYPE_NAMES else "?"
        text = (f"{where}: {op} {verb} {count} element(s) {side} {buffer} "
                f"({size} {dtype} elements, offsets 0..{size - 1}): offsets {shown}")
    more = int(finding.get("more", 0))
    return text + (f" (and {more} more out-of-bounds access(es))" if more else "") + \
        " (a missing or wrong mask? masked-off lanes are not accesses)"


_DTYPE_NAMES = frozenset(guards.dtype_name(getattr(torch, n)) for n in (
    "float16", "bfloat16", "float32", "float64", "int8", "uint8", "int16", "int32", "int64", "bool")) | {
    "fp16", "bf16", "fp32", "fp64", "i1", "i8", "u8", "i16", "i32", "i64", "int1"}


def _where(record: dict) -> str:
    where = record.get("where")
    return "; ".join(w for w in where if isinstance(w, str)) if isinstance(where, list) else ""


def error_problem(record: dict, device: str, tritons: known_errors.Tritons | None = None) -> str:
    """What a call (or the import) that raised tells the student: for a known error (grader/judge/known_errors.py)
    the grader's own words, else the error's text, bounded, with the submission's lines it went through."""
    tritons = tritons or known_errors.Tritons()
    where = _where(record)
    missing = known_errors.unsupported_api(record, tritons, where)
    if missing:
        return missing
    first, *rest = _error_text(str(record["error"])).splitlines() or ["an exception"]
    note = known_errors.cuda_assert_note(record, device)
    return f"raised {first}" + (f" ({where})" if where else "") + "".join("\n" + r for r in rest) + \
        (f"\n{note}" if note else "")
