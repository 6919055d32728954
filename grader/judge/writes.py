"""What a call wrote where it must not: elements of the guard bands around a buffer that are no longer poison
(out-of-bounds writes, around an input or an output), and the write check's findings (values an output held that
no kernel wrote)."""

from __future__ import annotations

import torch

from grader.judge.data import Caught
from grader.judge.messages import _worker_name
from grader.judge.values import SHOW
from grader.protocol import guards


def _offsets(flat_positions: torch.Tensor, offset: int, n_span: int) -> str:
    """Describe buffer positions relative to the view: -k before its start, +k past its end, or inside a gap."""
    before = flat_positions[flat_positions < offset] - offset
    after = flat_positions[flat_positions >= offset + n_span] - (offset + n_span)
    gaps = flat_positions[(flat_positions >= offset) & (flat_positions < offset + n_span)] - offset
    parts = []
    if before.numel():
        parts.append(f"{before.numel()} before the start (offsets {', '.join(str(int(b)) for b in before[-SHOW:])})")
    if after.numel():
        parts.append(f"{after.numel()} past the end (offsets +{', +'.join(str(int(a)) for a in after[:SHOW])})")
    if gaps.numel():
        parts.append(f"{gaps.numel()} in the gaps between the rows of a strided view (offsets "
                     f"{', '.join(str(int(g)) for g in gaps[:SHOW])})")
    return "; ".join(parts)


def guard_damage(rec: dict, input: bool = False) -> tuple[torch.Tensor, int, int]:
    """Buffer positions of the guard-band elements that are no longer poison (the inputs' kind of poison around an
    input), with the view's offset and span. The record lists the band elements that are not the poison the worker
    filled in (grader/protocol/guards.py `guard_record`); every one is checked here: inside the buffer, outside the
    view, in order, and of the buffer's dtype. Anything else is a garbled record (ValueError)."""
    n, size, stride, offset = int(rec["n"]), tuple(rec["size"]), tuple(rec["stride"]), int(rec["offset"])
    if any(int(k) < 0 for k in (*size, *stride)):
        raise ValueError("a guarded view has a negative size or stride")
    n_span = guards.span(size, stride)
    # The worker lays every guarded buffer out one way (grader/protocol/guards.py `_guarded`): a record claiming another
    # layout is forged, and its sizes are not trusted any further (a claimed n of 2^28 cost the judge 2.7 GB).
    guard = guards.guard_size(n_span)
    if offset != guard or n != n_span + 2 * guard:
        raise ValueError("a guarded buffer is recorded with a layout the worker does not make")
    positions, values = rec["changed"], rec["values"]
    if not (isinstance(positions, torch.Tensor) and isinstance(values, torch.Tensor)) \
            or positions.dtype != torch.int64 or positions.dim() != 1 or values.shape != positions.shape \
            or guards.dtype_name(values.dtype) != rec.get("dtype"):
        raise ValueError("the guard bands of a buffer are recorded in the wrong form")
    if not positions.numel():
        return positions, offset, n_span
    if int(positions[0]) < 0 or int(positions[-1]) >= n or bool((positions[1:] <= positions[:-1]).any()):
        raise ValueError("the guard bands of a buffer list positions out of order or out of range")
    inside = (positions >= offset) & (positions < offset + n_span)
    if bool(inside.any()) and bool(_in_view(positions[inside], n, size, stride, offset).any()):
        raise ValueError("the guard bands of a buffer list an element of the view itself")
    changed = guards.bits_view(values) != guards.poison_bits(values.dtype, input)
    return positions[changed], offset, n_span


