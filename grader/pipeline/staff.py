"""The staff's side of the speed tier: the reference's timing run (once per task, cached by what it depends on)
and the shared Triton cache warmed by the staff's solutions."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from grader.config import ROOT, CourseConfig, TaskSpec
from grader.isolation.runner import JobSpec, run_shard
from grader.isolation.schedule import Scheduler
from grader.pipeline.oracle import Prepared
from grader.pipeline.plan import launch_job, specialization_key
from grader.pipeline.result import environment
from grader.protocol import (
    GradingTree,
    JobFolders,
    Kind,
    RecordStream,
    WorkerRun,
    create_trusted,
)
from grader.worker import tritoncache


def staff_timing(task: TaskSpec, spec: JobSpec, tree: GradingTree,
                 shard_runner: Callable[[JobFolders, int, JobSpec, list[int]], list[WorkerRun]],
                 inductor: bool = False) -> tuple[Path | None, Path | None]:
    """Time the task's reference solution as `spec` times a submission (same baselines, cases, clock and sandbox),
    in a job of its own. Returns its record stream and its Inductor cache (None, None when the task has no
    solution.py: every speed test of the task then fails closed, with nothing to check the submission's run
    against). `inductor`: run it even when a kept record could be reused, for its Inductor cache (a server's run,
    whose every timing worker then starts from the torch.compile baseline's compiled code)."""
    solution = task.folder / "solution.py"
    if not solution.is_file():
        return None, None
    folders = tree.job(f"staff-timing-{task.id}")
    kept = staff_cache_dir() / staff_key(task, spec)
    # timed before, with these files, versions and GPU: its record again
    if (kept / "records.bin").is_file() and not inductor:
        records = folders.records("kept")
        with os.fdopen(create_trusted(records), "wb") as fh:
            fh.write((kept / "records.bin").read_bytes())
        # Not its Inductor cache: Inductor's entries name the folders of the run that made them, which a worker
        # of another grading run may not read (the baseline then raised PermissionError); each timing worker
        # compiles the baseline itself (a few seconds, beside the case workers).
        return records, None
    # The spec is a student's (their timing worker's): its bytes (`source`) are theirs, so the staff run gets the
    # solution's own, or it would time the student's file under the solution's name.
    runs = shard_runner(folders, 0, replace(spec, submission=solution, source=solution.read_bytes()), [])
    run = runs[-1] if runs else None
    inductor = folders.run_folder(run.run_id) / "inductor" if run else None
    if run and run.records and _timed_well(RecordStream(run.records), spec) and not run.timed_out:
        with contextlib.suppress(OSError):  # kept for the next grading run (a cache: losing it costs a run)
            kept.parent.mkdir(parents=True, exist_ok=True)
            new = Path(tempfile.mkdtemp(prefix=".new-", dir=kept.parent))
            shutil.copyfile(run.records, new / "records.bin")
            os.rename(new, kept)
    return (run.records if run else None), inductor


def _timed_well(stream: RecordStream, spec: JobSpec) -> bool:
    """Whether a staff timing run is worth keeping: it finished, and every speed test has a record without an
    error that was timed with the GPU alone (a failure, perhaps passing, is timed again next time)."""
    if not stream.status.get("done") or stream.problem:
        return False
    for item in spec.perf:
        try:
            record = stream.tensors(Kind.PERF, item.index)
        except Exception:  # noqa: BLE001 - unreadable: not kept
            return False
        if not isinstance(record, dict) or record.get("error") or record.get("gate", "alone") != "alone":
            return False
    return True


STAFF_CACHE_ENV = "GRADER_STAFF_TIMING"


def staff_cache_dir() -> Path:
    """Where the staff's timing runs are kept between grading runs: $GRADER_STAFF_TIMING, else a folder of the
    grader's user's own cache. Not the shared Triton cache: a staff record holds the reference's outputs, and no
    worker may read it (the sandbox lets workers read the shared cache only)."""
    return Path(os.environ.get(STAFF_CACHE_ENV) or Path.home() / ".cache" / "triton-grader-staff")


PROTOCOL_FILES = tuple(f"protocol/{name}.py" for name in ("__init__", "tree", "trusted_files", "job", "records", "runs",
                                                            "gate"))
"""The files of grader/protocol that define the worker's job, its record stream and the GPU gate (`staff_key`)."""


def staff_key(task: TaskSpec, spec: JobSpec) -> str:
    """What a staff timing run depends on: the task's files that define it (statement data, solution, baselines,
    oracle), the grader's timing code, the worker's settings, torch, Triton and the GPU. The same key: the same
    run, timed once (on a course's GPU box, the first grading run of a task times it; every later one, a student's
    check of five files too, reuses it)."""
    h = hashlib.sha256()
    files = [task.folder / "task.yaml", task.folder / "solution.py", ROOT / "reference" / f"{task.reference}.py",
             *(ROOT / p.baseline for p in spec.perf),
             *(Path(__file__).parents[1] / n for n in ("worker/timing.py", "worker/main.py", *PROTOCOL_FILES,
                                                       "judge/speed.py"))]
    for f in files:
        h.update(str(f.name).encode())
        with contextlib.suppress(OSError):
            h.update(f.read_bytes())
    env = environment("cuda" if spec.device == "cuda" else spec.device)
    h.update(json.dumps([env.get("torch"), env.get("triton"), env.get("gpu"), spec.device, spec.specialize,
                         [dataclasses.asdict(p) for p in spec.perf], spec.sandbox, sys.version], sort_keys=True,
                        default=str).encode())
    return f"{task.id}-{h.hexdigest()[:24]}"


def warm_shared_cache(tasks: list[TaskSpec], device: str, cfg: CourseConfig, prepared: Prepared, tree: GradingTree,
                      pool: Scheduler) -> None:
    """Start a warm-up run of each task's staff solution (trusted: not sandboxed), one config on one case per
    specialization, compiling into a cache of its own. What it builds that only depends on a kernel's signature,
    Triton's C launchers (a C compiler run of about a second each), is then copied into the grader's shared Triton
    cache, where the sandboxed workers of that task find it instead of building it in their job's own cache; the
    reference's compiled kernels are not (every worker can read the shared cache). The runs go first in the pool
    and are not waited for: a worker that starts before a launcher is published builds its own."""
    tritoncache.prune_shared()
    seen = set()
    for task in tasks:
        solution = task.folder / "solution.py"
        if task.id in seen or not solution.is_file():
            continue
        seen.add(task.id)
        specialize = cfg.specialize if task.specialize is None else task.specialize
        first: dict[tuple, int] = {}
        for i, case in enumerate(prepared.cases(task)):
            first.setdefault(specialization_key(case, specialize), i)
        spec = JobSpec(solution, task.entry, list(task.kernels), device, prepared.case_paths(task),
                       cfg.limits(task, device, address_check=False)[0], fork_server=cfg.fork_server,
                       specialize=specialize, launch=launch_job(task), warm=True, bounds=False)
        pool.add(("warm", task.id), functools.partial(_warm_and_publish, tree.job(f"warm-{task.id}"), spec,
                                                      sorted(first.values())), priority=(0, -1))


def _warm_and_publish(folders: JobFolders, spec: JobSpec, cases: list[int]) -> None:
    run_shard(folders, 0, spec, cases)
    tritoncache.publish_launchers(folders.cache)


def _portable(path: Path) -> str:
    """A path under the repository as relative to it (a Ray node has the repository elsewhere), else absolute."""
    path = path.resolve()
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)
