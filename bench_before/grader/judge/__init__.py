"""The judge: turns what a worker saw into verdicts. It never imports the submission.

Everything the worker sent is treated as untrusted data: the record streams are read through grader/protocol
(bounded frames, tensors loaded with `weights_only=True`), each record's shape is checked, and anything missing,
late or garbled fails that test with a message (fail closed). No text of a worker's becomes a path.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import torch

from grader.config import OutputSpec, TaskSpec
from grader.judge import known_errors, provenance
from grader.protocol import Kind, RecordStream, WorkerRun, guards, torch_ops

DTYPES = {"int8": torch.int8, "int16": torch.int16, "int32": torch.int32, "int64": torch.int64,
          "uint8": torch.uint8, "float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32,
          "float64": torch.float64, "bool": torch.bool}
SHOW = 5  # elements shown per problem


@dataclass
class CaseData:
    """A case as the judge prepared it: the inputs it sent and the oracle's answer."""

    id: str
    args: list
    kwargs: dict
    expected: tuple
    twin: CaseData | None = None
    """The same case with its inputs' elements in another order, and the oracle's answer for them (the provenance
    check, grader/judge/provenance.py); None where the check is off or the harness launches the kernel."""
    _digests: dict = field(default_factory=dict, repr=False)

    def digest(self, t: torch.Tensor) -> str:
        """The sha256 of an input as sent (computed once)."""
        if id(t) not in self._digests:
            self._digests[id(t)] = guards.digest(t)
        return self._digests[id(t)]


@dataclass
class Verdict:
    ok: bool
    message: str = ""
    staff: str = ""
    """Tracebacks and logs: for staff only."""
    picture: bytes | None = None
    """PNG of the first failing output (tasks with `pictures: true`)."""
    note: str = ""
    """Something the student should know even when the test passes (many autotune configs make grading slow)."""
    printed: str = ""
    """What the student's code printed during the first failing call (theirs: shown to them, marked, under the
    test; it decides nothing)."""
    metric: dict[str, float] | None = None
    """A speed test's measurement, for the leaderboard (grader/course/leaderboard.py): `speedup` over the baseline,
    `vs_reference` (that speedup over the reference's in the staff's run) and `ms` (the submission's median)."""


LOAD_TEXT = 2000
"""The longest text field of a LOAD record read (an import error's text is cut to 600 characters by the worker)."""


def check_load(load: object) -> dict:
    """A LOAD record as the worker makes it, or ValueError: {"ok": bool, "kernels": {name: {"kind": str,
    "configs": [str]}}, "torch_ops": [dict], "error"/"traceback": str, "where": [str], "sandbox": {str: str},
    "error_kind"/"api": str (grader/protocol/known_errors.py)}."""
    if not isinstance(load, dict) or not isinstance(load.get("ok"), bool):
        raise ValueError("the load report has an unexpected shape")
    kernels = load.get("kernels")
    if not isinstance(kernels, dict) or not all(
            isinstance(k, str) and isinstance(v, dict) and isinstance(v.get("kind"), str)
            and isinstance(v.get("configs"), list) and all(isinstance(c, str) for c in v["configs"])
            for k, v in kernels.items()):
        raise ValueError("the load report's kernels have an unexpected shape")
    for name, kind in (("torch_ops", list), ("where", list), ("sandbox", dict), ("error", str), ("traceback", str),
                       ("error_kind", str), ("api", str)):
        if name in load and not isinstance(load[name], kind):
            raise ValueError(f"the load report's {name} has an unexpected shape")
    if not all(isinstance(w, str) for w in load.get("where") or []) or \
            not all(isinstance(r, dict) for r in load.get("torch_ops") or []):
        raise ValueError("the load report's lines have an unexpected shape")
    if isinstance(load.get("error"), str):
        load["error"] = load["error"][:LOAD_TEXT]
    return load


