"""Grading one or many (submission, task) pairs: `grade_jobs`, which puts the stages together.

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
import re
import shutil
import signal
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path

import torch

from grader.config import CourseConfig, TaskSpec
from grader.gates import static
from grader.isolation.runner import ForkClient, JobSpec, run_shard, worker_env
from grader.isolation.schedule import Scheduler
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
)
from grader.results import TaskResult


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
               keep: Path | None = None, on_result=None, benchmark_autotune: bool = False,
               backend: str = "local", address: str | None = None, static_checks: bool = True) -> list[TaskResult]:
    """Grade every job. Workers run in parallel (here, or as Ray tasks with backend='ray'); each job is judged
    here as soon as its workers are done, and handed to `on_result` then. A job whose grading fails in the
    grader itself gets a failed result of its own (`grader_failure`); every other job is graded as usual.
    `static_checks=False` skips the static policy (every file counts as passing it): only for tests that prove
    the layers behind it (the op audit, the sandbox) on their own."""
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
    remove_leftovers()
    base = Path(tempfile.mkdtemp(prefix=f"{TREE_PREFIX}{os.getpid()}-"))
    # grader/protocol: a trusted half no worker can reach, and a scratch half with a folder per worker run.
    tree = GradingTree(base)
    try:
        judges = (cfg.judges if cfg.judges >= 0 else cores // 2) if len(jobs) > 1 else 0  # judge processes: below
        prepared = Prepared(device, tree, save_answers=bool(judges), audit=cfg.bounds, twins=cfg.provenance)
        contexts: list[tuple[Job, JobFolders, GradingContext]] = []
        # what a known error's message names (grader/judge/known_errors.py): this side's triton, the course's
        tritons = Tritons(installed=environment(device).get("triton") or "", course=cfg.toolchain.get("triton", ""))
        results: dict[int, TaskResult] = {}
        # Identical files for one task are graded once: every later copy gets the first one's result under its
        # own name (`reused`), and its staff JSON says whose run it was.
        first_of: dict[tuple[str, int], int] = {}
        copies: dict[int, list[int]] = {}
        static_s: dict[int, float] = {}
        oracle_s: dict[str, float] = {}
        for n, job in enumerate(jobs):
            folders = tree.job(f"job-{n:04d}")
            try:
                source = job.read()
                # the task object, not only its id: a test may grade one file against two variants of a task
                same = first_of.setdefault((hashlib.sha256(source).hexdigest(), id(job.task)), n)
                if same != n:
                    copies.setdefault(same, []).append(n)
                    contexts.append((job, folders, GradingContext(job.task, device, static.StaticReport(), [],
                                                                  None, backend, tritons)))
                    continue
                t_static = time.perf_counter()
                report = static.check_source(source.decode(errors="replace"), job.task,
                                             cfg.always_allowed_imports, job.submission.name)
                if job.notebook is not None and job.notebook.problems:  # a notebook that cannot be read
                    report.imports[:0] = list(job.notebook.problems)
                static_s[n] = time.perf_counter() - t_static
                if not static_checks:
                    report.imports = []
                t_oracle = time.perf_counter()
                cases = prepared.cases(job.task)
                oracle_s[job.task.id] = oracle_s.get(job.task.id, 0.0) + time.perf_counter() - t_oracle
            except Exception as exc:  # noqa: BLE001 - this job's failure, not the class's
                results[n] = grader_failure(job, device, exc)
                report, cases = static.StaticReport(), []
            contexts.append((job, folders, GradingContext(job.task, device, report, cases, None, backend, tritons)))
        later = {d for ds in copies.values() for d in ds}
        per_task = {t: sum(1 for n, (j, _, _) in enumerate(contexts) if j.task.id == t and n not in later)
                    for t in {j.task.id for j, _, _ in contexts}}

        runnable = [n for n, (_, _, ctx) in enumerate(contexts) if ctx.static.ok and n not in results
                    and n not in later]
        specialize = {n: cfg.specialize if job.task.specialize is None else job.task.specialize
                      for n, (job, _, _) in enumerate(contexts)}
        visibility = {n: [c.visibility for c in contexts[n][0].task.cases] for n in runnable}
        plan = plan_shards({n: contexts[n][2].cases for n in runnable}, workers, specialize, visibility)
        runs: dict[int, list[WorkerRun]] = {n: [] for n in range(len(contexts))}
        pending = {n: 0 for n in range(len(contexts))}
        staff_records: dict[int, Path | None] = {}

        # Judging costs up to a second or two a job at CUDA sizes. Here it runs in a pool of judge processes (one
        # thread each, reading the oracle's answers that this process computed): config.yaml's grading.judges,
        # by default one per two cores, so a class's judging keeps up with its workers (on the 16-core H100 box,
        # 40 students: 132 s with 8 judges, 139-152 s with 4, when the machine's CPU was 86% and 66-74% busy).
        # With 0, or a single job, it runs here, one job at a time.
        judge_pool = ProcessPoolExecutor(judges, mp_context=multiprocessing.get_context("spawn"),
                                         initializer=_judge_process) if judges else None
        judging: dict = {}

        def done(n: int, result: TaskResult) -> None:
            job, folders, _ = contexts[n]
            result = toolchain.annotate(result, cfg.toolchain)  # graded with the course's torch and triton?
            if n not in later:  # what the trusted side spent on this file before any worker (staff only)
                stages = result.staff.setdefault("stages", {})
                stages["static"] = round(static_s.get(n, 0.0), 4)
                stages["oracle"] = round(oracle_s.get(job.task.id, 0.0) / max(1, per_task.get(job.task.id, 1)), 4)
            results[n] = result
            progress.step(f"{job.student}/{job.task.id}")
            if on_result:
                on_result(result)
            if keep is not None:  # the trusted files: job descriptions, record streams, logs, the suite's report
                shutil.copytree(folders.trusted, keep / folders.trusted.name, symlinks=True, dirs_exist_ok=True)
            shutil.rmtree(folders.scratch, ignore_errors=True)
            for d in copies.pop(n, []):
                done(d, reused(result, contexts[d][0], job))

        def finish(n: int) -> None:
            job, folders, ctx = contexts[n]
            try:
                if judge_pool is None:
                    prepared.answer(job.task)
                    done(n, judge_job(job, folders, ctx, runs[n], staff_records.get(n)))
                else:
                    judging[judge_pool.submit(judge_job_apart, job, folders, ctx.static, device, runs[n], backend,
                                              prepared.case_paths(job.task), tree.answers_file(job.task.id),
                                              staff_records.get(n), ctx.tritons)] = n
            except Exception as exc:  # noqa: BLE001
                done(n, grader_failure(job, device, exc, runs[n]))

        def drain(block: bool) -> None:
            for future in [f for f in judging if block or f.done()]:
                n = judging.pop(future)
                try:
                    result = future.result()
                except Exception as exc:  # noqa: BLE001 - a judge process that died, or could not send its result
                    result = grader_failure(contexts[n][0], device, exc, runs[n])
                done(n, result)

        gpus = visible_gpus() if device == "cuda" else []
        progress = Progress(len(contexts))
        for n in sorted(results):  # refused before anything ran
            done(n, results[n])
        # grader/isolation/schedule.py: one pool runs the staff's timing runs, the case shards and the timing workers,
        # by priority; a job is judged as soon as its last item is done.
        pool = Scheduler(workers, {"timing": max(1, workers // 3)})
        gpu_turn = itertools.count()

        def on_gpu() -> dict:
            """The next GPU of the round, and its gate (every CUDA worker uses the GPU through it)."""
            if device != "cuda":
                return {}
            gpu = gpus[next(gpu_turn) % len(gpus)] if len(gpus) > 1 else None
            return {"gpu": gpu, "gate": tree.gate(gpu)}

        staff_runs: dict[str, tuple[Path | None, Path | None]] = {}
        finished: dict[tuple[int, int], list[WorkerRun]] = {}
        """(job, shard) -> its runs, as soon as the shard is done (a timing worker looks at its speed cases)."""
        try:
            if device == "cuda" and cfg.sandbox.enabled:
                warm_shared_cache([contexts[n][0].task for n in runnable], device, cfg, prepared, tree, pool)
            for n in runnable:
                job, folders, _ = contexts[n]
                timeout_s, stall_s, audit_stall_s = cfg.limits(job.task, device)
                base_spec = JobSpec(job.module_path, job.task.entry, list(job.task.kernels), device,
                                    prepared.case_paths(job.task), timeout_s, benchmark_autotune,
                                    fork_server=cfg.fork_server, specialize=specialize[n],
                                    launch=launch_job(job.task), stall_s=stall_s, audit_stall_s=audit_stall_s,
                                    sandbox=cfg.sandbox.job(), gpu_compile=cfg.gpu_compile, bounds=cfg.bounds,
                                    writes=cfg.writes, provenance=cfg.provenance, source=job.read())
                public = [("shard", n, k) for k, indices in enumerate(plan[n])
                          if all(job.task.cases[i].visibility == "public" for i in indices)]
                for k, indices in enumerate(plan[n]):
                    hidden = any(job.task.cases[i].visibility != "public" for i in indices)
                    spec = replace(base_spec, sees_hidden=hidden, **on_gpu())
                    cost = shard_cost(contexts[n][2].cases, indices, specialize[n])
                    # The heaviest shards first (longest job first); a hidden shard after its job's public ones,
                    # ahead of new jobs' shards (its job is nearly done), or early on an idle thread.
                    pool.add(("shard", n, k), functools.partial(_shard_into, finished, (n, k), shard_runner,
                                                                folders, k, spec, indices),
                             priority=(1 if hidden else 2, -cost, n), after=public if hidden else (), early=True)
                    pending[n] += 1
                perf = [PerfItem(index=i, test=p.id, case=job.task.case_index(p.case),
                                 baseline=_portable(job.task.folder / p.baseline), warmup=p.warmup, reps=p.reps,
                                 clock=p.clock) for i, p in enumerate(job.task.perf) if device in p.devices]
                if not perf:
                    continue
                # One timing worker per job, compiling as Triton does (its specializations on). It starts once no
                # case shard waits for a thread (a student's few files: at once), and only its timed calls hold
                # the GPU alone (GpuGate): before them, the case workers still inside finish their call, so a
                # timer beside a full class of case workers waits seconds for the room and holds every case
                # worker up meanwhile (measured on the H200 box with timers started first: 17 files in 279 s).
                # Each task's reference is timed first, the same way, by the staff's run (grader/judge/speed.py: what
                # it proves; kept between grading runs), whose Inductor cache each timing worker starts from.
                task = job.task
                _, timer_stall_s, timer_audit_stall_s = cfg.limits(task, device, timing=True)
                timer_stall = {"stall_s": timer_stall_s, "audit_stall_s": timer_audit_stall_s}
                if task.id not in staff_runs:
                    staff_runs[task.id] = (None, None)
                    staff_spec = replace(base_spec, perf=perf, specialize=True, sees_hidden=True, **timer_stall,
                                         **on_gpu())
                    pool.add(("staff", task.id),
                             functools.partial(_staff_timing_into, staff_runs, task, staff_spec, tree, shard_runner),
                             priority=(0, 0, n), kind="timing")
                timing_spec = replace(base_spec, perf=perf, specialize=True, sees_hidden=True, **timer_stall,
                                      **on_gpu())
                speed_shards = {item.index: next(((n, k) for k, indices in enumerate(plan[n]) if item.case in indices),
                                                 None) for item in perf}
                pool.add(("timing", n), functools.partial(_timed_run, staff_runs, task.id, shard_runner, folders,
                                                          len(plan[n]), timing_spec, finished, speed_shards),
                         priority=(3, 0, n), kind="timing", after=[("staff", task.id)])
                pending[n] += 1
            pool.start()  # every item is known: the threads take them best first
            for n in range(len(contexts)):  # the oracle works (once per task) while the workers run
                if n in results or n in later:
                    continue
                try:
                    t_oracle = time.perf_counter()
                    prepared.answer(contexts[n][0].task)
                    oracle_s[contexts[n][0].task.id] = oracle_s.get(contexts[n][0].task.id, 0.0) \
                        + time.perf_counter() - t_oracle
                except Exception as exc:  # noqa: BLE001 - a staff error: that task's jobs fail, with the reason
                    results.setdefault(n, grader_failure(contexts[n][0], device, exc))
            for n in range(len(contexts)):
                if not pending[n] and n not in results and n not in later:
                    finish(n)
            # A job judged in the pool is recorded (on_result) at once, even while other workers run on: a file
            # that hangs until its time limit held every other student's result back with it.
            for key, result in pool.results(idle=lambda: drain(block=False)):
                if key[0] not in ("shard", "timing"):
                    continue  # a warm-up or the staff's timing run: its job waits for it through the pool
                n = key[1]
                if isinstance(result, BaseException):  # run_shard never raises; a scheduling error might
                    result = [WorkerRun(records=None, returncode=None, timed_out=False, seconds=0.0, log="",
                                        run_id=f"{key[0]}-{n}", problem=f"{type(result).__name__}: {result}")]
                if key[0] == "timing":
                    staff_records[n] = staff_runs[contexts[n][0].task.id][0]
                runs[n] += result
                pending[n] -= 1
                if not pending[n] and n not in results:
                    finish(n)
                drain(block=False)
        finally:
            pool.close()
        drain(block=True)
        if os.environ.get("GRADER_TRACE"):  # when each item of the pool ran (scripts/bench_class.py, staff)
            for key, start, end in sorted(pool.trace, key=lambda t: t[1]):
                print(f"trace {start:8.2f} {end:8.2f} {end - start:7.2f}  {key}", file=sys.stderr)
        if judge_pool is not None:
            judge_pool.shutdown()
        return [results[n] for n in range(len(contexts))]
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _judge_process() -> None:
    """A judge process's start: one thread (below), and Ctrl-C left to the command (grader/cli.py `entry`), which
    stops the pool: the terminal's SIGINT reaches every process of its group, and each judge printed a traceback."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    torch.set_num_threads(1)