def _in_view(positions: torch.Tensor, n: int, size: tuple, stride: tuple, offset: int) -> torch.Tensor:
    """Which buffer positions are elements of the view, computed from the positions alone when the view's
    dimensions nest (each stride at least the span of the smaller ones: every dense or sliced layout), so that the
    judge's memory follows what the record holds, not what it claims; a whole-buffer mask otherwise."""
    dims = sorted(((st, sz) for sz, st in zip(size, stride) if sz > 1), reverse=True)
    nested = all(st >= guards.span([sz for _, sz in dims[k + 1:]], [s for s, _ in dims[k + 1:]])
                 for k, (st, _) in enumerate(dims))
    if not nested:
        return guards.region_mask(n, size, stride, offset)[positions]
    rest = positions - offset
    member = rest >= 0
    rest = rest.clamp(min=0)
    for st, sz in dims:
        rest = rest - torch.clamp(rest // st, max=sz - 1) * st
    return member & (rest == 0)


def check_guards(rec: dict, name: str, input: bool = False) -> str | None:
    """Out-of-bounds writes: every element of the buffer outside the view must still be poison."""
    positions, offset, n_span = guard_damage(rec, input)
    if not positions.numel():
        return None
    where = _offsets(positions, offset, n_span)
    return (f"out-of-bounds write: {positions.numel()} element(s) around {name} "
            f"({rec['dtype']}, shape {list(rec['size'])}) were overwritten: {where}")


_WHEN = {
    "before": "held values before the first kernel launch that received it ({where}), and not those of an "
              "allocation, a fill with one value, or a copy of an input",
    "between": "changed between two kernel launches that received it, outside both (before {where})",
    "after": "changed after the last kernel launch that received it ({where}), outside every kernel",
}


def write_problems(name: str, alloc: int, events) -> list[str]:
    """The write check's findings (grader/worker/write_check.py) for the output `name`, held in guarded buffer
    `alloc`."""
    if events is None:
        return []  # the check was off (config: grading.writes)
    if not isinstance(events, list) or not all(
            isinstance(e, dict) and type(e.get("alloc")) is int and e.get("when") in _WHEN
            and type(e.get("elements")) is int and isinstance(e.get("kernel"), str)
            and (e.get("line") is None or type(e.get("line")) is int) for e in events):
        return ["the worker's record of the write check is garbled"]
    found = []
    for e in events:
        if e["alloc"] != alloc:
            continue  # a scratch buffer: the wrapper may prepare it with the torch work its task allows
        kernel = _worker_name(e["kernel"], "a kernel")
        where = f"{kernel}, line {e['line']}" if e["line"] is not None else kernel
        found.append(Caught(f"{name}: {e['elements']} element(s) {_WHEN[e['when']].format(where=where)}: the "
                            "values of an output must be computed by your kernel; values placed with torch, numpy or "
                            "Python do not count"))
    return found[:1]


_AT = {"launch": "the launch of {name}", "op": "torch.{name}"}


def memory_problems(events) -> list[str]:
    """The memory check's findings (grader/worker/memory_check.py): a buffer that a kernel or a torch operation
    received held bytes that no kernel and no torch operation had written."""
    if events is None:
        return []  # the check was off (config: grading.provenance)
    if not isinstance(events, list) or not all(
            isinstance(e, dict) and e.get("at") in _AT and isinstance(e.get("name"), str)
            and isinstance(e.get("arg"), str) and type(e.get("bytes")) is int
            and (e.get("line") is None or type(e.get("line")) is int) for e in events):
        return ["the worker's record of the memory check is garbled"]
    found = []
    for e in events[:1]:
        where = _AT[e["at"]].format(name=_worker_name(e["name"], "a kernel" if e["at"] == "launch" else "operation"))
        if e["line"] is not None:
            where += f" at line {e['line']}"
        arg = _worker_name(e["arg"], "")
        what = f"the buffer passed as {arg}" if arg else "a buffer it received"
        found.append(Caught(f"{what} to {where} held {e['bytes']} byte(s) that no kernel and no torch operation "
                            "wrote: it was changed another way since (a numpy view, a buffer, a pointer); the "
                            "memory your kernels read may change only through your kernels and torch operations"))
    return found