@dataclass
class WorkerResults:
    """The record streams the workers of one (submission, task) left, read defensively."""

    runs: list[WorkerRun]
    streams: list[RecordStream] = field(default_factory=list)
    staff: RecordStream | None = None
    """The staff's timing run of the reference (speed tests)."""
    load: dict | None = None
    problem: str | None = None
    case_ids: list[str] = field(default_factory=list)
    """The task's case ids, by index: a progress report names its case by index, and only an index of the run's
    own cases is read (no text of the worker's names a case in a message)."""

    @classmethod
    def read(cls, runs: list[WorkerRun], staff_records: Path | None = None,
             case_ids: list[str] | None = None) -> WorkerResults:
        """Read every run's stream. The LOAD report used for messages is that of the first run that held no input
        of a non-public case (a worker grading public cases never saw a hidden one), else of any run."""
        res = cls(runs=runs, streams=[RecordStream(r.records) for r in runs],
                  staff=RecordStream(staff_records) if staff_records else None, case_ids=list(case_ids or []))
        order = sorted(range(len(runs)), key=lambda k: (runs[k].sees_hidden, not runs[k].cases, k))
        why = ""
        for k in order:
            if not res.streams[k].has(Kind.LOAD):
                continue
            try:
                res.load = check_load(res.streams[k].json(Kind.LOAD))
                break
            except (OSError, ValueError, KeyError) as exc:
                why = f"{type(exc).__name__}: {exc}"
        if res.load is None:
            first = runs[order[0]] if runs else None
            exit_ = first.describe_exit() if first else "no worker was started"
            garbled = "; ".join(s.problem for s in res.streams if s.problem)
            res.problem = (f"the worker reported nothing about loading the submission ({exit_}"
                           + (f"; {why or garbled}" if why or garbled else "") + ")")
        return res

    @property
    def log(self) -> str:
        return "\n".join(f"--- worker {r.run_id}: {r.describe_exit()}\n{r.log}" for r in self.runs)

    def case_runs(self, index: int, case_id: str) -> tuple[list[dict] | None, str]:
        """The runs of one case, or None and the reason they are missing."""
        for stream in reversed(self.streams):
            if not stream.has(Kind.CASE, index):
                continue
            try:
                data = stream.tensors(Kind.CASE, index)
                if not isinstance(data, dict) or data.get("id") != case_id or not isinstance(data.get("runs"), list):
                    raise ValueError("unexpected content")
                return resolve_shared(data["runs"]), ""
            except Exception as exc:  # noqa: BLE001 - garbled results fail closed
                return None, f"the worker's result for this case is unreadable ({type(exc).__name__}: {exc})"
        for run in self.runs:
            if index in run.crashed:
                return None, f"{run.crashed[index]} while running this case (the later cases ran in a new worker)"
        k = next((k for k in reversed(range(len(self.runs))) if index in self.runs[k].cases), None)
        if k is None:
            return None, "not run: no worker was started for this case"
        run, stream = self.runs[k], self.streams[k]
        status = stream.status
        at = status.get("index")
        current = self.case_ids[at] if type(at) is int and at in run.cases and at < len(self.case_ids) else None
        if stream.problem and not status:
            return None, f"not run: {run.describe_exit()}; its records are garbled ({stream.problem})"
        if status.get("fatal") and current is not None:
            return None, (f"not run: the worker stopped after case {current}: the CUDA context was lost (the cases "
                          "after it run in a new worker)")
        if current == case_id:
            return None, f"{run.describe_exit()} while running this case"
        if current is not None:
            return None, f"not run: {run.describe_exit()} while running case {current}"
        return None, f"not run: {run.describe_exit()} before any case started"

    def perf_record(self, index: int, test_id: str) -> tuple[dict | None, str]:
        """The timing record of speed test `index`, or None and the reason it is missing."""
        k = next((k for k in reversed(range(len(self.runs))) if not self.runs[k].cases), None)
        if k is None:
            return None, "not timed: no timing worker was started"
        run, stream = self.runs[k], self.streams[k]
        if stream.has(Kind.PERF, index):
            return _timing_record(stream, index, test_id, "the worker's")
        status = stream.status
        if status.get("perf") == test_id:
            return None, f"not timed: {run.describe_exit()} while timing this test"
        return None, f"not timed: {run.describe_exit()} before this test was timed"

    def staff_perf_record(self, index: int, test_id: str) -> tuple[dict | None, str]:
        """The staff's timing record of speed test `index` (the reference against the same baseline, in a worker
        of its own), or None and why not."""
        if self.staff is None or not self.staff.has(Kind.PERF, index):
            return None, "the staff's timing run of the reference left no record"
        return _timing_record(self.staff, index, test_id, "the staff's")


