"""Starts a worker for one (submission, task) and stops it at its wall-clock limit, or sooner when it stalls.

The worker runs in a new session, so a timeout kills its whole process group (compiler children included).
Each worker run gets a run folder of its own, made empty here (grader/protocol), and its job description, log
and record stream live in the job's trusted folder, which no worker can write. A worker reports progress by a
STATUS frame on its record stream (after loading, and after each run of a case); one whose stream does not grow
for `stall_s` seconds is stopped then, so a hang costs that much instead of the whole limit.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from grader.config import ROOT
from grader.protocol import (
    JobFolders,
    Kind,
    PerfItem,
    RecordStream,
    StatusTail,
    WorkerJob,
    WorkerRun,
    create_trusted,
    make_run_folder,
)
from grader.worker.tritoncache import MANAGER, SHARED_ENV, shared_dir


@dataclass
class JobSpec:
    """What a worker needs to know; the same for every run of one (submission, task)."""

    submission: Path
    """The submission's path: its name names the worker's copy (and the staff's solution is read from it when
    `source` is None)."""
    entry: str
    kernels: list[str]
    device: str
    inputs: dict[int, Path]
    """Every case's inputs file (grader/protocol GradingTree.case_file); a run is told only its own cases'."""
    timeout_s: float
    benchmark_autotune: bool = False
    """Also run the stock autotuner first (for scripts/bench_grading.py)."""
    gpu: int | None = None
    """Pin the worker to this GPU (CUDA_VISIBLE_DEVICES) when the machine has several."""
    fork_server: bool = True
    """Fork the worker from a server that has imported torch and triton already (grader/isolation/forkserver.py)."""
    specialize: bool = True
    """Let Triton specialize the kernels on integer divisibility and alignment (config.yaml: grading.specialize)."""
    launch: dict | None = None
    """For a task whose harness launches the kernel: {kernel, grid: [[size, block]...], env, outputs: count}."""
    perf: list[PerfItem] = field(default_factory=list)
    """Speed tests to time after the cases (grader/worker/main.py)."""
    stall_s: float = 0.0
    """Stop a worker that reports no progress for this long (counted from its start); 0: only the time limit."""
    audit_stall_s: float = 0.0
    """The stall limit while the worker's last report says it is in the address check's interpreted re-run (CUDA:
    the CPU's limit, since the re-run interprets the CPU's inputs); 0: `stall_s` throughout."""
    sandbox: dict | None = None
    """The worker's sandbox (grader/worker/sandbox.py): {"limits": {...}}, or None for none (config:
    grading.sandbox)."""
    gpu_compile: bool = True
    """On the interpreter, also compile every launch for CUDA targets (grader/worker/gpu_compile.py)."""
    compile_passed: tuple[str, ...] = ()
    """Of those compilations, the ones the job's finished workers reported passing: not made again (WorkerJob)."""
    compile_processes: int = 0
    """On CUDA, child processes compiling an autotuned kernel's configs side by side (WorkerJob; config:
    grading.compile_processes)."""
    bounds: bool = True
    """Check every address a kernel touches against its launch's tensors (grader/worker/address_check.py): as the
    interpreter runs on the CPU; on CUDA through an interpreted re-run of each call."""
    rerun_bounds: bool = False
    """Check addresses through the interpreted re-run of each call on the CPU too, as CUDA does (the CPU checks
    them in its own run): for tests, which prove the CUDA worker's re-run and its records on a machine without a
    GPU (tests/test_fair.py)."""
    writes: bool = True
    """Check that what a call returns is what its kernels wrote (grader/worker/write_check.py)."""
    provenance: bool = True
    """Call each case's twin and record the checkpoints of the differential replay (grader/worker/provenance.py)."""
    warm: bool = False
    """A warm-up run of a staff solution (trusted, not sandboxed): one config per case, compiling into the shared
    Triton cache what the sandboxed workers of that task may then read (grader/worker/tritoncache.py)."""
    sees_hidden: bool = False
    """The shard's cases include one that is not public (WorkerRun.sees_hidden)."""
    inductor_from: Path | None = None
    """A staff timing run's Inductor cache, copied into the run folder before the worker starts (a quicker start
    for the torch.compile'd baseline)."""
    gate: str = ""
    """The GPU's gate (grader/protocol GpuGate; GradingTree.gate), on CUDA: "" for none."""
    source: bytes | None = None
    """The submission's bytes as the grading run read them once (grading.Job.read): what the worker's copy holds.
    None: read from `submission` (a staff run)."""

    def source_bytes(self) -> bytes:
        return self.source if self.source is not None else self.submission.read_bytes()


