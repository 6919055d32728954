"""Grading one or many (submission, task) pairs: `grade_jobs`, which puts the stages together (`GradingRun`).

Stage by stage:
1. static checks on the source (grader/gates/static.py, nothing executed);
2. each case's inputs and the oracle's answer (`reference/`), once per task and device (oracle.py);
3. shards: which cases run together in one worker (plan.py); the staff's timing runs and warm-up (staff.py);
4. worker processes import and run the submission on those inputs, from one pool (grader/isolation/);
5. pytest, with pytest-json-report, runs grader/judge/suite.py in a judge process over the worker's results, and
   the JSON report becomes a result: per-test outcome, points and message (students), plus logs (staff)
   (result.py).
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import multiprocessing
import os
import queue
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path

import torch

from grader.config import CourseConfig, TaskSpec
from grader.gates import static
from grader.isolation.runner import (
    ForkClient,
    JobSpec,
    forget_timing,
    run_shard,
    stop_timing,
    timing_stopped,
    worker_env,
)
from grader.isolation.schedule import Scheduler, granted
from grader.judge.known_errors import Tritons
from grader.pipeline import toolchain
from grader.pipeline.oracle import Prepared
from grader.pipeline.plan import launch_job, plan_shards, shard_cost
from grader.pipeline.result import (
    GradingContext,
    Job,
    environment,
    grader_failure,
    judge_job,
    judge_job_apart,
    reused,
)
from grader.pipeline.staff import (
    _portable,
    staff_timing,
    warm_shared_cache,
)
from grader.protocol import (
    GradingTree,
    JobFolders,
    Kind,
    PerfItem,
    RecordStream,
    WorkerRun,
    compile_passed,
)
from grader.results import TaskResult
from grader.results.outcome import Outcome
from grader.worker.parallel_compile import CHILDREN_MAX

CHILDREN_EXTRA = CHILDREN_MAX - 1
"""A CUDA worker's compile children beyond itself, at most, when the pool has the slots free (schedule.py)."""


def resolve_device(requested: str) -> str:
    if requested == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if requested == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: no CUDA GPU is visible to torch on this machine")
    return requested


# ------------------------------------------------------------------------------------------- prepared inputs


TREE_PREFIX = "grader-"


def remove_leftovers(parent: Path | None = None) -> list[Path]:
    """Remove the grading trees that killed runs left behind (`grader-<pid>-*` whose process is gone); returns
    them. A tree of a run still going (its pid alive) is left alone."""
    removed = []
    parent = parent or Path(tempfile.gettempdir())
    for path in parent.glob(f"{TREE_PREFIX}*-*"):
        match = re.fullmatch(rf"{TREE_PREFIX}(\d+)-\w+", path.name)
        if not match or path.is_symlink() or not path.is_dir():
            continue
        try:
            os.kill(int(match.group(1)), 0)
            continue  # still running
        except ProcessLookupError:
            pass
        except PermissionError:
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed


def grade_jobs(jobs: list[Job], cfg: CourseConfig, device: str, workers: int = 0,
               keep: Path | None = None, on_result: Callable[[TaskResult], object] | None = None,
               benchmark_autotune: bool = False, backend: str = "local", address: str | None = None,
               static_checks: bool = True, judge_pool: ProcessPoolExecutor | None = None) -> list[TaskResult]:
    """Grade every job. Workers run in parallel (here, or as Ray tasks with backend='ray'); each job is judged
    here as soon as its workers are done, and handed to `on_result` then. A job whose grading fails in the
    grader itself gets a failed result of its own (`grader_failure`); every other job is graded as usual.
    `static_checks=False` skips the static policy (every file counts as passing it): only for tests that prove
    the layers behind it (the op audit, the sandbox) on their own. `judge_pool` (from `judge_processes`): judge
    processes that outlive this call, for a caller that grades again and again (the submission server); without
    it, a call of more than one job starts its own and stops them at the end."""
    workers, shard_runner = _runner(cfg, device, workers, backend, address)
    remove_leftovers()
    base = Path(tempfile.mkdtemp(prefix=f"{TREE_PREFIX}{os.getpid()}-"))
    # grader/protocol: a trusted half no worker can reach, and a scratch half with a folder per worker run.
    tree = GradingTree(base)
    try:
        cores = max(1, _cpu_count())
        judges = judges_for(cfg, device, len(jobs), cores)  # judge processes: below
        if judge_pool is not None:
            judges = judge_pool._max_workers
        run = GradingRun(jobs, cfg, device, tree, workers, judges, shard_runner, keep=keep, on_result=on_result,
                         benchmark_autotune=benchmark_autotune, backend=backend, static_checks=static_checks,
                         judge_pool=judge_pool)
        return run.grade()
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _runner(cfg: CourseConfig, device: str, workers: int, backend: str, address: str | None) -> tuple[int, Callable]:
    """How many workers at once, and what runs a shard (here, or as a Ray task with backend='ray')."""
    shard_runner = run_shard
    if backend == "ray":
        from grader.isolation.ray_backend import RayShards

        shard_runner = RayShards(address, device)
    # Workers spend much of their time starting up and waiting on the compiler's subprocesses: on CUDA, 1.5
    # per core graded the five INT8 solutions in 40 s cold on a 16-core H100 box, against 57 s with one per core.
    cores = max(1, _cpu_count())
    workers = workers or cfg.workers or (cores + cores // 2 if device == "cuda" else cores)
    if cfg.fork_server and backend == "local":  # its imports overlap with the inputs being made below
        ForkClient.get(device, worker_env(device))
    return workers, shard_runner


def serving_run(cfg: CourseConfig, device: str, workers: int = 0, backend: str = "local",
                address: str | None = None) -> GradingRun:
    """A GradingRun for a service's life (`GradingRun.serve`): its own grading tree (removed by `close_run`), its
    judge processes (config.yaml's grading.judges, by default one per two cores) and pool."""
    workers, shard_runner = _runner(cfg, device, workers, backend, address)
    remove_leftovers()
    tree = GradingTree(Path(tempfile.mkdtemp(prefix=f"{TREE_PREFIX}{os.getpid()}-")))
    cores = max(1, _cpu_count())
    judges = cfg.judges if cfg.judges >= 0 else max(1, cores // 2)
    run = GradingRun([], cfg, device, tree, workers, judges, shard_runner, backend=backend, live=True,
                     slots=min(workers, cores) if backend == "local" else workers)
    if run.judge_pool is not None:  # every judge process started now (torch imported), not at the first verdicts
        for _ in range(judges):
            run.judge_pool.submit(time.sleep, 0.5)
    return run


def close_run(run: GradingRun) -> None:
    """After `serve` returned: the judge processes stopped and the grading tree removed."""
    if run.judge_pool is not None:
        run.judge_pool.shutdown(wait=False, cancel_futures=True)
    shutil.rmtree(run.tree.base, ignore_errors=True)


class GradingRun:
    """Grading, stage by stage: each admitted job's context (static checks, identical files graded once:
    `prepare`), its shards (`plan`), the oracle's bookkeeping (`track`), its items in the pool (`queue_work`: case
    shards, the staff's timing run of its task, its timing worker), and each job judged and recorded as soon as its
    runs and its task's answers are there (`finish`, `first_pass`, `done`). Jobs are numbered in the order they
    are admitted (`n`).

    Two ways to run it: `grade()` admits `jobs` and returns when every one is recorded (`grade_jobs`: a class, a
    file); `serve()` runs for a service's life (the submission server, grader/server/scheduler.py), admitting the
    jobs `submit` hands it whenever they come, with no barrier between them: one pool, one grading tree, one
    oracle (each task's inputs and answers made once), judge processes and staff timing runs kept, and a job's
    state dropped once it is recorded."""

    def __init__(self, jobs: list[Job], cfg: CourseConfig, device: str, tree: GradingTree, workers: int,
                 judges: int, shard_runner: Callable, keep: Path | None = None,
                 on_result: Callable[[TaskResult], object] | None = None, benchmark_autotune: bool = False,
                 backend: str = "local", static_checks: bool = True,
                 judge_pool: ProcessPoolExecutor | None = None, live: bool = False,
                 slots: int | None = None) -> None:
        self.jobs, self.cfg, self.device, self.tree = jobs, cfg, device, tree
        self.given_judges = judge_pool
        self.workers, self.judges, self.shard_runner = workers, judges, shard_runner
        self.keep, self.on_result, self.benchmark_autotune = keep, on_result, benchmark_autotune
        self.backend, self.static_checks = backend, static_checks
        self.live = live
        """A service's run (`serve`): results are handed on and forgotten, not kept to return."""
        self.prepared = Prepared(device, tree, save_answers=bool(judges), audit=cfg.bounds, twins=cfg.provenance)
        self.contexts: dict[int, tuple[Job, JobFolders, GradingContext]] = {}
        self.numbers = itertools.count()
        self.handed: set[int] = set()
        """Jobs whose full result was handed on (a serving run forgets them then)."""
        self.lane: dict[int, int] = {}
        """Job -> its lane: 0 a student's submission, 1 a staff regrade (every item of lane 1 after lane 0's)."""
        self.callbacks: dict[int, Callable[[TaskResult], object]] = {}
        # what a known error's message names (grader/judge/known_errors.py): this side's triton, the course's
        self.tritons = Tritons(installed=environment(device).get("triton") or "",
                               course=cfg.toolchain.get("triton", ""))
        self.results: dict[int, TaskResult] = {}
        # Identical files for one task are graded once: every later copy gets the first one's result under its
        # own name (`reused`), and its staff JSON says whose run it was.
        self.first_of: dict[tuple[str, int], int] = {}
        self.copies: dict[int, list[int]] = {}
        self.later: set[int] = set()
        self.per_task: dict[str, int] = {}
        self.static_s: dict[int, float] = {}
        self.oracle_s: dict[str, float] = {}
        self.gpu_turn = itertools.count()
        self.staff_runs: dict[str, tuple[Path | None, Path | None]] = {}
        """Task id -> its staff timing run's (records, Inductor cache), once it ran."""
        self.finished: dict[tuple[int, int], list[WorkerRun]] = {}
        """(job, shard) -> its runs, as soon as the shard is done (a timing worker looks at its speed cases)."""
        self.warmed: set[str] = set()
        self.specialize: dict[int, bool] = {}
        self.shards: dict[int, list[list[int]]] = {}
        self.runs: dict[int, list[WorkerRun]] = {}
        self.pending: dict[int, int] = {}
        self.shards_left: dict[int, int] = {}
        self.staff_records: dict[int, Path | None] = {}
        self.keys: dict[int, set] = {}
        """Job -> the keys of its pool items (forgotten with it)."""
        # Judging costs up to a second or two a job at CUDA sizes. Here it runs in a pool of judge processes (one
        # thread each, reading the oracle's answers that this process computed): config.yaml's grading.judges,
        # by default one per two cores, so a class's judging keeps up with its workers (on the 16-core H100 box,
        # 40 students: 132 s with 8 judges, 139-152 s with 4, when the machine's CPU was 86% and 66-74% busy).
        # With 0, or a single job, it runs here, one job at a time.
        self.judge_pool = judge_pool or (judge_processes(judges) if judges else None)
        self.judging: dict = {}
        """A judge process's future -> (job, whether it judges the job's cases only: `first_pass`)."""
        self.answered: dict[str, threading.Event] = {}
        self.oracle_failed: dict[str, BaseException] = {}
        self.oracle_threads: list[threading.Thread] = []
        self.waiting: list[tuple[int, bool]] = []
        """Jobs ready to be judged whose task's answers are not there yet, in the order they became ready."""
        self.gpus = visible_gpus() if device == "cuda" else []
        # A job with speed tests is judged twice: once its cases are done (`first_pass`), and once timed.
        self.timed_jobs: set[int] = set()
        self.given_first: set[int] = set()
        self.progress = Progress(0 if live else len(jobs))
        self.inbox: queue.Queue = queue.Queue()
        """What `submit` hands a serving run: admitted by the run's own thread, the only one that changes its
        state (pool threads write `finished` and `staff_runs` only)."""
        # grader/isolation/schedule.py: one pool runs the staff's timing runs, the case shards and the timing
        # workers, by priority and lane; a job is judged as soon as its last item is done.
        # A service's pool has the machine's cores as its budget (`slots`: its threads, 1.5 a core on CUDA, are
        # then never all busy) and gives the speed tier a quarter of them; a class's keeps a slot a thread and a
        # third of them for timing workers.
        slots = slots or workers
        self.pool = Scheduler(workers, {"timing": max(1, (slots // 4) if live else (workers // 3)),
                                        "regrade": max(1, slots - 1)}, slots=slots, forever=live)

    def grade(self) -> list[TaskResult]:
        """Admit every job, run until each is recorded; the results in the order of the jobs."""
        try:
            numbers = self.admit(self.jobs)
            self.run_pool()
        finally:
            self.pool.close()
        self.drain(block=True)
        self.print_trace()
        if self.judge_pool is not None and self.judge_pool is not self.given_judges:
            self.judge_pool.shutdown()
        return [self.results[n] for n in numbers]

    def print_trace(self) -> None:
        if os.environ.get("GRADER_TRACE"):  # when each item of the pool ran (scripts/bench_class.py, staff)
            for key, start, end in sorted(self.pool.trace, key=lambda t: t[1]):
                print(f"trace {start:8.2f} {end:8.2f} {end - start:7.2f}  {key}", file=sys.stderr)

    # ------------------------------------------------------------------------------------------- a service's run

    def submit(self, jobs: list[Job], on_result: Callable[[TaskResult], object], lane: int = 0) -> threading.Event:
        """Hand jobs to a serving run: admitted within a fraction of a second, whatever else runs (the event is
        set then); `on_result` gets each job's first pass (`result.pending` names its speed tests still to time)
        and its full result."""
        admitted = threading.Event()
        self.inbox.put((list(jobs), on_result, lane, admitted))
        return admitted

    def prepare_tasks(self, tasks: list[TaskSpec]) -> None:
        """Make these tasks' inputs, answers and warm-up now (a service at its start), not at its first job."""
        self.inbox.put((tasks, None, None, threading.Event()))

    def room(self, lane: int = 0) -> int:
        """How many more case items of `lane` the pool could start now (grader/isolation/schedule.py `room`): a
        student's (lane 0) go ahead of every waiting regrade item, so those do not count against it."""
        return self.pool.room("case", ignore="regrade" if lane == 0 else None)

    def serve(self, stop: threading.Event) -> None:
        """Run until `stop` is set: admit what `submit` hands over, judge and record each job as it is done."""
        def idle() -> None:
            self.take_inbox()
            self.flush()
            self.drain(block=False)
            if stop.is_set():
                self.pool.close()

        try:
            for key, result in self.pool.results(idle=idle):
                if key[0] in ("shard", "timing"):
                    self.collect(key, result)
                idle()
        finally:
            self.pool.close()
            if self.judge_pool is not None and self.judge_pool is not self.given_judges:
                self.judge_pool.shutdown(wait=False, cancel_futures=True)

    def take_inbox(self) -> None:
        while True:
            try:
                jobs, on_result, lane, admitted = self.inbox.get_nowait()
            except queue.Empty:
                return
            if on_result is None:
                self.warm_tasks(jobs)
                admitted.set()
                continue
            try:
                numbers = self.admit(jobs, lane)
            except Exception as exc:  # noqa: BLE001 - the grader's own failure: these jobs fail, the run goes on
                for job in jobs:
                    on_result(grader_failure(job, self.device, exc))
                continue
            finally:
                admitted.set()
            for n in numbers:
                self.callbacks.setdefault(n, on_result)
            for n in numbers:  # refused or judged before anything ran (before their callback was known)
                if n in self.results and n not in self.handed:
                    self.hand(n, self.results[n])
                    self.forget(n)

    def warm_tasks(self, tasks: list[TaskSpec]) -> None:
        fresh = [t for t in tasks if t.id not in self.answered]
        for task in fresh:
            try:
                self.prepared.cases(task)
            except Exception:  # noqa: BLE001 - its first job fails with the reason
                continue
            self.answered[task.id] = threading.Event()
        self.start_oracle([t for t in fresh if t.id in self.answered])
        if self.device == "cuda" and self.cfg.sandbox.enabled:
            self.warm([t for t in fresh if t.id in self.answered])

    # ------------------------------------------------------------------------------------------------ admission

    def admit(self, jobs: list[Job], lane: int = 0) -> list[int]:
        """Number, prepare, plan and queue `jobs`; those refused before anything runs are recorded now."""
        numbers = [next(self.numbers) for _ in jobs]
        for n, job in zip(numbers, jobs):
            self.lane[n] = lane
            self.prepare(n, job)
        runnable = [n for n in numbers if self.contexts[n][2].static.ok and n not in self.results
                    and n not in self.later]
        self.plan(numbers, runnable)
        self.track(numbers, runnable)
        self.queue_work(runnable)
        for n in numbers:
            if not self.pending[n] and n not in self.results and n not in self.later:
                self.when_answered(n)
        for n in numbers:  # refused before anything ran
            if n in self.results and n not in self.handed:
                self.done(n, self.results[n])
        return numbers

    def prepare(self, n: int, job: Job) -> None:
        """Job `n`'s folders and context: its static report and its task's cases, or, for a later copy of a file
        already being graded for the same task, an empty context (it gets the first one's result). A job whose
        preparation fails gets its failed result here."""
        folders = self.tree.job(f"job-{n:04d}")
        try:
            source = job.read()
            # the task object, not only its id: a test may grade one file against two variants of a task
            same = self.first_of.setdefault((hashlib.sha256(source).hexdigest(), id(job.task)), n)
            if same != n:
                self.copies.setdefault(same, []).append(n)
                self.later.add(n)
                self.contexts[n] = (job, folders, GradingContext(job.task, self.device, static.StaticReport(), [],
                                                                 None, self.backend, self.tritons))
                return
            self.per_task[job.task.id] = self.per_task.get(job.task.id, 0) + 1
            t_static = time.perf_counter()
            report = static.check_source(source.decode(errors="replace"), job.task,
                                         self.cfg.always_allowed_imports, job.submission.name)
            if job.notebook is not None and job.notebook.problems:  # a notebook that cannot be read
                report.imports[:0] = list(job.notebook.problems)
            self.static_s[n] = time.perf_counter() - t_static
            if not self.static_checks:
                report.imports = []
            t_oracle = time.perf_counter()
            cases = self.prepared.cases(job.task)
            self.oracle_s[job.task.id] = self.oracle_s.get(job.task.id, 0.0) + time.perf_counter() - t_oracle
        except Exception as exc:  # noqa: BLE001 - this job's failure, not the class's
            self.results[n] = grader_failure(job, self.device, exc)
            report, cases = static.StaticReport(), []
        self.contexts[n] = (job, folders, GradingContext(job.task, self.device, report, cases, None, self.backend,
                                                         self.tritons))

    def plan(self, numbers: list[int], runnable: list[int]) -> None:
        """The shards of the runnable jobs among `numbers`, and the count of pool items each job waits for. A
        serving run splits a job over the slots free at its admission (a lone file over every core; under a
        burst one shard per kind of case, so that no kernel is compiled twice for one file)."""
        contexts = self.contexts
        for n in numbers:
            job = contexts[n][0]
            self.specialize[n] = self.cfg.specialize if job.task.specialize is None else job.task.specialize
            self.runs[n], self.pending[n] = [], 0
        visibility = {n: [c.visibility for c in contexts[n][0].task.cases] for n in runnable}
        workers = max(1, self.room()) if self.live else self.workers
        self.shards.update(plan_shards({n: contexts[n][2].cases for n in runnable}, workers, self.specialize,
                                       visibility))
        for n in numbers:
            self.shards_left[n] = len(self.shards.get(n, []))

    def track(self, numbers: list[int], runnable: list[int]) -> None:
        """The oracle's bookkeeping for new jobs (an event per task whose answers a job waits for, answered in a
        thread of its own, in the order of the jobs), and which of them are timed."""
        fresh = []
        for n in numbers:
            task = self.contexts[n][0].task
            if n not in self.results and n not in self.later and task.id not in self.answered:
                self.answered[task.id] = threading.Event()
                fresh.append(task)
        self.start_oracle(fresh)
        timed = {n for n in runnable if any(self.device in p.devices for p in self.contexts[n][0].task.perf)}
        self.timed_jobs |= timed
        if not self.live:  # a service's run shows no progress: it has no end to count to
            self.progress.total += len(timed)

    def start_oracle(self, tasks: list[TaskSpec]) -> None:
        # The oracle answers each task once, in a thread of its own, while the workers run: a job is judged as
        # soon as its runs and its own task's answers are there (on the H200 box, a class's oracle with twins
        # took 30 s, and every result waited for all of it).
        if tasks:
            thread = threading.Thread(target=self.oracle_work, args=(tasks,), name="grader-oracle", daemon=True)
            thread.start()
            self.oracle_threads = [t for t in self.oracle_threads if t.is_alive()] + [thread]

    # --------------------------------------------------------------------------------------- the pool's items

    def on_gpu(self) -> dict:
        """The next GPU of the round, and its gate (every CUDA worker uses the GPU through it)."""
        if self.device != "cuda":
            return {}
        gpu = self.gpus[next(self.gpu_turn) % len(self.gpus)] if len(self.gpus) > 1 else None
        return {"gpu": gpu, "gate": self.tree.gate(gpu)}

    def warm(self, tasks: list[TaskSpec]) -> None:
        """The staff's warm-up runs of tasks not warmed yet in this run (CUDA, sandboxed workers)."""
        tasks = [t for t in tasks if t.id not in self.warmed]  # (warm_shared_cache takes each task once)
        if tasks:
            self.warmed |= {t.id for t in tasks}
            warm_shared_cache(tasks, self.device, self.cfg, self.prepared, self.tree, self.pool)

    def queue_work(self, runnable: list[int]) -> None:
        """Every item of the pool for these jobs: the staff's warm-up runs (CUDA, sandboxed), then per runnable job
        its case shards and, with speed tests, the staff's timing run of its task and its own timing worker."""
        if self.device == "cuda" and self.cfg.sandbox.enabled:
            self.warm([self.contexts[n][0].task for n in runnable])
        for n in runnable:
            self.keys[n] = set()
            base_spec = self.job_spec(n)
            self.add_shards(n, base_spec)
            self.add_timing(n, base_spec)

    def job_spec(self, n: int) -> JobSpec:
        """What every worker of job `n` is told, before its shard's or its timing's own settings."""
        job = self.contexts[n][0]
        cfg, device = self.cfg, self.device
        timeout_s, stall_s, audit_stall_s = cfg.limits(job.task, device)
        return JobSpec(job.module_path, job.task.entry, list(job.task.kernels), device,
                       self.prepared.case_paths(job.task), timeout_s, self.benchmark_autotune,
                       fork_server=cfg.fork_server, specialize=self.specialize[n],
                       launch=launch_job(job.task), stall_s=stall_s, audit_stall_s=audit_stall_s,
                       sandbox=cfg.sandbox.job(), gpu_compile=cfg.gpu_compile, bounds=cfg.bounds,
                       compile_processes=cfg.compile_processes,
                       writes=cfg.writes, provenance=cfg.provenance, source=job.read())

    def kinds(self, n: int, kind: str) -> tuple[str, ...]:
        return (kind, "regrade") if self.lane[n] else (kind,)

    def add_shards(self, n: int, base_spec: JobSpec) -> None:
        """Job `n`'s case shards, one pool item each."""
        job, folders, ctx = self.contexts[n]
        plan, lane = self.shards[n], self.lane[n]
        public = [("shard", n, k) for k, indices in enumerate(plan)
                  if all(job.task.cases[i].visibility == "public" for i in indices)]
        for k, indices in enumerate(plan):
            hidden = any(job.task.cases[i].visibility != "public" for i in indices)
            spec = replace(base_spec, sees_hidden=hidden, **self.on_gpu())
            cost = shard_cost(ctx.cases, indices, self.specialize[n])
            # Jobs in order, so that results come from the first minute on and files finish one after
            # another, not all at the end; within a job the heaviest shard first. A hidden shard after its
            # job's public ones (it finds their kernels compiled, and on the CPU is told which GPU compile checks
            # they passed), ahead of new jobs' shards (its job is nearly done), or early on an idle thread. A
            # regrade's items (lane 1) after every student's.
            self.pool.add(("shard", n, k), functools.partial(_shard_into, self.finished, (n, k), self.shard_runner,
                                                             folders, k, spec, indices,
                                                             [key[1:] for key in public] if hidden else ()),
                          priority=(lane, 1 if hidden else 2, n, -cost), after=public if hidden else (),
                          early=True, kind=self.kinds(n, "case"), extra=CHILDREN_EXTRA)
            self.keys[n].add(("shard", n, k))
            self.pending[n] += 1

    def add_timing(self, n: int, base_spec: JobSpec) -> None:
        """Job `n`'s timing worker, and its task's staff timing run if no job before it asked for one; nothing for
        a job with no speed test on this device."""
        job, folders, _ = self.contexts[n]
        device = self.device
        perf = [PerfItem(index=i, test=p.id, case=job.task.case_index(p.case),
                         baseline=_portable(job.task.folder / p.baseline), warmup=p.warmup, reps=p.reps,
                         clock=p.clock) for i, p in enumerate(job.task.perf) if device in p.devices]
        if not perf:
            return
        # One timing worker per job, compiling as Triton does (its specializations on). It starts once no
        # case shard waits for a thread (a student's few files: at once), and only its timed calls hold
        # the GPU alone (GpuGate): before them, the case workers still inside finish their call, so a
        # timer beside a full class of case workers waits seconds for the room and holds every case
        # worker up meanwhile (measured on the H200 box with timers started first: 17 files in 279 s).
        # Each task's reference is timed first, the same way, by the staff's run (grader/judge/speed.py: what
        # it proves; kept between grading runs), whose Inductor cache each timing worker starts from. The speed
        # tier is a lane below every case shard: a verdict is given at the first pass, and timed after.
        task = job.task
        _, timer_stall_s, timer_audit_stall_s = self.cfg.limits(task, device, timing=True)
        timer_stall = {"stall_s": timer_stall_s, "audit_stall_s": timer_audit_stall_s}
        if task.id not in self.staff_runs:
            self.staff_runs[task.id] = (None, None)
            staff_spec = replace(base_spec, perf=perf, specialize=True, sees_hidden=True, **timer_stall,
                                 **self.on_gpu())
            self.pool.add(("staff", task.id),
                          functools.partial(_staff_timing_into, self.staff_runs, task, staff_spec, self.tree,
                                            self.shard_runner, self.live),
                          priority=(0, 0, 0, n), kind="timing")
        timing_spec = replace(base_spec, perf=perf, specialize=True, sees_hidden=True, **timer_stall,
                              **self.on_gpu())
        plan = self.shards[n]
        speed_shards = {item.index: next(((n, k) for k, indices in enumerate(plan) if item.case in indices),
                                         None) for item in perf}
        self.pool.add(("timing", n), functools.partial(_timed_run, self.staff_runs, task.id, self.shard_runner,
                                                       folders, len(plan), timing_spec, self.finished,
                                                       speed_shards),
                      priority=(self.lane[n], 3, 0, n), kind=self.kinds(n, "timing"), after=[("staff", task.id)],
                      extra=CHILDREN_EXTRA)
        self.keys[n].add(("timing", n))
        self.pending[n] += 1

    # ------------------------------------------------------------------------------------------ the pool's run

    def run_pool(self) -> None:
        """Run the pool and collect each item's runs as it ends: a job whose items are all done is judged (its
        cases alone once its shards are, while its timing worker runs). Returns once every item is done and
        every task answered."""
        # A job judged in the pool is recorded (on_result) at once, even while other workers run on: a file
        # that hangs until its time limit held every other student's result back with it.
        for key, result in self.pool.results(idle=lambda: (self.flush(), self.drain(block=False))):
            if key[0] not in ("shard", "timing"):
                continue  # a warm-up or the staff's timing run: its job waits for it through the pool
            self.collect(key, result)
            self.flush()
            self.drain(block=False)
        for thread in self.oracle_threads:  # every worker is done: what is judged is recorded meanwhile
            while thread.is_alive():
                thread.join(0.2)
                self.flush()
                self.drain(block=False)
        self.flush()

    def collect(self, key: tuple, result: list[WorkerRun] | BaseException) -> None:
        """The runs of a job's shard or timing worker (`key`): kept with the job's, and the job made ready to be
        judged when it waits for nothing else (or for its timing worker only)."""
        n = key[1]
        if isinstance(result, BaseException):  # run_shard never raises; a scheduling error might
            result = [WorkerRun(records=None, returncode=None, timed_out=False, seconds=0.0, log="",
                                run_id=f"{key[0]}-{n}", problem=f"{type(result).__name__}: {result}")]
        if key[0] == "timing":
            self.staff_records[n] = self.staff_runs[self.contexts[n][0].task.id][0]
        else:
            self.shards_left[n] -= 1
        self.runs[n] += result
        self.pending[n] -= 1
        if not self.pending[n] and n not in self.results:
            self.when_answered(n)
        elif not self.shards_left[n] and key[0] == "shard" and n not in self.results:
            self.when_answered(n, speed_pending=True)  # its cases are done; its timing worker is not

    def oracle_work(self, tasks: list[TaskSpec]) -> None:
        """Each task's answers, in the order of the jobs (an oracle thread)."""
        for task in tasks:
            t_oracle = time.perf_counter()
            try:
                self.prepared.answer(task)
            except Exception as exc:  # noqa: BLE001 - a staff error: that task's jobs fail, with the reason
                self.oracle_failed[task.id] = exc
            finally:
                self.oracle_s[task.id] = self.oracle_s.get(task.id, 0.0) + time.perf_counter() - t_oracle
                self.answered[task.id].set()

    # ------------------------------------------------------------------------------- judging and recording

    def when_answered(self, n: int, speed_pending: bool = False) -> None:
        """Judge job `n` once its task's answers are there (now, if they are)."""
        self.waiting.append((n, speed_pending))
        self.flush()

    def flush(self) -> None:
        """Judge the waiting jobs whose task's answers are there; a job whose task's oracle failed fails."""
        for item in list(self.waiting):
            n, speed_pending = item
            if n not in self.contexts:
                self.waiting.remove(item)
                continue
            event = self.answered.get(self.contexts[n][0].task.id)
            if event is not None and not event.is_set():
                continue
            self.waiting.remove(item)
            if n in self.results:
                continue
            failed = self.oracle_failed.get(self.contexts[n][0].task.id)
            if failed is not None:
                if not speed_pending:
                    self.done(n, grader_failure(self.contexts[n][0], self.device, failed, self.runs[n]))
                continue
            self.finish(n, speed_pending)

    def finish(self, n: int, speed_pending: bool = False) -> None:
        """Judge job `n` from the runs it has; `speed_pending`: its cases only, while its timing worker
        runs (the first pass: `first_pass`)."""
        job, folders, ctx = self.contexts[n]
        then = self.first_pass if speed_pending else self.done
        try:
            if self.judge_pool is None:
                self.prepared.answer(job.task)
                ctx = replace(ctx, speed_pending=speed_pending, _verdicts={})
                then(n, judge_job(job, folders, ctx, list(self.runs[n]), self.staff_records.get(n)))
            else:
                future = self.judge_pool.submit(judge_job_apart, job, folders, ctx.static, self.device,
                                                list(self.runs[n]), self.backend, self.prepared.case_paths(job.task),
                                                self.tree.answers_file(job.task.id), self.staff_records.get(n),
                                                ctx.tritons, speed_pending, self.prepared.answers_key(job.task))
                self.judging[future] = (n, speed_pending)
        except Exception as exc:  # noqa: BLE001
            if not speed_pending:
                self.done(n, grader_failure(job, self.device, exc, self.runs[n]))

    def drain(self, block: bool) -> None:
        """Record what the judge processes have judged (with `block`, all of it, waiting for the rest)."""
        for future in [f for f in self.judging if block or f.done()]:
            n, speed_pending = self.judging.pop(future)
            if n not in self.contexts:
                continue  # recorded and forgotten meanwhile (a first pass that came back after the full result)
            try:
                result = future.result()
            except Exception as exc:  # noqa: BLE001 - a judge process that died, or could not send its result
                if speed_pending:
                    continue  # the full result says it
                result = grader_failure(self.contexts[n][0], self.device, exc, self.runs[n])
            (self.first_pass if speed_pending else self.done)(n, result)

    def hand(self, n: int, result: TaskResult) -> None:
        """Give a result to whoever waits for job `n`'s (its `submit` callback, or the run's `on_result`)."""
        callback = self.callbacks.get(n, self.on_result)
        if callback is not None:
            callback(result)

    def first_pass(self, n: int, result: TaskResult) -> None:
        """A job's result before its speed tests are timed (`result.pending` names them): handed on as soon as its
        cases are judged; the full result replaces it (`done`). One that comes back from a judge process after
        the full result is dropped."""
        if n in self.results or not result.pending:
            return
        result = toolchain.annotate(result, self.cfg.toolchain)
        self.given_first.add(n)
        self.progress.step(f"{self.contexts[n][0].student}/{self.contexts[n][0].task.id}: cases")
        self.hand(n, result)
        job, folders, _ = self.contexts[n]
        failed = {t.name for t in result.tests if t.outcome != Outcome.PASSED.label}
        if all(p.case in failed for p in job.task.perf if self.device in p.devices):
            # Every speed test's case fails: each is "not timed" whatever its timing worker records
            # (grader/judge/speed.py), so the worker is stopped, or never started, and the job judged without it.
            stop_timing(folders)
        for d in self.copies.get(n, []):
            self.hand(d, reused(result, self.contexts[d][0], self.contexts[n][0]))

    def done(self, n: int, result: TaskResult) -> None:
        """Job `n`'s full result: recorded, handed on, its trusted files kept (with `keep`) and its scratch folder
        removed; then the same for each later copy of its file."""
        job, folders, _ = self.contexts[n]
        forget_timing(folders)
        result = toolchain.annotate(result, self.cfg.toolchain)  # graded with the course's torch and triton?
        if n not in self.later:  # what the trusted side spent on this file before any worker (staff only)
            stages = result.staff.setdefault("stages", {})
            stages["static"] = round(self.static_s.get(n, 0.0), 4)
            stages["oracle"] = round(self.oracle_s.get(job.task.id, 0.0) / max(1, self.per_task.get(job.task.id, 1)),
                                     4)
        self.results[n] = result
        self.progress.step(f"{job.student}/{job.task.id}" + (": timed" if n in self.timed_jobs else ""),
                           2 if n in self.timed_jobs and n not in self.given_first else 1,
                           worked=bool(result.staff.get("workers")))
        if n in self.callbacks or not self.live:
            self.hand(n, result)
            self.handed.add(n)
        if self.keep is not None:  # the trusted files: job descriptions, record streams, logs, the suite's report
            shutil.copytree(folders.trusted, self.keep / folders.trusted.name, symlinks=True, dirs_exist_ok=True)
        shutil.rmtree(folders.scratch, ignore_errors=True)
        for d in self.copies.pop(n, []):
            self.done(d, reused(result, self.contexts[d][0], job))
        if self.live and n in self.handed:
            self.forget(n)

    def forget(self, n: int) -> None:
        """A serving run drops a recorded job's state: memory stays flat over thousands of submissions."""
        job, folders, _ = self.contexts.pop(n)
        if self.first_of.get((job.sha256, id(job.task))) == n:
            del self.first_of[(job.sha256, id(job.task))]
        for table in (self.results, self.lane, self.callbacks, self.static_s, self.specialize, self.shards,
                      self.runs, self.pending, self.shards_left, self.staff_records):
            table.pop(n, None)
        keys = self.keys.pop(n, set())
        for key in keys:
            if key[0] == "shard":
                self.finished.pop(key[1:], None)
        self.pool.forget(keys)
        self.later.discard(n)
        self.timed_jobs.discard(n)
        self.given_first.discard(n)
        self.handed.discard(n)
        shutil.rmtree(folders.trusted, ignore_errors=True)


JOBS_PER_JUDGE = {"cpu": 8, "cuda": 2}
"""Jobs a judge process is started for, when config.yaml leaves their number to the grader (`judges: auto`). A
judge process starts by importing torch, the grader and pytest: 1.4-3.3 s of a core (49 starts in the grader's
own tests on the 2-core CPU machine, 2.0 s on average), which the jobs it judges must repay. Judging a job takes
about 0.35 s on the CPU's sizes (the CPU selftest: 58 s for 159 files) and a second or two at CUDA sizes, so on
the CPU a student's five files are judged here, and a class gets its judges as on CUDA."""


def judges_for(cfg: CourseConfig, device: str, jobs: int, cores: int) -> int:
    """Judge processes for a call of `jobs` jobs: config.yaml's grading.judges, or when `auto` one per two cores,
    at most one per JOBS_PER_JUDGE jobs; none for a single job (it is judged here)."""
    if jobs <= 1:
        return 0
    if cfg.judges >= 0:
        return cfg.judges
    return min(cores // 2, jobs // JOBS_PER_JUDGE.get(device, 2))


def judge_processes(n: int) -> ProcessPoolExecutor:
    """`n` judge processes (one thread each), started on first use; `grade_jobs(judge_pool=...)` reuses them."""
    return ProcessPoolExecutor(n, mp_context=multiprocessing.get_context("spawn"), initializer=_judge_process)


def _judge_process() -> None:
    """A judge process's start: one thread (below), and Ctrl-C left to the command (grader/cli.py `entry`), which
    stops the pool: the terminal's SIGINT reaches every process of its group, and each judge printed a traceback."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    torch.set_num_threads(1)


def _staff_timing_into(into: dict, task: TaskSpec, spec: JobSpec, tree: GradingTree, shard_runner,
                       inductor: bool = False) -> None:
    into[task.id] = staff_timing(task, spec, tree, shard_runner, inductor)


def _shard_into(finished: dict, key: tuple[int, int], shard_runner, folders: JobFolders, shard: int,
                spec: JobSpec, cases: list[int], before: list | tuple = ()) -> list[WorkerRun]:
    """Run a shard and keep its runs in `finished`. `before`: the (job, shard) keys of the job's shards this one
    follows (a hidden shard, its job's public ones): what their GPU compile checks passed (on the CPU) is not
    compiled again (grader/protocol/records.py `compile_passed`; a shard that starts early finds none)."""
    if before and spec.gpu_compile and spec.device == "cpu":  # the check runs on the interpreter only
        passed = {d for k in before for run in finished.get(k, []) for d in compile_passed(run.status())}
        spec = replace(spec, compile_passed=tuple(sorted(passed)))
    spec = _compile_share(spec)
    runs = shard_runner(folders, shard, spec, cases)
    finished[key] = runs
    return runs


def case_never_ran(runs: list[WorkerRun], case: int) -> bool:
    """True when a finished shard's runs hold no record of `case`: its worker hung, crashed or ran out of time at
    or before it (a hang is not restarted), so the case fails whatever else happens. A stream that cannot be read
    says nothing: the speed test is then timed, and the judge decides from the same records as ever."""
    try:
        return not any(run.records is not None and RecordStream(run.records).has(Kind.CASE, case) for run in runs)
    except Exception:  # noqa: BLE001 - the worker's records: unreadable means unknown here, never an error
        return False


def _timed_run(staff_runs: dict, task_id: str, shard_runner, folders: JobFolders, shard: int,
               spec: JobSpec, finished: dict | None = None, speed_shards: dict | None = None) -> list[WorkerRun]:
    """A job's timing worker, started from the staff run's Inductor cache. A speed test whose case is already
    known to fail (its shard is done and never recorded it: a hang, a crash) is not timed: the judge says "not
    timed: case ... fails" for it either way (grader/judge/speed.py), and a submission that hangs would hang its timing
    worker too, for a whole stall limit. With no speed test left, no worker starts."""
    perf = [item for item in spec.perf
            if not ((key := (speed_shards or {}).get(item.index)) in (finished or {})
                    and case_never_ran(finished[key], item.case))]
    if not perf or timing_stopped(folders):  # (or every speed test's case was judged failing: stop_timing)
        return []
    spec = _compile_share(spec)
    return shard_runner(folders, shard, replace(spec, perf=perf, inductor_from=staff_runs[task_id][1]), [])


def _compile_share(spec: JobSpec) -> JobSpec:
    """A CUDA worker left to choose its compile children (`compile_processes` 0) gets the pool's free slots at its
    start (schedule.py `granted`): every core for a lone file, none beyond itself under a burst, where the other
    workers have the cores (24 workers each forking up to 8 compilers on 16 cores made a burst's files all finish
    together)."""
    if spec.device != "cuda" or spec.compile_processes:
        return spec
    return replace(spec, compile_processes=granted())


def visible_gpus() -> list[int]:
    """GPU indices the workers may be pinned to (one worker sees one GPU)."""
    return list(range(torch.cuda.device_count())) if torch.cuda.is_available() else []


class Progress:
    """How far a grading run is, on stderr: at a terminal, a progress bar with an estimate of the time left (tqdm,
    when installed: `make setup` and the kit's setup.sh install it); elsewhere (a log, CI, Gradescope) a line per
    finished job with the same estimate. Nothing for a single job. A job with speed tests counts twice: judged,
    then timed (its timing worker runs after every case shard of the class)."""

    def __init__(self, total: int, stream=None) -> None:
        self.total, self.done, self.worked, self.start = total, 0, 0, time.monotonic()
        self.first: tuple[float, int] | None = None
        """(seconds since the start, results) at the first result: where the pace is counted from (`left`)."""
        self.stream = stream or sys.stderr
        self.bar = None
        if total >= 2 and getattr(self.stream, "isatty", lambda: False)():
            try:
                from tqdm import tqdm
            except ImportError:
                tqdm = None
            if tqdm is not None:
                self.bar = tqdm(total=total, unit="file", file=self.stream, dynamic_ncols=True, smoothing=0.1,
                                bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}] {postfix}")

    def step(self, label: str, units: int = 1, worked: bool = True) -> None:
        """`units` more results; `worked`: they came from workers (a file refused by its gates, or a copy of a
        file graded once, comes at once, and says nothing of the pace: counted from it, `make grade`'s demo class
        said "about 5 s left" before a 121 s wait)."""
        self.done += units
        elapsed = time.monotonic() - self.start
        if worked:
            self.worked += units
            if self.first is None:
                self.first = (elapsed, self.worked)
        if self.bar is not None:  # the time left as `left` says it (tqdm's own counts from the start)
            self.bar.set_postfix_str(f"{label}, {self.left(elapsed)}", refresh=False)
            self.bar.update(units)
            if self.done >= self.total:
                self.bar.close()
            return
        if self.total < 2:
            return
        print(f"[{self.done}/{self.total}] {label}  {elapsed:.0f} s elapsed, {self.left(elapsed)}",
              file=self.stream, flush=True)

    def left(self, elapsed: float) -> str:
        """The estimate of the time left. Results come out of a pipeline: the first after one file's latency
        (its workers' start and compile), the rest at the pool's pace, many at a time. So the pace is counted
        from the first result on, not from the start (which, on the H200 box with the speed tier, said "about
        13081 s left" at the second of 200 files), and nothing is estimated before three results."""
        if self.first is None:
            return "estimating the time left"
        t0, n0 = self.first
        if self.worked - n0 < 2 or elapsed <= t0:
            return "estimating the time left"
        pace = (elapsed - t0) / (self.worked - n0)  # seconds a worker's result, since the first
        return f"about {pace * (self.total - self.done):.0f} s left"


def _cpu_count() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