def _timing_record(stream: RecordStream, index: int, test_id: str, whose: str) -> tuple[dict | None, str]:
    """The timing record of speed test `test_id` in a stream, or None and why it cannot be used (garbled: fail
    closed)."""
    try:
        data = stream.tensors(Kind.PERF, index)
        if not isinstance(data, dict) or data.get("test") != test_id:
            raise ValueError("unexpected content")
        return data, ""
    except Exception as exc:  # noqa: BLE001 - garbled results fail closed
        return None, f"{whose} timing record is unreadable ({type(exc).__name__}: {exc})"


def resolve_shared(runs: list) -> list:
    """Put back the outputs the worker sent once for several runs (grader/worker/main.py `share_outputs`): an output
    `same_as: [run, output]` gets that earlier run's tensor (the same object, so its values are judged once).
    A reference to anything but an earlier run's tensor output is a garbled result (ValueError)."""
    for r, run in enumerate(runs):
        outputs = run.get("outputs") if isinstance(run, dict) else None
        for out in outputs if isinstance(outputs, list) else []:
            if not isinstance(out, dict) or "same_as" not in out:
                continue
            ref = out.pop("same_as")
            if not (isinstance(ref, list) and len(ref) == 2 and all(type(v) is int for v in ref) and 0 <= ref[0] < r):
                raise ValueError(f"an output refers to {ref!r}, not to an earlier run")
            earlier = runs[ref[0]].get("outputs")
            target = earlier[ref[1]] if isinstance(earlier, list) and 0 <= ref[1] < len(earlier) else None
            if not isinstance(target, dict) or not isinstance(target.get("tensor"), torch.Tensor):
                raise ValueError(f"an output refers to {ref!r}, which holds no tensor")
            out["tensor"] = target["tensor"]
    return runs


# ------------------------------------------------------------------------------------------------- formatting


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


# ------------------------------------------------------------------------------------------------- the checks


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


