"""Starts a worker for one (submission, task) and stops it at its wall-clock limit.

The worker runs in a new session, so a timeout kills its whole process group (compiler children included).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from grader.config import ROOT


@dataclass
class WorkerRun:
    jobdir: Path
    returncode: int | None
    timed_out: bool
    seconds: float
    log: str
    run_id: str = "0-0"
    cases: list[int] = field(default_factory=list)

    def status(self) -> dict:
        try:
            data = json.loads((self.jobdir / f"status-{self.run_id}.json").read_text())
            return data if isinstance(data, dict) else {}
        except (OSError, ValueError):
            return {}

    def describe_exit(self) -> str:
        if self.timed_out:
            return f"the worker was stopped at its time limit ({self.seconds:.0f} s)"
        if self.returncode is not None and self.returncode < 0:
            try:
                name = signal.Signals(-self.returncode).name
            except ValueError:
                name = f"signal {-self.returncode}"
            return f"the worker was killed by {name}"
        return f"the worker exited with code {self.returncode}"


@dataclass
class JobSpec:
    """What a worker needs to know; the same for every run of one (submission, task)."""

    submission: Path
    entry: str
    kernels: list[str]
    device: str
    inputs: Path
    timeout_s: float
    benchmark_autotune: bool = False
    """Also run the stock autotuner first (for scripts/bench_grading.py)."""
    gpu: int | None = None
    """Pin the worker to this GPU (CUDA_VISIBLE_DEVICES) when the machine has several."""


def run_worker(jobdir: Path, run_id: str, spec: JobSpec, cases: list[int]) -> WorkerRun:
    """One worker process over `cases` (indices into the inputs file), stopped at the time limit."""
    job = {"submission": str(spec.submission.resolve()), "entry": spec.entry, "kernels": spec.kernels,
           "device": spec.device, "inputs": str(spec.inputs.resolve()), "cases": cases,
           "benchmark_autotune": spec.benchmark_autotune}
    (jobdir / f"job-{run_id}.json").write_text(json.dumps(job))
    device, timeout_s = spec.device, spec.timeout_s
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT)  # the grader package only; the submission is loaded by path
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    if spec.gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = str(spec.gpu)
    if device == "cpu":
        env["TRITON_INTERPRET"] = "1"
    else:
        env.pop("TRITON_INTERPRET", None)
    log_path = jobdir / f"worker-{run_id}.log"
    scratch = jobdir / "cwd"  # the submission's working directory: empty, and not where results are written
    scratch.mkdir(exist_ok=True)
    start = time.monotonic()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "grader.worker", str(jobdir), run_id],
            cwd=scratch, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        timed_out = False
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # the worker and anything it started
            except ProcessLookupError:
                pass
            proc.wait()
    text = log_path.read_text(errors="replace")
    return WorkerRun(jobdir=jobdir, returncode=None if timed_out else proc.returncode, timed_out=timed_out,
                     seconds=time.monotonic() - start, log=text[-20000:], run_id=run_id, cases=list(cases))


MAX_RESTARTS = 4
"""Workers started again after a crash (a signal, or a lost CUDA context), each from the case after the one that
crashed. A hang is not restarted: it would cost another full time limit."""


def run_shard(jobdir: Path, shard: int, spec: JobSpec, cases: list[int]) -> list[WorkerRun]:
    """Run `cases` in one worker, and in a new one after each crash. Writes crash-<i>.json for a crashed case."""
    runs: list[WorkerRun] = []
    remaining = list(cases)
    while remaining:
        run = run_worker(jobdir, f"{shard}-{len(runs)}", spec, remaining)
        runs.append(run)
        status = run.status()
        if run.timed_out or status.get("done") or len(runs) > MAX_RESTARTS:
            break
        current = status.get("index")
        if current is None or current not in remaining:
            break  # died before any case: a restart would die the same way
        if not (jobdir / f"case-{current}.pt").exists():
            (jobdir / f"crash-{current}.json").write_text(json.dumps({"message": run.describe_exit()}))
        remaining = remaining[remaining.index(current) + 1 :]
    return runs
