"""The verdict of a speed test (task.yaml `perf`), from the timing records the workers left in the job folder.

Two records meet here. The submission's timing worker timed its calls against the baseline (torch.compile of the
task's math, or an unfused path), interleaved, in the submission's own process. The staff's timing worker did the
same for the reference solution, on the same inputs and clock, in a process no submission ran in. The first gives
the speedup; both together give the speedup relative to the reference's, and a check the submission's process
cannot forge: the baseline must have run about as fast beside the submission as it did beside the reference. A
submission that slows the baseline down (torch.compiler.set_stance("force_eager") at import is one line) fails.
"""

from __future__ import annotations

import torch

from grader.config import TaskSpec
from grader.judge import CaseData, Verdict, WorkerResults, compare_values, resolve_dtype

STAFF_SLACK = 1.5
"""How much longer the baseline may keep the GPU busy in the submission's timing run than in the staff's before the
speed test fails. Busy time, not span: on the H100 box, task 10's compiled baseline (two kernels, 8 MB) spanned
0.050 ms in one run and 0.079 ms in another, by the host's gaps between its kernels while judges shared the CPU.
Its kernels' time does not move so; a baseline forced to run eagerly moves several times the bytes."""

CLOCK_WORDS = {"gpu": "GPU time from the first kernel's start to the last one's end",
               "wall": "host time from the call to the end of its GPU work"}


def times(record: dict, side: str, reps: int) -> list[float]:
    """A side's times as floats, or ValueError: the list must hold `reps` finite positive numbers."""
    values = record.get(side)
    if not isinstance(values, list) or len(values) != reps:
        raise ValueError(f"{side}: expected {reps} times, got {len(values) if isinstance(values, list) else values!r}")
    out = []
    for t in values:
        if not isinstance(t, (int, float)) or isinstance(t, bool) or not (0 < float(t) < 1e6):
            raise ValueError(f"{side}: a time is not a positive number: {t!r}")
        out.append(float(t))
    return out


def percentile(values: list[float], q: float) -> float:
    """The q-quantile (0 <= q <= 1), interpolating linearly between order statistics."""
    s = sorted(values)
    pos = q * (len(s) - 1)
    lo = int(pos)
    return s[lo] + (s[min(lo + 1, len(s) - 1)] - s[lo]) * (pos - lo)


def median(values: list[float]) -> float:
    return percentile(values, 0.5)


def _outputs_checked(task: TaskSpec, case: CaseData, outputs: list) -> str | None:
    """Why the last timed call's outputs are not the checked answer, or None (a fast wrong kernel earns nothing)."""
    if len(outputs) != len(task.outputs):
        return f"the last timed call returned {len(outputs)} value(s); expected {len(task.outputs)}"
    for spec, got, ref in zip(task.outputs, outputs, case.expected):
        t = got.get("tensor") if isinstance(got, dict) else None
        if not isinstance(t, torch.Tensor) or not spec.shape_ok(tuple(t.shape), tuple(ref.shape)) \
                or t.dtype != resolve_dtype(spec, case.args):
            return f"the last timed call's {spec.name} is not a tensor of the checked dtype and shape"
        msg = compare_values(spec, t.reshape(ref.shape), ref)
        if msg:
            return f"the last timed call's result is wrong: {msg}"
    return None


def _staff_side(record: dict | None, why: str, reps: int, clock: str) -> tuple[dict, float, float] | str:
    """The staff run's record and its medians (reference, baseline), or why it cannot be used."""
    if record is None:
        return why
    if record.get("error"):
        return f"the staff's timing run failed: {record['error']}"
    try:
        if record.get("clock", "wall") != clock:
            raise ValueError(f"its clock is {record.get('clock')!r}, the submission's {clock!r}")
        return record, median(times(record, "submission", reps)), median(times(record, "baseline", reps))
    except (TypeError, ValueError) as exc:
        return f"the staff's timing record is garbled ({exc})"


def _baseline_slowed(record: dict, staff: dict, reps: int) -> tuple[float, float, float, str]:
    """How much longer the baseline took in the submission's run than in the staff's: (ratio, the two medians,
    what was compared). Its GPU busy time where both records have one (the host's gaps between kernels vary with
    the machine's load), else its time. ValueError for a garbled record."""
    key, what = ("busy_baseline", "GPU busy time") if "busy_baseline" in record and "busy_baseline" in staff \
        else ("baseline", "time")
    mine, theirs = median(times(record, key, reps)), median(times(staff, key, reps))
    return mine / theirs, mine, theirs, what


