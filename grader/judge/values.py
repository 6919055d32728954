"""The value check of an output: its rule (exact, rounded, close) and tolerances, the accepted ranges computed once
per answer and the fast check in the output's own dtype, what a wrong output's message says, and whether a twin's
output fails as a replay would."""

from __future__ import annotations

import torch

from grader.config import OutputSpec, TaskSpec
from grader.judge.data import CaseData
from grader.protocol import guards

DTYPES = {"int8": torch.int8, "int16": torch.int16, "int32": torch.int32, "int64": torch.int64,
          "uint8": torch.uint8, "float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32,
          "float64": torch.float64, "bool": torch.bool}
SHOW = 5  # elements shown per problem


def _index(flat: int, shape: tuple[int, ...]) -> str:
    if not shape:
        return "[]"
    idx = []
    for n in reversed(shape):
        idx.append(flat % n)
        flat //= n
    return "[" + ", ".join(str(i) for i in reversed(idx)) + "]"


def _fmt(v: float) -> str:
    if float(v).is_integer() and abs(v) < 1e15:
        return str(int(v))
    return f"{v:.6g}"


def resolve_dtype(out: OutputSpec, args: list) -> torch.dtype:
    if out.dtype.startswith("like:"):
        return args[int(out.dtype.split(":", 1)[1])].dtype
    return DTYPES[out.dtype]


def bad_values(out: OutputSpec, got: torch.Tensor, ref: torch.Tensor) -> tuple[torch.Tensor, str]:
    """The elements that fail the value check of one output (a boolean mask), and the rule."""
    g = got.double()
    r = ref.double()
    if out.compare == "exact":
        bad = ~((g == r) | (torch.isnan(g) & torch.isnan(r)))
        rule = "exact match"
    elif out.compare == "rounded":
        lo, hi = rounded_bounds(out, r)
        bad = (g < lo) | (g > hi) | torch.isnan(g)
        rule = f"the rounding of a value within {out.window:g} of the exact one"
    else:
        bad = ~((g - r).abs() <= close_tolerance(out, r))
        rule = f"|got - expected| <= {out.atol:g} + {out.rtol:g} * |expected|"
    return bad, rule