def check_run(task: TaskSpec, case: CaseData, run: dict, device: str, names: list[str],
              memo: dict | None = None, import_ops: list | None = None,
              twin_of: CaseData | None = None, tritons: known_errors.Tritons | None = None) -> list[str]:
    """Every problem of one call (one case under one config); empty when it is right. `memo` keeps the value
    checks of outputs shared by several runs (one tensor object), so each is judged once. `twin_of`: `case` is
    that case's twin, and an output's values fail only as a replay's would (`replays`). `tritons`: the releases
    a known error's message names."""
    memo = {} if memo is None else memo
    if run.get("error"):
        return [error_problem(run, device, tritons)]
    problems = []
    outputs = run.get("outputs")
    if not isinstance(outputs, list):
        return ["the worker's record of this call has no outputs (garbled result)"]
    # On the interpreter: each launched kernel was also compiled for CUDA targets (grader/worker/gpu_compile.py).
    for msg in dict.fromkeys(launch.get("gpu_compile") for launch in run.get("launches") or []
                             if isinstance(launch, dict)):
        if msg is not None:
            problems.append(msg if isinstance(msg, str) else "the worker's launch record is garbled")
    # On the interpreter: every address each kernel touched, against the tensors of its launch
    # (grader/worker/address_check.py).
    if run.get("bounds_tampered"):
        problems.append("the grader's address check was changed during the call (its interpreter patches were "
                        "replaced): the call's memory accesses cannot be trusted")
    found = run.get("bounds") or []
    if not isinstance(found, list) or not all(isinstance(f, dict) for f in found):
        problems.append("the worker's record of out-of-bounds accesses is garbled")
    else:
        problems.extend(f"out of bounds: {describe_bounds(f)}" for f in found)
    if len(outputs) != len(task.outputs):
        want = ", ".join(o.name for o in task.outputs)
        return [f"returned {len(outputs)} value(s) ({run.get('returned')}); expected {len(task.outputs)}: ({want})"]

    # Out-of-bounds writes and changed inputs.
    inputs = run.get("inputs") or []
    sent = [a for a in case.args[:len(case.args) - n_buffers(task)] if isinstance(a, torch.Tensor)]
    sent += [v for v in case.kwargs.values() if isinstance(v, torch.Tensor)]
    if len(inputs) != len(sent):
        return ["the worker's record of the inputs does not match what was sent (garbled result)"]
    for rec, original, name in zip(inputs, sent, names):
        if list(rec["size"]) != list(original.shape) or rec.get("dtype") != guards.dtype_name(original.dtype):
            return ["the worker's record of the inputs does not match what was sent (garbled result)"]
        msg = check_guards(rec, f"input {name}", input=True)
        if msg:
            problems.append(msg)
        if rec.get("sha256") != case.digest(original):
            problems.append(f"input {name} was modified by the call; inputs must stay unchanged")
    allocs = run.get("allocs") or []
    owners = {o.get("alloc"): task.outputs[k].name for k, o in enumerate(outputs) if o.get("kind") == "tensor"}
    for j, rec in enumerate(allocs):
        label = owners.get(j) or f"a scratch buffer allocated by the wrapper (#{j}, shape {rec.get('size')})"
        msg = check_guards(rec, label)
        if msg:
            problems.append(msg)

    # Provenance: the torch work the submission did itself, during the call and while it was imported.
    kernel_made = [(spec.name, ref.numel()) for spec, ref in zip(task.outputs, case.expected) if spec.from_kernel]
    if kernel_made:
        if not isinstance(run.get("torch_ops"), list):
            return ["the worker's record of this call has no op audit (garbled result)"]
        name, size = min(kernel_made, key=lambda item: item[1])
        msg = torch_ops.check([*(import_ops or []), *run["torch_ops"]], task.torch_ops, size, name,
                              task.python_reads)
        if msg:
            problems.append(msg)

    launches = run.get("launches") or []
    for spec, got, ref in zip(task.outputs, outputs, case.expected):
        if got.get("kind") != "tensor":
            problems.append(f"{spec.name}: expected a tensor, got {got.get('kind')} {got.get('repr', '')}")
            continue
        t = got["tensor"]
        want_dtype = resolve_dtype(spec, case.args)
        head = []
        if t.dtype != want_dtype:
            head.append(f"dtype {guards.dtype_name(t.dtype)}, expected {guards.dtype_name(want_dtype)}")
        if not spec.shape_ok(tuple(t.shape), tuple(ref.shape)):
            head.append(f"shape {list(t.shape)}, expected {spec.shape_wanted(tuple(ref.shape))}")
        if str(got.get("device", "")).split(":")[0] != device:
            head.append(f"on device {got.get('device')}, expected {device}")
        if head:
            problems.append(f"{spec.name}: " + "; ".join(head))
            continue
        if spec.from_kernel:
            alloc = got.get("alloc")
            if not launches:
                problems.append(f"{spec.name}: no Triton kernel was launched during the call; the answer must "
                                "come from your kernel, not from torch operations")
            elif alloc is None or not (0 <= alloc < len(allocs)):
                problems.append(f"{spec.name} was not allocated with torch.empty/empty_like/zeros... inside the "
                                "call (the grader surrounds those with guard bands), or was produced by a torch "
                                "operation instead of your kernel")
            else:
                base, size = allocs[alloc].get("base", -1), allocs[alloc].get("nbytes", 0)
                if not any(base <= p < base + size for launch in launches for p in launch.get("ptrs", [])):
                    problems.append(f"{spec.name} was not passed to any Triton kernel launched during the call; "
                                    "it must be written by your kernel")
                problems.extend(write_problems(spec.name, alloc, run.get("writes")))
        key = (id(t), id(ref), spec.name)
        if key not in memo:  # the tensors are kept too, so their ids stay theirs while the memo lives
            memo[key] = (value_problem(spec, t.reshape(ref.shape), ref), t, ref)
        if memo[key][0] and twin_of is not None:
            graded_ref = twin_of.expected[task.outputs.index(spec)]
            if not replays(spec, t.reshape(ref.shape), ref, graded_ref.reshape(ref.shape)):
                continue
        if memo[key][0]:
            problems.append(memo[key][0])
    return problems


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
        found.append(f"{name}: {e['elements']} element(s) {_WHEN[e['when']].format(where=where)}: the values of an "
                     "output must be computed by your kernel; values placed with torch, numpy or Python do not "
                     "count")
    return found[:1]


def n_buffers(task: TaskSpec) -> int:
    """Output buffers at the end of a case's arguments: the harness makes them when it launches the kernel."""
    return len(task.outputs) if task.launch else 0