def judge_perf(task: TaskSpec, index: int, case: CaseData, case_ok: Verdict, results: WorkerResults) -> Verdict:
    """A speed test: the case must pass, the timed calls' outputs must be right, the baseline must have run as fast
    as in the staff's run (STAFF_SLACK), and the baseline's median time over the submission's must reach the
    threshold, unless the test is worth 0 points (informational). Anything missing or garbled fails (closed)."""
    test = task.perf[index]
    if not case_ok.ok:
        return Verdict(False, f"not timed: case {test.case} fails, and speed counts only for a correct result")
    record, why = results.perf_record(index, test.id)
    if record is None:
        return Verdict(False, why, staff=results.log[-4000:])
    if record.get("error"):
        return Verdict(False, f"not timed: {record['error']}", staff=str(record.get("traceback", "")))
    try:
        sub, base = times(record, "submission", test.reps), times(record, "baseline", test.reps)
        outputs = record["outputs"]
        if not isinstance(outputs, list):
            raise ValueError("outputs is not a list")
        clock_name = record.get("clock", "wall")
        clock = CLOCK_WORDS[clock_name]
    except (KeyError, TypeError, ValueError) as exc:
        return Verdict(False, f"the worker's timing record is garbled ({exc})")
    wrong = _outputs_checked(task, case, outputs)
    if wrong:
        return Verdict(False, wrong)
    t_sub, t_base = median(sub), median(base)
    ratio = t_base / t_sub
    # The spread, so a result near the threshold reads as such: run r of each side were timed next to each other,
    # and the middle half of those pairs' ratios is where a rerun would most likely land.
    pairs = [b / s for s, b in zip(sub, base)]
    low, high = percentile(pairs, 0.25), percentile(pairs, 0.75)
    text = (f"baseline {t_base * 1e3:.4f} ms, yours {t_sub * 1e3:.4f} ms ({clock}, medians of {test.reps} "
            f"interleaved runs): speedup {ratio:.2f}x (half of the side-by-side pairs between {low:.2f}x and "
            f"{high:.2f}x)")
    staff = str(record.get("method", ""))
    if isinstance(record.get("gate"), str) and record["gate"] != "alone":  # the worker could not have the GPU alone
        text += "; timed beside other workers' kernels: the GPU was not free in time (a rerun may differ)"
    try:  # the host clock's times beside the GPU clock's (absent when the host clock decided)
        walls = times(record, "wall_submission", test.reps), times(record, "wall_baseline", test.reps)
        staff += (f"; host clock, medians: yours {median(walls[0]) * 1e3:.4f} ms, "
                  f"baseline {median(walls[1]) * 1e3:.4f} ms")
    except ValueError:
        pass
    # The staff's run: the reference's speedup over the same baseline, and how fast the baseline ran there.
    side = _staff_side(*results.staff_perf_record(index, test.id), test.reps, clock_name)
    if isinstance(side, str):
        return Verdict(False, f"{text}; not judged: {side}", staff=staff)
    staff_record, t_ref, t_base_staff = side
    try:
        slowed, work, work_staff, what = _baseline_slowed(record, staff_record, test.reps)
    except (TypeError, ValueError) as exc:
        return Verdict(False, f"{text}; not judged: a timing record is garbled ({exc})", staff=staff)
    if slowed > STAFF_SLACK:
        return Verdict(False, f"{text}; not judged: the baseline's {what} was {slowed:.2f}x as long beside your "
                              f"code as in the staff's run ({work * 1e3:.4f} ms against {work_staff * 1e3:.4f} ms): "
                              f"your code must not slow it down (at most {STAFF_SLACK:g}x)", staff=staff)
    ref_ratio = t_base_staff / t_ref
    text += (f"; the reference's speedup in the staff's run: {ref_ratio:.2f}x, so yours is "
             f"{ratio / ref_ratio:.2f}x the reference's")
    metric = {"speedup": round(ratio, 4), "vs_reference": round(ratio / ref_ratio, 4), "ms": round(t_sub * 1e3, 5)}
    if test.points == 0:
        return Verdict(True, f"{text}; informational (0 points), the target is >= {test.threshold:g}x", staff=staff,
                       metric=metric)
    return Verdict(ratio >= test.threshold, f"{text}; need >= {test.threshold:g}x", staff=staff, metric=metric)
