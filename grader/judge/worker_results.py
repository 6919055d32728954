"""Reading what the workers of one (submission, task) left (`WorkerResults`): their LOAD reports, each case's runs
and each speed test's timing record, read defensively (anything missing or garbled is a reason, never an
exception), and a run's printed output as the student sees it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import torch

from grader.protocol import Kind, RecordStream, WorkerRun

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
        if stream.problem and stream.before_loading:
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