def input_names(task: TaskSpec, case: CaseData) -> list[str]:
    if task.launch:
        params = task.kernels[task.launch.kernel].params
    else:
        params = [p for p in task.functions[task.entry] if not p.startswith("*")]
    names = [params[i] if i < len(params) else f"#{i}" for i, a in enumerate(case.args) if isinstance(a, torch.Tensor)]
    names += [k for k, v in case.kwargs.items() if isinstance(v, torch.Tensor)]
    return names


def judge_case(task: TaskSpec, index: int, case: CaseData, results: WorkerResults, device: str,
               tritons: known_errors.Tritons | None = None) -> Verdict:
    runs, why = results.case_runs(index, case.id)
    if runs is None:
        return Verdict(False, why, staff=results.log[-4000:])
    if not runs:
        return Verdict(False, "the worker recorded no run of this case (garbled result)")
    names = input_names(task, case)
    failing, staff = [], []
    memo: dict = {}
    twins = [r for r in runs if isinstance(r, dict) and r.get("twin") is True]
    runs = [r for r in runs if not (isinstance(r, dict) and r.get("twin") is True)]
    if not runs:
        return Verdict(False, "the worker recorded no run of this case (garbled result)")
    twin_failed = None
    if case.twin is not None:
        problems = twin_problems(task, case, runs, twins, device, names, (results.load or {}).get("torch_ops"),
                                 tritons)
        if problems:
            twin_failed = ("the twin", problems, twins[0] if twins else runs[0])
            if twins and twins[0].get("traceback"):
                staff.append(twins[0]["traceback"])
    for run in runs:
        try:
            problems = check_run(task, case, run, device, names, memo, (results.load or {}).get("torch_ops"),
                                 tritons=tritons)
        except (KeyError, TypeError, ValueError, RuntimeError, IndexError) as exc:
            problems = [f"the worker's record of this call is garbled ({type(exc).__name__}: {exc})"]
        if run.get("fatal"):
            problems.append(run["fatal"])
        if problems:
            configs = run.get("configs") or {}
            label = "; ".join(f"{k} [{v}]" for k, v in configs.items()) or "the only configuration"
            failing.append((label, problems, run))
            if run.get("traceback"):
                staff.append(run["traceback"])
    if twin_failed is not None:  # what the graded calls show already is not said again
        said = {p for _, problems, _ in failing for p in problems}
        twin_failed = (*twin_failed[:1], [p for p in twin_failed[1] if p not in said], twin_failed[2])
    if twin_failed is not None and twin_failed[1]:
        failing.insert(0, twin_failed)
    if not failing:
        n = len(runs)
        return Verdict(True, f"passed under {n} autotune config{'s' if n > 1 else ''}")
    lines = []
    if failing[0][0] == "the twin":
        label, problems, _ = failing.pop(0)
        lines.append("called again with the same shapes and the inputs' elements in another order (the provenance "
                     "check):")
        lines += [f"  - {p}" for p in problems]
        if not failing:
            n = len(runs)
            lines.append(f"(the graded call passed under {n} autotune config{'s' if n > 1 else ''})")
            return Verdict(False, "\n".join(lines), staff="\n\n".join(staff)[-20000:])
    first_problems = failing[0][1]
    if len(failing) > 1 and all(p == first_problems for _, p, _ in failing):
        lines.append(f"under all {len(failing)} configs:")
        lines += [f"  - {p}" for p in first_problems]
    else:
        for label, problems, _ in failing[:3]:
            lines.append(f"under config {label}:")
            lines += [f"  - {p}" for p in problems]
        if len(failing) > 3:
            lines.append(f"... and {len(failing) - 3} more failing config(s)")
    if len(failing) < len(runs):
        lines.append(f"({len(runs) - len(failing)} of {len(runs)} configs passed)")
    picture = None
    if task.pictures:
        try:
            drawn = draw_run(task, case, failing[0][2])
        except (KeyError, TypeError, ValueError, RuntimeError, IndexError) as exc:
            drawn, staff = None, [*staff, f"no picture: {type(exc).__name__}: {exc}"]
        if drawn:
            picture, pid_line = drawn
            if pid_line:
                lines.append(pid_line)
    return Verdict(False, "\n".join(lines), staff="\n\n".join(staff)[-20000:], picture=picture,
                   printed=printed_text(failing[0][2]))


