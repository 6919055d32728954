"""The folder tree of one grading run.

A grading run's tree (made by `GradingTree`, one per `grade_jobs` call):

    <base>/                 mode 0711: traversable, not listable (a sandboxed compiler's access(2) needs the walk)
      trusted/              mode 0700: what no worker may write (Landlock gives no worker any right in it)
        cases/<task>/case-<i>.pt      one case's inputs, as the judge made them (and the address check's inputs)
        answers/<task>.pt             the oracle's answers, for judge processes
        gates/gpu-<n>.turnstile, .room   one GPU's gate (`GpuGate`): who may use the GPU while a speed test times
        jobs/job-<n>/                 per job: each worker run's job-<run>.json, records-<run>.bin and
                                      worker-<run>.log, and the suite's pytest.ini and report.json
      scratch/              mode 0711
        job-<n>/triton-cache/         the job's Triton cache: written by the job's workers, read by the next ones
        job-<n>/run-<run>/            one worker run's own folder, made empty by the runner before the run starts:
                                      its working directory, temp folder, a copy of the submission, Inductor's cache

A worker may write only its run folder and its job's Triton cache. The trusted side never opens a path inside
`scratch/` except to remove it (shutil.rmtree does not follow links) and to fill a run folder before its worker
starts, when no worker can write it yet.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

from grader.protocol.gate import GpuGate
from grader.protocol.trusted_files import create_trusted

TRUSTED_MODE = 0o700
SCRATCH_MODE = 0o711


@dataclass(frozen=True)
class JobFolders:
    """The two folders of one job: `trusted` (the runner's and the judge's) and `scratch` (its workers')."""

    trusted: Path
    scratch: Path

    def job_file(self, run_id: str) -> Path:
        """The job description of one worker run (WorkerJob as JSON), written by the runner."""
        return self.trusted / f"job-{run_id}.json"

    def records(self, run_id: str) -> Path:
        """The record stream of one worker run: written only through the descriptor the worker was handed."""
        return self.trusted / f"records-{run_id}.bin"

    def log(self, run_id: str) -> Path:
        """What one worker run printed (its stdout and stderr)."""
        return self.trusted / f"worker-{run_id}.log"

    def pytest_files(self) -> tuple[Path, Path]:
        """The suite's pytest.ini and JSON report (grader/pipeline/grading.py run_suite)."""
        return self.trusted / "pytest.ini", self.trusted / "report.json"

    @property
    def cache(self) -> Path:
        """The job's Triton cache, shared by its workers (each compiles once what the next may reuse)."""
        return self.scratch / "triton-cache"

    def run_folder(self, run_id: str) -> Path:
        return self.scratch / f"run-{run_id}"


class GradingTree:
    """The folders of one grading run under `base` (see the module's docstring)."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.trusted = base / "trusted"
        self.scratch = base / "scratch"
        os.chmod(base, SCRATCH_MODE)
        for folder, mode in ((self.trusted, TRUSTED_MODE), (self.scratch, SCRATCH_MODE)):
            folder.mkdir(mode=mode, exist_ok=True)
            os.chmod(folder, mode)

    def case_file(self, task_id: str, index: int) -> Path:
        return self.trusted / "cases" / task_id / f"case-{index}.pt"

    def answers_file(self, task_id: str) -> Path:
        return self.trusted / "answers" / f"{task_id}.pt"

    def gate(self, gpu: int | None) -> str:
        """The gate of one GPU (None: the only one), made here on first use: its files' common stem, as a worker
        job names it (`GpuGate.open`)."""
        stem = self.trusted / "gates" / f"gpu-{'any' if gpu is None else gpu}"
        stem.parent.mkdir(mode=TRUSTED_MODE, exist_ok=True)
        for suffix in GpuGate.SUFFIXES:
            with contextlib.suppress(FileExistsError):
                os.close(create_trusted(stem.with_suffix(suffix)))
        return str(stem)

    def job(self, name: str) -> JobFolders:
        """The folders of a job (`name`: job-0003, staff-timing-<task>, warm-<task>), made here."""
        folders = JobFolders(self.trusted / "jobs" / name, self.scratch / name)
        folders.trusted.mkdir(parents=True, mode=TRUSTED_MODE, exist_ok=True)
        folders.scratch.mkdir(mode=SCRATCH_MODE, exist_ok=True)
        os.chmod(folders.scratch, SCRATCH_MODE)
        return folders


def make_run_folder(folders: JobFolders, run_id: str) -> Path:
    """A worker run's own folder, new and empty (a name that exists already is refused: nothing planted there is
    ever used), and the job's Triton cache."""
    folders.cache.mkdir(exist_ok=True)
    if folders.cache.is_symlink() or not folders.cache.is_dir():
        raise OSError(f"{folders.cache} is not a folder")
    run = folders.run_folder(run_id)
    run.mkdir(mode=SCRATCH_MODE)
    os.chmod(run, SCRATCH_MODE)
    return run
