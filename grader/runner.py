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
from dataclasses import dataclass
from pathlib import Path

from grader.config import ROOT


@dataclass
class WorkerRun:
    jobdir: Path
    returncode: int | None
    timed_out: bool
    seconds: float
    log: str

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


def write_job(jobdir: Path, submission: Path, entry: str, kernels: list[str], device: str, inputs: Path,
              benchmark_autotune: bool = False) -> None:
    """`benchmark_autotune` makes the worker also run the stock autotuner first (for scripts/bench_grading.py)."""
    jobdir.mkdir(parents=True, exist_ok=True)
    job = {"submission": str(submission.resolve()), "entry": entry, "kernels": kernels, "device": device,
           "inputs": str(inputs.resolve()), "benchmark_autotune": benchmark_autotune}
    (jobdir / "job.json").write_text(json.dumps(job))


def run_worker(jobdir: Path, device: str, timeout_s: float) -> WorkerRun:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT)  # the grader package only; the submission is loaded by path
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    if device == "cpu":
        env["TRITON_INTERPRET"] = "1"
    else:
        env.pop("TRITON_INTERPRET", None)
    log_path = jobdir / "worker.log"
    scratch = jobdir / "cwd"  # the submission's working directory: empty, and not where results are written
    scratch.mkdir(exist_ok=True)
    start = time.monotonic()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "grader.worker", str(jobdir)],
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
                     seconds=time.monotonic() - start, log=text[-20000:])