PRINTED_CHARS = 2000
"""The most of a call's printed output read from a record (the worker keeps no more)."""


def printed_text(run: object) -> str:
    """A run's printed output as the student will see it: a string of at most PRINTED_CHARS, and how much more
    there was; "" when the record has none or it is not of the worker's shape (it decides nothing either way)."""
    printed = run.get("printed") if isinstance(run, dict) else None
    if not isinstance(printed, dict) or not isinstance(printed.get("text"), str):
        return ""
    text = printed["text"][:PRINTED_CHARS]
    dropped = printed.get("dropped")
    more = len(printed["text"]) - len(text) + (dropped if isinstance(dropped, int) and dropped > 0 else 0)
    return text + (f"\n[... {more} more characters not kept]" if more else "")


def twin_problems(task: TaskSpec, case: CaseData, runs: list[dict], twins: list[dict], device: str,
                  names: list[str], import_ops: list | None, tritons: known_errors.Tritons | None = None) -> list[str]:
    """The provenance check of one case: its twin's call judged as any call (against the oracle's answer for the
    twin's inputs), and the two recorded calls compared (grader/judge/provenance.py)."""
    if len(twins) != 1:
        return ["the worker's record of this case holds no call of its twin (garbled result)"]
    twin = twins[0]
    try:
        problems = check_run(task, case.twin, twin, device, names, {}, import_ops, twin_of=case, tritons=tritons)
        index = twin.get("config_index")
        graded = next((r for r in runs if r.get("config_index") == index and "provenance" in r), None)
        if graded is None or "provenance" not in twin:
            if not problems:
                problems.append("the worker's record of this case holds no provenance record (garbled result)")
        elif not graded.get("error") and not twin.get("error"):
            msg = provenance.compare(graded["provenance"], twin["provenance"], task.python_reads)
            if msg:
                problems.append(msg)
    except (KeyError, TypeError, ValueError, RuntimeError, IndexError) as exc:
        problems = [f"the worker's record of this call is garbled ({type(exc).__name__}: {exc})"]
    if twin.get("fatal"):
        problems.append(twin["fatal"])
    return problems


def tiles_of(task: TaskSpec, case: CaseData, ndim: int) -> list[tuple[int, int] | None] | None:
    """Per output dimension, (block, grid axis) of the blocking that walks it, from task.yaml's launch.tiles."""
    if not task.launch or not task.launch.tiles or len(task.launch.tiles) != ndim:
        return None
    tiles = []
    for pair in task.launch.tiles:
        if pair is None or pair not in task.launch.grid or pair[1] not in case.kwargs:
            tiles.append(None)
        else:
            tiles.append((int(case.kwargs[pair[1]]), task.launch.grid.index(pair)))
    return tiles


def draw_run(task: TaskSpec, case: CaseData, run: dict) -> tuple[bytes, str] | None:
    """A picture of the first output of a failing call that has wrong, unwritten or out-of-bounds elements."""
    from grader.judge import pictures

    outputs = run.get("outputs")
    if not isinstance(outputs, list) or len(outputs) != len(task.outputs):
        return None
    allocs = run.get("allocs") or []
    for spec, got, ref in zip(task.outputs, outputs, case.expected):
        if got.get("kind") != "tensor" or not spec.shape_ok(tuple(got["tensor"].shape), tuple(ref.shape)):
            continue
        t = got["tensor"].reshape(ref.shape)
        poison = guards.bits_view(t) == guards.poison_bits(t.dtype)
        bad, _ = bad_values(spec, t, ref)
        state = pictures.classify(t, bad, poison)
        before, after = [], []
        alloc = got.get("alloc")
        if isinstance(alloc, int) and 0 <= alloc < len(allocs):
            positions, offset, n_span = guard_damage(allocs[alloc])
            before = [int(p) - offset for p in positions if p < offset]
            after = [int(p) - offset - n_span for p in positions if p >= offset + n_span]
        if not (state != pictures.OK).any() and not before and not after:
            continue
        title = f"{task.id} / {case.id}: {spec.name} {list(t.shape)}"
        return pictures.render(spec.name, title, state, before, after, tiles_of(task, case, t.dim()))
    return None
