"""Starts a worker for one (submission, task) and stops it at its wall-clock limit, or sooner when it stalls.

The worker runs in a new session, so a timeout kills its whole process group (compiler children included).
A worker reports progress by rewriting its status file (after loading, and after each run of a case); one that
reports nothing for `stall_s` seconds is stopped then, so a hang costs that much instead of the whole limit.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from grader.config import ROOT
from grader.tritoncache import MANAGER, SHARED_ENV, shared_dir


@dataclass
class WorkerRun:
    jobdir: Path
    returncode: int | None
    timed_out: bool
    seconds: float
    log: str
    run_id: str = "0-0"
    cases: list[int] = field(default_factory=list)
    stalled_s: float = 0.0
    """Set when the worker was stopped for making no progress: the stall limit it exceeded."""
    quiet_s: float = 0.0
    """The longest stretch without a progress report, as the runner saw it (with a stall limit only): what a
    right worker needs of `grading.stall_s` (scripts/bench_class.py reports it over a class)."""

    def status(self) -> dict:
        try:
            data = json.loads(read_bounded(self.jobdir / f"status-{self.run_id}.json"))
            return data if isinstance(data, dict) else {}
        except (OSError, ValueError):
            return {}

    def describe_exit(self) -> str:
        if self.stalled_s:
            return (f"the worker was stopped after {self.seconds:.0f} s: it made no progress for "
                    f"{self.stalled_s:.0f} s (grading.stall_s)")
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
    fork_server: bool = True
    """Fork the worker from a server that has imported torch and triton already (grader/forkserver.py)."""
    specialize: bool = True
    """Let Triton specialize the kernels on integer divisibility and alignment (config.yaml: grading.specialize)."""
    launch: dict | None = None
    """For a task whose harness launches the kernel: {kernel, grid: [[size, block]...], env, outputs: count}."""
    perf: list[dict] = field(default_factory=list)
    """Speed tests to time after the cases: {index, test, case, baseline, warmup, reps, clock} (grader/worker.py)."""
    stall_s: float = 0.0
    """Stop a worker that reports no progress for this long (counted from its start); 0: only the time limit."""
    sandbox: dict | None = None
    """The worker's sandbox (grader/sandbox.py): {"limits": {...}}, or None for none (config: grading.sandbox)."""
    gpu_compile: bool = True
    """On the interpreter, also compile every launch for CUDA targets (grader/gpu_compile.py)."""
    bounds: bool = True
    """Check every address a kernel touches against its launch's tensors (grader/bounds.py): as the interpreter
    runs on the CPU; on CUDA through an interpreted re-run of each call."""
    warm: bool = False
    """A warm-up run of a staff solution (trusted, not sandboxed): one config per case, compiling into the shared
    Triton cache what the sandboxed workers of that task may then read (grader/tritoncache.py)."""


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
    env["PYTHONUNBUFFERED"] = "1"  # what a worker printed reaches its log even when it is killed
    env["OPENBLAS_NUM_THREADS"] = "1"  # as in the fork server (see grader/forkserver.py), so numerics agree
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
JSON_LIMIT = 8 << 20
"""The largest worker-written JSON file the judge reads (load.json holds the kernels and the environment, well
under 1 MB): anything larger is garbled, and is not read into memory."""


def tail(path: Path, chars: int) -> str:
    """The end of a text file, read from its end (a submission can print gigabytes)."""
    with open(path, "rb") as fh:
        fh.seek(0, os.SEEK_END)
        fh.seek(max(0, fh.tell() - 4 * chars))
        return fh.read().decode(errors="replace")[-chars:]


def read_bounded(path: Path, limit: int = JSON_LIMIT) -> str:
    """A worker-written text file, refused (ValueError) past `limit` bytes without reading it."""
    if path.stat().st_size > limit:
        raise ValueError(f"{path.name} is larger than {limit} bytes")
    return path.read_text()