ENV_KEPT = ("PATH", "LANG", "LANGUAGE", "TZ", "LD_LIBRARY_PATH", "CC", "CXX")
ENV_KEPT_PREFIXES = ("LC_", "CUDA_", "NVIDIA_", "TRITON_", "TORCH_", "PYTORCH_", "OMP_", "MKL_", "CUBLAS_")
"""What of the grader's environment reaches a worker (and the fork server, whose start-up environment any child
can read back from /proc): the toolchain's, CUDA's, Triton's and torch's settings, and nothing else (no tokens,
no addresses, no home)."""


def worker_env(device: str, gpu: int | None = None) -> dict[str, str]:
    """The environment a worker runs in."""
    env = {k: v for k, v in os.environ.items() if k in ENV_KEPT or k.startswith(ENV_KEPT_PREFIXES)}
    env["PYTHONPATH"] = str(ROOT)  # the grader package only; the submission is loaded by path
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONSAFEPATH"] = "1"  # (python -P) no working directory or script folder on sys.path
    env["PYTHONUNBUFFERED"] = "1"  # what a worker printed reaches its log even when it is killed
    env["OPENBLAS_NUM_THREADS"] = "1"  # as in the fork server (see grader/isolation/forkserver.py), so numerics agree
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = str(gpu)
    env[SHARED_ENV] = str(shared_dir())
    if device == "cpu":
        env["TRITON_INTERPRET"] = "1"
    else:
        env.pop("TRITON_INTERPRET", None)
    return env


def spec_env(spec: JobSpec) -> dict[str, str]:
    """The environment of one worker of `spec`."""
    env = worker_env(spec.device, spec.gpu)
    if spec.device == "cuda" and not spec.perf:
        # One hardware work queue per CUDA context instead of 8: creating contexts is serialized by the driver,
        # and a class's worth of workers starting at once queue behind one another (measured on the H100 box:
        # 24 contexts at once in 5.6 s, 2.2 s with one queue each). A case worker runs on one stream, so it
        # loses nothing; a timing worker keeps the default, so streams a submission uses may still overlap.
        env.setdefault("CUDA_DEVICE_MAX_CONNECTIONS", "1")
    return env


LOG_TAIL = 20000
"""Characters of a worker's log kept for staff (its end: where a crash is)."""
LOG_CAP = 8 << 20
"""A worker's log is cut back to its first LOG_HEAD bytes whenever it grows past this (the runner checks as it
waits; the worker appends, so what it prints next follows the head). What a file prints never reaches the
sandbox's file-size limit, where each print would raise "File too large" and fail whatever case it was in: a file
printing 100 MB a call failed 3 of 17 cases, depending on how full each worker's log was."""
LOG_HEAD = 64 << 10
POLL_S = 0.5
"""The longest the runner waits between two looks at a worker's record stream and log."""


def tail(path: Path, chars: int) -> str:
    """The end of a text file, read from its end (a submission can print gigabytes)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - 4 * chars))
            return fh.read().decode(errors="replace")[-chars:]
    except OSError as exc:
        return f"(no log: {exc})"


def head(path: Path, chars: int) -> str:
    try:
        with open(path, "rb") as fh:
            return fh.read(4 * chars).decode(errors="replace")[:chars]
    except OSError as exc:
        return f"(no log: {exc})"


def cap_log(path: Path) -> int:
    """Cut a worker's log back to its first LOG_HEAD bytes when it has grown past LOG_CAP; returns the bytes
    dropped (0 when it had not). The log is the runner's file: the worker only appends to it."""
    try:
        size = os.stat(path).st_size
        if size <= LOG_CAP:
            return 0
        os.truncate(path, LOG_HEAD)
        return size - LOG_HEAD
    except OSError:
        return 0