def rounded_bounds(out: OutputSpec, r: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The integer codes a "rounded" rule accepts for the exact values `r` (float64): lo <= code <= hi."""
    return torch.ceil(r - out.window - 0.5), torch.floor(r + out.window + 0.5)


def close_tolerance(out: OutputSpec, r: torch.Tensor) -> torch.Tensor:
    """How far from the expected values `r` (float64) a "close" rule lets an element be."""
    return out.atol + out.rtol * r.abs()


def accepted_range(out: OutputSpec, ref: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor] | None:
    """The smallest and largest value of `dtype` that the check accepts, element by element: `got` passes exactly
    where lo <= got <= hi (a NaN never does), so a right output is judged in its own dtype, with no float64 copy
    of it. Computed once per (answer, rule, dtype) and kept on the answer tensor, which lives as long as the
    judge. None where the rule has no such range (exact, an answer with NaN, a bound no value of `dtype` meets).

    The bounds are rounded inwards to `dtype`: for a value g of `dtype`, g >= lo64 holds exactly when g >= the
    smallest value of `dtype` at or above lo64 (and the same for hi). A "rounded" range is the float64 rule's
    exactly; a "close" one lies a few float64 units inside it, so the fast path never accepts what the float64
    rule would reject."""
    if out.compare not in ("rounded", "close") or dtype == torch.bool or dtype.is_complex:
        return None
    key = (out.compare, out.window, out.atol, out.rtol, dtype)
    cache = ref.__dict__.setdefault("_grader_ranges", {})
    if key in cache:
        return cache[key]
    r = ref.double()
    if out.compare == "rounded":
        lo, hi = rounded_bounds(out, r)
    else:
        # |g - r| <= tol is computed in float64, with rounding; the range is drawn a few float64 units inside
        # r -+ tol, so that what it accepts the float64 rule accepts too (an element that close to a bound is
        # left to the float64 rule: `passes_fast` says "look closer").
        tol = close_tolerance(out, r)
        margin = (r.abs() + tol) * 2.0**-48
        lo, hi = r - tol + margin, r + tol - margin
    found = None
    if not bool(r.isnan().any()):
        if dtype.is_floating_point:
            lo_t, hi_t = lo.to(dtype), hi.to(dtype)
            up, down = lo_t.double() < lo, hi_t.double() > hi
            lo_t[up] = torch.nextafter(lo_t[up], torch.tensor(float("inf"), dtype=dtype))
            hi_t[down] = torch.nextafter(hi_t[down], torch.tensor(float("-inf"), dtype=dtype))
            found = (lo_t, hi_t)
        else:
            info = torch.iinfo(dtype)
            lo, hi = torch.ceil(lo), torch.floor(hi)
            if not bool(((lo > info.max) | (hi < info.min) | (lo > hi)).any()):
                found = (lo.clamp(info.min, info.max).to(dtype), hi.clamp(info.min, info.max).to(dtype))
    cache[key] = found
    return found


def ranges_of(task: TaskSpec, case: CaseData) -> list[list[tuple]]:
    """Per output of `case`, the accepted ranges `accepted_range` keeps on its answer, computed for the output's
    declared dtype: (key, range) pairs that the trusted side saves with the answers, so that every judge process
    starts with them (`keep_ranges`) instead of computing them again (on the H100 box, 47 INT8 jobs: 2.1 of the
    5.0 seconds a job took to judge, in 8 judge processes). The answers keep none of them: the process that saves
    them does not judge (two tensors the size of each output, for every case of the class's tasks)."""
    found = []
    for out, ref in zip(task.outputs, case.expected or ()):
        if isinstance(ref, torch.Tensor):
            accepted_range(out, ref, resolve_dtype(out, case.args))
            found.append(list(ref.__dict__.pop("_grader_ranges", {}).items()))
        else:
            found.append([])
    return found


def keep_ranges(expected: tuple, ranges: list[list[tuple]]) -> None:
    """Put `ranges_of`'s pairs back on the answers they were computed for."""
    for ref, pairs in zip(expected, ranges):
        if isinstance(ref, torch.Tensor) and pairs:
            ref.__dict__.setdefault("_grader_ranges", {}).update({tuple(k): v for k, v in pairs})


def passes_fast(out: OutputSpec, got: torch.Tensor, ref: torch.Tensor) -> bool:
    """True when every element of `got` passes the value check, decided in `got`'s own dtype (`accepted_range`, or
    bit equality for an exact rule); False means "look closer" (the float64 check decides, and says why)."""
    if got.shape != ref.shape:
        return False
    if out.compare == "exact":
        return got.dtype == ref.dtype and bool(torch.equal(got, ref))
    bounds = accepted_range(out, ref, got.dtype)
    if bounds is None:
        return False
    lo, hi = bounds
    return bool(((got >= lo) & (got <= hi)).all())


def compare_values(out: OutputSpec, got: torch.Tensor, ref: torch.Tensor) -> str | None:
    """The value check of one output; None when it passes."""
    if passes_fast(out, got, ref):
        return None
    g = got.double()
    r = ref.double()
    shape = tuple(got.shape)
    bad, rule = bad_values(out, g, r)  # already float64: no second conversion
    n = int(bad.sum())
    if not n:
        return None
    flat = bad.flatten().nonzero().flatten()[:SHOW]
    gf, rf = g.flatten(), r.flatten()
    shown = "; ".join(
        f"{out.name}{_index(int(i), shape)} got {_fmt(gf[i])} expected "
        + (f"{_fmt(float(torch.round(rf[i])))} (exact {rf[i]:.4f})" if out.compare == "rounded" else _fmt(rf[i]))
        for i in flat
    )
    extra = ""
    if out.compare == "close":
        finite = ~torch.isnan(g)
        err = (g - r).abs()[finite]
        if err.numel():
            extra = f"; max abs error {float(err.max()):.3g}"
            scale = r.abs()[finite]
            rel = (err / scale)[scale > 0]
            if rel.numel():  # a tolerance's rtol reads against this
                extra += f", max relative error {float(rel.max()):.3g}"
    return f"{out.name}: {n} of {got.numel()} element(s) differ (rule: {rule}){extra}; first: {shown}"


def value_problem(spec: OutputSpec, t: torch.Tensor, ref: torch.Tensor) -> str | None:
    """What is wrong with the values of one output (poison left, NaN read, values off); None when right."""
    poisoned = guards.bits_view(t) == guards.poison_bits(t.dtype)
    unwritten = int(poisoned.sum())
    if unwritten:
        first = poisoned.flatten().nonzero().flatten()[:SHOW]
        poison = _fmt(float(t.flatten()[first[0]]))
        # An integer poison (-128 for int8) is also a value a wrong kernel can compute: say what was expected.
        rf = ref.double().flatten()
        shown = ", ".join(f"{spec.name}{_index(int(i), tuple(t.shape))} (expected {_fmt(float(rf[i]))})"
                          for i in first)
        return (f"{spec.name}: {unwritten} element(s) hold {poison}, the poison the buffer was filled with: never "
                f"written, copied from outside an input, or computed as {poison}; first: {shown}")
    if t.is_floating_point() and not (ref.is_floating_point() and bool(ref.isnan().any())):
        nans = int(t.isnan().sum())
        if nans:
            return (f"{spec.name}: {nans} NaN element(s): the kernel read poison (NaN) from outside "
                    "an input (a missing load mask?), divided 0 by 0, or computed inf / inf or inf - inf (exp "
                    "overflows float32 past 88.7 and underflows to 0 below -103: subtract the maximum first)")
    return compare_values(spec, t, ref)


TWIN_SLACK = 0.01
"""The share of an output's elements (at least one) that may fail the value check in a case's twin whatever else
holds: its inputs are the case's elements in another order, which keeps every constraint on a value but not those a
case generator puts on positions (no answer equal to the poison, no tie at a rounding boundary)."""


def replays(spec: OutputSpec, got: torch.Tensor, ref: torch.Tensor, graded_ref: torch.Tensor) -> bool:
    """Whether a twin's output fails as a replay of the graded call would: it misses more of the twin's answer than
    TWIN_SLACK, and at least half as many elements as the graded call's right answer would (what a call that hands
    back its first call's values, or noise, misses). The twin's outputs are judged to stop such a replay
    (grader/judge/provenance.py); a kernel that is merely wrong fails the case's own tests, and its twin, whose
    values differ from device to device with the case's sizes, should not add failures of its own there (on the
    H200, task 21's round_half_up.py missed 3,996 of 393,216 words of b2_large's twin, its ties: the right answer
    of the graded call misses nearly all of them)."""
    bad = int(bad_values(spec, got, ref)[0].sum())
    if bad <= max(1, int(TWIN_SLACK * ref.numel())):
        return False
    return bad * 2 >= int(bad_values(spec, graded_ref.to(ref.dtype), ref)[0].sum())
