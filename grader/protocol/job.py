"""The job a worker run is told: `WorkerJob`, written by the runner as JSON in the job's trusted folder and read
back by the worker (every field checked), and the speed tests it times (`PerfItem`)."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any


@dataclass
class PerfItem:
    """A speed test the worker times after its cases (grader/worker/timing.py time_calls)."""

    index: int
    test: str
    case: int
    """The case whose inputs are timed (an index into the task's cases; its inputs are in `WorkerJob.inputs`)."""
    baseline: str
    """The staff baseline's file: relative to the repository, or absolute."""
    warmup: int
    reps: int
    clock: str = "gpu"


@dataclass
class WorkerJob:
    """Everything one worker run is told, written by the runner as `job-<run>.json` in the trusted folder."""

    run_id: str
    submission: str
    """The copy of the submission in the run folder, made by the runner: what the worker imports."""
    entry: str
    kernels: list[str]
    device: str
    inputs: dict[int, str]
    """Case index -> that case's inputs file, for the cases this run runs or times, and no others."""
    cases: list[int] = field(default_factory=list)
    """The cases to run, in order."""
    run_folder: str = ""
    """The worker's working directory and temp folder, and the only folder besides `cache` it may write."""
    cache: str = ""
    """The job's Triton cache (written by the job's workers)."""
    perf: list[PerfItem] = field(default_factory=list)
    sandbox: dict | None = None
    """{"limits": {Limits field: value}, "timeout_s": seconds}, or None for no sandbox."""
    benchmark_autotune: bool = False
    specialize: bool = True
    launch: dict | None = None
    gpu_compile: bool = True
    compile_passed: list[str] = field(default_factory=list)
    """GPU compile check keys (grader/worker/gpu_compile.py `digest`) that the job's finished workers reported as
    compiling: this worker does not compile them again (`compile_passed` in grader/protocol/records.py)."""
    compile_processes: int = 0
    """On CUDA, the child processes that compile an autotuned kernel's configs side by side at a case's first
    launch (grader/worker/parallel_compile.py): 0 = the worker's cores, at most 8; 1 = one after another."""
    bounds: bool = True
    rerun_bounds: bool = False
    """Check addresses through an interpreted re-run of each call (always on CUDA; on the CPU for tests)."""
    writes: bool = True
    """The write check (grader/worker/write_check.py): each guarded buffer at each launch and at the end of the call."""
    provenance: bool = True
    """The provenance check (grader/worker/provenance.py): each case's twin is called, and it and one graded call are
    recorded checkpoint by checkpoint."""
    warm: bool = False
    gate: str = ""
    """The GPU gate's stem (`GradingTree.gate`), or "" for none: CUDA workers use the GPU through it."""

    def to_json(self) -> str:
        data = dataclasses.asdict(self)
        data["inputs"] = {str(k): v for k, v in self.inputs.items()}
        return json.dumps(data)

    @classmethod
    def from_json(cls, text: str) -> WorkerJob:
        """The job, or ValueError naming the first field that is missing, unknown or of the wrong type."""
        data = json.loads(text)
        if not isinstance(data, dict):
            raise ValueError("a worker job must be a JSON object")
        known = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - set(known))
        if unknown:
            raise ValueError(f"unknown field(s) in a worker job: {', '.join(unknown)}")
        data["inputs"] = {int(k): v for k, v in _typed(data, "inputs", dict).items()}
        data["perf"] = [PerfItem(**_typed({"item": p}, "item", dict)) for p in data.get("perf") or []]
        for name, kind in (("run_id", str), ("submission", str), ("entry", str), ("device", str),
                           ("kernels", list), ("cases", list)):
            _typed(data, name, kind)
        passed = data.get("compile_passed", [])
        if not isinstance(passed, list) or not all(isinstance(d, str) for d in passed):
            raise ValueError("a worker job's compile_passed must be a list of digests")
        if type(data.get("compile_processes", 0)) is not int or data.get("compile_processes", 0) < 0:
            raise ValueError("a worker job's compile_processes must be a count")
        if not all(isinstance(v, str) for v in data["inputs"].values()):
            raise ValueError("a worker job's inputs must be file names")
        if not all(type(i) is int and i in data["inputs"] for i in data["cases"]):
            raise ValueError("a worker job's cases must be indices of its inputs")
        return cls(**data)


def _typed(data: dict, name: str, kind: type) -> Any:
    if not isinstance(data.get(name), kind):
        raise ValueError(f"a worker job's {name} must be a {kind.__name__}")
    return data[name]