def worker_job(folders: JobFolders, run_id: str, spec: JobSpec, cases: list[int]) -> WorkerJob:
    """The run folder, with the runner's copy of the submission (and a staff Inductor cache), and the job the
    worker is told. Only the inputs of `cases` and of the speed tests' cases are named."""
    run = make_run_folder(folders, run_id)
    src = run / "src"
    src.mkdir()
    copy = src / spec.submission.name
    copy.write_bytes(spec.source_bytes())
    if spec.inductor_from is not None and spec.inductor_from.is_dir():
        shutil.copytree(spec.inductor_from, run / "inductor", symlinks=True)
    needed = sorted({*cases, *(p.case for p in spec.perf)})
    return WorkerJob(
        run_id=run_id, submission=str(copy), entry=spec.entry, kernels=list(spec.kernels), device=spec.device,
        inputs={i: str(spec.inputs[i]) for i in needed}, cases=list(cases), run_folder=str(run),
        cache=str(folders.cache), perf=list(spec.perf),
        sandbox={**spec.sandbox, "timeout_s": spec.timeout_s} if spec.sandbox is not None else None,
        benchmark_autotune=spec.benchmark_autotune, specialize=spec.specialize, launch=spec.launch,
        gpu_compile=spec.gpu_compile, compile_passed=list(spec.compile_passed),
        compile_processes=spec.compile_processes, bounds=spec.bounds,
        rerun_bounds=spec.rerun_bounds, writes=spec.writes,
        provenance=spec.provenance, warm=spec.warm, gate=spec.gate)