def _staff_timing_into(into: dict, task: TaskSpec, spec: JobSpec, tree: GradingTree, shard_runner) -> None:
    into[task.id] = staff_timing(task, spec, tree, shard_runner)


def _shard_into(finished: dict, key: tuple[int, int], shard_runner, folders: JobFolders, shard: int,
                spec: JobSpec, cases: list[int]) -> list[WorkerRun]:
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
    if not perf:
        return []
    return shard_runner(folders, shard, replace(spec, perf=perf, inductor_from=staff_runs[task_id][1]), [])


def visible_gpus() -> list[int]:
    """GPU indices the workers may be pinned to (one worker sees one GPU)."""
    return list(range(torch.cuda.device_count())) if torch.cuda.is_available() else []


class Progress:
    """How far a grading run is, on stderr: at a terminal, a progress bar with an estimate of the time left (tqdm,
    when installed: `make setup` and the kit's setup.sh install it); elsewhere (a log, CI, Gradescope) a line per
    finished job with the same estimate. Nothing for a single job."""

    def __init__(self, total: int, stream=None) -> None:
        self.total, self.done, self.start = total, 0, time.monotonic()
        self.stream = stream or sys.stderr
        self.bar = None
        if total >= 2 and getattr(self.stream, "isatty", lambda: False)():
            try:
                from tqdm import tqdm
            except ImportError:
                tqdm = None
            if tqdm is not None:
                self.bar = tqdm(total=total, unit="file", file=self.stream, dynamic_ncols=True, smoothing=0.1,
                                bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}] {postfix}")

    def step(self, label: str) -> None:
        self.done += 1
        if self.bar is not None:
            self.bar.set_postfix_str(label, refresh=False)
            self.bar.update(1)
            if self.done >= self.total:
                self.bar.close()
            return
        if self.total < 2:
            return
        elapsed = time.monotonic() - self.start
        eta = elapsed / self.done * (self.total - self.done)
        print(f"[{self.done}/{self.total}] {label}  {elapsed:.0f} s elapsed, about {eta:.0f} s left",
              file=self.stream, flush=True)


def _cpu_count() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