def run_worker(jobdir: Path, run_id: str, spec: JobSpec, cases: list[int]) -> WorkerRun:
    """One worker process over `cases` (indices into the inputs file), stopped at the time limit."""
    job = {"submission": str(spec.submission.resolve()), "entry": spec.entry, "kernels": spec.kernels,
           "device": spec.device, "inputs": str(spec.inputs.resolve()), "cases": cases,
           "benchmark_autotune": spec.benchmark_autotune, "specialize": spec.specialize, "launch": spec.launch,
           "perf": spec.perf,
           "sandbox": {**spec.sandbox, "timeout_s": spec.timeout_s} if spec.sandbox is not None else None,
           "warm": spec.warm, "gpu_compile": spec.gpu_compile,
           "bounds": spec.bounds}
    (jobdir / f"job-{run_id}.json").write_text(json.dumps(job))
    timeout_s = spec.timeout_s
    env = spec_env(spec)
    if spec.sandbox is not None:  # a Triton cache of the job's own, over one only the grader writes (see
        env["TRITON_CACHE_DIR"] = str(jobdir / "triton-cache")  # grader/tritoncache.py)
        env["TRITON_CACHE_MANAGER"] = MANAGER
    elif spec.warm:
        env["TRITON_CACHE_DIR"] = env[SHARED_ENV]
    log_path = jobdir / f"worker-{run_id}.log"
    log_path.write_bytes(b"")
    scratch = jobdir / "cwd"  # the submission's working directory: empty, and not where results are written
    scratch.mkdir(exist_ok=True)
    start = time.monotonic()
    server = ForkServer.get(spec.device, env) if spec.fork_server else None
    proc = server.fork({"jobdir": str(jobdir), "run_id": run_id, "cwd": str(scratch), "log": str(log_path),
                        "env": env, "compiles": bool(spec.perf)}) if server else None
    if proc is None:  # no fork server (or it failed): a fresh interpreter
        with open(log_path, "ab") as log:
            proc = _Spawned(subprocess.Popen(
                [sys.executable, "-m", "grader.worker", str(jobdir), run_id], cwd=scratch, env=env, stdout=log,
                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True))
    ended, quiet_s = _wait(proc, timeout_s, spec.stall_s, jobdir / f"status-{run_id}.json")
    timed_out = ended != "ended"
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # the worker and anything it started
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait(30)
    text = tail(log_path, LOG_TAIL)
    return WorkerRun(jobdir=jobdir, returncode=None if timed_out else proc.returncode, timed_out=timed_out,
                     seconds=time.monotonic() - start, log=text, run_id=run_id, cases=list(cases),
                     stalled_s=spec.stall_s if ended == "stalled" else 0.0, quiet_s=round(quiet_s, 2))


def _wait(proc: _Spawned | _Forked, timeout_s: float, stall_s: float, status: Path) -> tuple[str, float]:
    """Wait for the worker: "ended", "timeout" (still running at `timeout_s`) or "stalled" (its status file
    unchanged for `stall_s` seconds; 0: no stall limit), and the longest stretch it went without a progress
    report (0 without a stall limit). The file's time is the worker's word, so a worker can only delay its stop
    this way, never past the time limit."""
    start = time.monotonic()
    last = time.time()  # the stall clock starts with the worker
    quiet = 0.0
    while True:
        left = timeout_s - (time.monotonic() - start)
        if left <= 0:
            return "timeout", max(quiet, time.time() - last)
        if not stall_s:
            return ("ended" if proc.wait(left) else "timeout"), 0.0
        if proc.wait(min(left, max(0.05, stall_s / 20))):
            return "ended", max(quiet, time.time() - last)
        try:
            mtime = status.stat().st_mtime
            if mtime > last:
                quiet, last = max(quiet, mtime - last), mtime
        except OSError:
            pass
        if time.time() - last > stall_s:
            return "stalled", time.time() - last


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


class ForkServer:
    """The runner's side of grader/forkserver.py: one server per device, shared by every thread that runs workers.

    If the server cannot start or dies, `fork` returns None and the worker is started as a fresh interpreter."""

    _servers: dict[str, ForkServer] = {}
    _lock = threading.Lock()

    @classmethod
    def get(cls, device: str, env: dict) -> ForkServer | None:
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
        self.proc = subprocess.Popen([sys.executable, "-m", "grader.forkserver"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.stderr, env=env,
                                     cwd=tempfile.gettempdir(), start_new_session=True)
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


def run_shard(jobdir: Path, shard: int, spec: JobSpec, cases: list[int]) -> list[WorkerRun]:
    """Run `cases` in one worker, and in a new one after each crash. Writes crash-<i>.json for a crashed case."""
    if spec.perf and not cases:  # a timing shard: one worker, never restarted (a crash fails its tests)
        return [run_worker(jobdir, f"{shard}-0", spec, [])]
    runs: list[WorkerRun] = []
    remaining = list(cases)
    while remaining:
        run = run_worker(jobdir, f"{shard}-{len(runs)}", spec, remaining)
        runs.append(run)
        status = run.status()
        if run.timed_out or status.get("done") or len(runs) > MAX_RESTARTS:  # (a stall is a time-out)
            break
        current = status.get("index")
        if current is None or current not in remaining:
            break  # died before any case: a restart would die the same way
        if not (jobdir / f"case-{current}.pt").exists():
            (jobdir / f"crash-{current}.json").write_text(json.dumps({"message": run.describe_exit()}))
        remaining = remaining[remaining.index(current) + 1 :]
    return runs