def run_worker(folders: JobFolders, run_id: str, spec: JobSpec, cases: list[int]) -> WorkerRun:
    """One worker process over `cases` (indices of the task's cases), stopped at the time limit."""
    start = time.monotonic()
    job = worker_job(folders, run_id, spec, cases)
    job_file = folders.job_file(run_id)
    fd = create_trusted(job_file)
    with os.fdopen(fd, "w") as fh:
        fh.write(job.to_json())
    log_path, records_path = folders.log(run_id), folders.records(run_id)
    log_fd, records_fd = create_trusted(log_path), create_trusted(records_path)
    timeout_s = spec.timeout_s
    env = {**spec_env(spec), **cache_env(spec, job.cache)}
    try:
        server = ForkClient.get(spec.device, env) if spec.fork_server else None
        proc = server.fork({"job": str(job_file), "records": str(records_path), "log": str(log_path),
                            "cwd": job.run_folder, "env": env, "compiles": bool(spec.perf)}) if server else None
        if proc is None:  # no fork server (or it failed): a fresh interpreter
            proc = _Spawned(subprocess.Popen(
                [sys.executable, *SAFE_PATH, "-m", "grader.worker.main", str(job_file), str(records_fd)],
                cwd=job.run_folder, env=env, stdout=log_fd, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                pass_fds=(records_fd,), start_new_session=True))
    finally:
        os.close(log_fd)
        os.close(records_fd)
    with _LIVE_LOCK:
        LIVE.add(proc.pid)
    dropped = [0]
    try:
        ended, quiet_s, stalled_s, started_s = _wait(
            proc, timeout_s, spec.stall_s, records_path,
            lambda: dropped.__setitem__(0, dropped[0] + cap_log(log_path)), spec.audit_stall_s,
            stop=(lambda: timing_stopped(folders)) if spec.perf else None)
    finally:  # also when the wait is interrupted (a Ray task cancelled: ray_backend.py)
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # the worker and anything it started
        except (ProcessLookupError, PermissionError, TypeError):
            pass
        proc.wait(30)
        with _LIVE_LOCK:
            LIVE.discard(proc.pid)
    timed_out = ended not in ("ended", "stopped")
    dropped[0] += cap_log(log_path)
    text = tail(log_path, LOG_TAIL)
    if dropped[0]:  # for staff: the start of what it printed, how much went, and the end
        text = (head(log_path, LOG_TAIL // 4) + f"\n... [the grader dropped {dropped[0] / 1e6:.1f} MB of what the "
                f"worker printed here] ...\n" + text[-(3 * LOG_TAIL) // 4:])
    return WorkerRun(records=records_path, returncode=None if ended != "ended" else proc.returncode,
                     timed_out=timed_out, seconds=time.monotonic() - start, log=text, run_id=run_id,
                     cases=list(cases), stalled_s=stalled_s, quiet_s=round(quiet_s, 2),
                     sees_hidden=spec.sees_hidden, perf=bool(spec.perf),
                     stopped=STOPPED_WHY if ended == "stopped" else "", limit_s=timeout_s,
                     started_s=None if started_s is None else round(started_s, 2))


_STOP_TIMING: set[str] = set()
"""The trusted folders of the jobs whose timing worker is to stop (or not start): `stop_timing`."""
STOPPED_WHY = "every speed test's case had failed meanwhile, and a speed test counts only for a correct result"


def stop_timing(folders: JobFolders) -> None:
    """Stop the job's timing worker within a poll (`POLL_S`), or keep it from starting: its speed tests are
    decided without it (grader/pipeline/grading.py calls this once the job's cases are judged). A submission
    that hangs in its call hangs its timing worker's warm-up too: on the H200 box such a timer ran on, spinning
    a core, for 100 s after its cases were judged, and made the class's last result (177 s against 82 s)."""
    _STOP_TIMING.add(str(folders.trusted))


def timing_stopped(folders: JobFolders) -> bool:
    """Whether `stop_timing` was called for the job."""
    return str(folders.trusted) in _STOP_TIMING


def forget_timing(folders: JobFolders) -> None:
    """The job is done: its stop request, if any, is dropped."""
    _STOP_TIMING.discard(str(folders.trusted))


LIVE: set[int] = set()
"""The process groups of the workers running now (each worker leads its own session)."""
_LIVE_LOCK = threading.Lock()


def stop_everything() -> None:
    """Ctrl-C or SIGTERM of the command (grader/cli.py `entry`): every worker still running is killed with its
    process group, and every fork server is told to end (end of its input: it kills its children) and then
    killed; nothing the grader started is left behind."""
    with _LIVE_LOCK:
        groups = list(LIVE)
    for pid in groups:
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError, TypeError):
            pass
    with ForkClient._lock:
        servers = list(ForkClient._servers.values())
        ForkClient._servers.clear()
    for server in servers:
        server.alive = False
        try:
            server.proc.stdin.close()
            server.proc.wait(3)
        except (OSError, subprocess.TimeoutExpired):
            pass
        try:
            os.killpg(server.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        server.proc.wait(5)


def cache_env(spec: JobSpec, cache: str) -> dict[str, str]:
    """Where a worker's Triton cache is: the job's own, read over the shared one (grader/worker/tritoncache.py), for a
    sandboxed worker and for a trusted warm-up run alike (the warm-up's launchers are published to the shared
    cache after it, its kernels never); a worker with no sandbox keeps the caller's."""
    if spec.sandbox is None and not spec.warm:
        return {}
    return {"TRITON_CACHE_DIR": cache, "TRITON_CACHE_MANAGER": MANAGER}


SAFE_PATH = ("-P",) if sys.version_info >= (3, 11) else ()
"""No working directory on a worker's (or the fork server's) sys.path: python -P (PYTHONSAFEPATH in the env)."""


def _wait(proc: _Spawned | _Forked, timeout_s: float, stall_s: float, status: Path,
          each: Callable[[], None] = lambda: None, audit_stall_s: float = 0.0,
          stop: Callable[[], bool] | None = None) -> tuple[str, float, float, float | None]:
    """Wait for the worker: "ended", "timeout" (still running at `timeout_s`), "stalled" (its record stream
    unchanged for `stall_s` seconds, or `audit_stall_s` while its last report says `auditing`; 0: no stall
    limit) or "stopped" (`stop()` said so: the grader needs nothing more from it), the longest stretch it went
    without a progress report (0 without a stall limit), the stall limit that stopped it (0 if none did), and
    how long it took to start (None: it never did).

    Both limits count from the worker's first record (grader/worker/main.py writes it before the submission is
    read): a fresh interpreter that takes 12 s to import torch and triton on a loaded CI machine (4 test
    processes and 3 workers on 2 cores) does not spend the submission's time. The start itself has `timeout_s`
    too, so a worker runs at most twice that. The stream's time and reports are the worker's doing, so a worker
    can only delay its stop this way (to the longer of the two limits), never past the time limit. `each` runs
    at every look (the log's cap)."""
    tail = StatusTail(status) if audit_stall_s > stall_s else None
    spawned = start = time.monotonic()
    started: float | None = None  # seconds from the spawn to the first record
    last = time.time()
    quiet = 0.0

    def quiet_so_far() -> float:
        return max(quiet, time.time() - last) if stall_s and started is not None else 0.0

    while True:
        if started is None:
            try:
                stat = status.stat()
            except OSError:
                stat = None
            if stat is not None and stat.st_size:  # both clocks start again with the first record
                start, last = time.monotonic(), stat.st_mtime
                started = start - spawned
        left = timeout_s - (time.monotonic() - start)
        if left <= 0:
            return "timeout", quiet_so_far(), 0.0, started
        if stop is not None and stop():
            return "stopped", quiet_so_far(), 0.0, started
        each()
        look = min(left, POLL_S, max(0.05, stall_s / 20)) if stall_s else min(left, POLL_S)
        if proc.wait(look):
            return "ended", quiet_so_far(), 0.0, started
        if not stall_s or started is None:  # no stall limit, or not started yet: only the time limit
            continue
        try:
            mtime = status.stat().st_mtime
            if mtime > last:
                quiet, last = max(quiet, mtime - last), mtime
        except OSError:
            pass
        quiet_now = time.time() - last
        if quiet_now > stall_s:
            # A hang of a graded call costs `stall_s`; the address check's interpreted re-run (a call on the
            # CPU's inputs, in the interpreter) may go quiet for as long as a CPU call (with one limit for
            # both, a hanging file on CUDA would cost 120 s per shard, and set a class's last file).
            limit = audit_stall_s if tail is not None and tail.latest().get("auditing") else stall_s
            if quiet_now > limit:
                return "stalled", quiet_now, limit, started


class _Spawned:
    """A worker started as a fresh interpreter."""

    def __init__(self, popen: subprocess.Popen) -> None:
        self.popen, self.pid = popen, popen.pid

    def wait(self, timeout: float) -> bool:
        try:
            self.popen.wait(timeout=timeout)
            return True
        except subprocess.TimeoutExpired:
            return False

    @property
    def returncode(self) -> int | None:
        return self.popen.returncode


class _Forked:
    """A worker forked by the fork server; the server reports its pid, then its exit."""

    def __init__(self) -> None:
        self.pid: int | None = None
        self.returncode: int | None = None
        self.forked, self.ended = threading.Event(), threading.Event()

    def wait(self, timeout: float) -> bool:
        return self.ended.wait(timeout)


class ForkClient:
    """The client of the fork server (grader/isolation/forkserver.py, the server side of the same pipe): one server
    per device, shared by every thread that runs workers.

    If the server cannot start or dies, `fork` returns None and the worker is started as a fresh interpreter."""

    _servers: dict[str, ForkClient] = {}
    _lock = threading.Lock()

    @classmethod
    def get(cls, device: str, env: dict) -> ForkClient | None:
        with cls._lock:
            server = cls._servers.get(device)
            if server is None or not server.alive:
                try:
                    server = cls._servers[device] = cls(env)
                except OSError:
                    return None
            return server

    def __init__(self, env: dict) -> None:
        self.stderr = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the server
        # A neutral working directory, and none on sys.path (-P): what a child imports comes from the
        # interpreter's own folders and PYTHONPATH (the grader), never from where the server happens to start.
        self.proc = subprocess.Popen([sys.executable, *SAFE_PATH, "-m", "grader.isolation.forkserver"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr, env=env,
                                     cwd="/", start_new_session=True)
        self.alive = True
        self._write = threading.Lock()
        self._waiting: dict[int, _Forked] = {}
        self._next = 0
        threading.Thread(target=self._read, name="forkserver-reader", daemon=True).start()

    def fork(self, request: dict, start_timeout: float = 120.0) -> _Forked | None:
        forked = _Forked()
        with self._write:
            self._next += 1
            self._waiting[self._next] = forked
            try:
                self.proc.stdin.write(json.dumps({"id": self._next, **request}).encode() + b"\n")
                self.proc.stdin.flush()
            except OSError:
                self.alive = False
                return None
        # The first request waits for the server's imports; the server answers at once after that.
        if not forked.forked.wait(start_timeout) or forked.pid is None:
            self.alive = False
            return None
        return forked

    def _read(self) -> None:
        for line in self.proc.stdout:
            try:
                message = json.loads(line)
                forked = self._waiting[message["id"]]
            except (ValueError, KeyError, TypeError):
                continue
            if "pid" in message:
                forked.pid = message["pid"]
                forked.forked.set()
            if "returncode" in message:
                forked.returncode = message["returncode"]
                forked.ended.set()
                self._waiting.pop(message["id"], None)
        self.alive = False  # the server is gone: nobody waits for it any more
        for forked in list(self._waiting.values()):
            forked.forked.set()
            forked.ended.set()


MAX_RESTARTS = 4
"""Workers started again after a crash (a signal, or a lost CUDA context), each from the case after the one that
crashed. A hang is not restarted: it would cost another full time limit."""


def run_shard(folders: JobFolders, shard: int, spec: JobSpec, cases: list[int]) -> list[WorkerRun]:
    """Run `cases` in one worker, and in a new one after each crash (a worker that dies before its first case
    is started once more, like one that dies in the middle). Never raises: a failure of the runner itself is
    a run with a `problem`, which fails this job's cases."""
    runs: list[WorkerRun] = []
    try:
        if spec.perf and not cases:  # a timing shard: one worker, never restarted (a crash fails its tests)
            return [run_worker(folders, f"{shard}-0", spec, [])]
        remaining = list(cases)
        early = 0  # restarts of a worker that died before its first case
        while remaining:
            run = run_worker(folders, f"{shard}-{len(runs)}", spec, remaining)
            runs.append(run)
            stream = RecordStream(run.records)
            status = stream.status
            if run.timed_out or status.get("done") or len(runs) > MAX_RESTARTS:  # (a stall is a time-out)
                break
            current = status.get("index")
            if current is None and stream.before_loading and early < 1 and run.returncode != 0:
                early += 1
                continue  # died before any case (and before loading the submission): once more
            if type(current) is not int or current not in remaining:
                break
            if not stream.has(Kind.CASE, current):
                run.crashed[current] = run.describe_exit()
            remaining = remaining[remaining.index(current) + 1 :]
    except Exception as exc:  # noqa: BLE001 - the runner's own failure stays this job's
        runs.append(WorkerRun(records=None, returncode=None, timed_out=False, seconds=0.0, log="",
                              run_id=f"{shard}-{len(runs)}", cases=list(cases), sees_hidden=spec.sees_hidden,
                              problem=f"{type(exc).__name__}: {exc}"))
    return runs
