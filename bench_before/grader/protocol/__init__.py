"""The contract between the worker, which runs a submission, and the trusted side (runner and judge).

Every file of a grading run, the job the worker receives and the records it sends back are defined here, and
nowhere else. This module imports nothing else of the grader: the worker and the trusted side meet only here.

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

What the worker sends back travels through one file descriptor, opened for it before the sandbox on a file of
`trusted/` that it cannot otherwise reach (append-only): a stream of frames, each a fixed header (magic, kind,
key, payload length) and a payload. JSON frames carry the load report and progress; tensor frames carry a case's
runs or a speed test's timings (torch.save, read back with weights_only=True). The trusted side reads the stream
with `RecordStream`: every frame is bounded, a truncated or garbled stream ends where it breaks, and what it lacks
fails that job's tests with a message, never anything else.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import io
import json
import os
import signal
import stat
import struct
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import IntEnum
from pathlib import Path
from typing import Any

# ------------------------------------------------------------------------------------------- the folder tree

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


# ------------------------------------------------------------------------------------------------- the job


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
        if not all(isinstance(v, str) for v in data["inputs"].values()):
            raise ValueError("a worker job's inputs must be file names")
        if not all(type(i) is int and i in data["inputs"] for i in data["cases"]):
            raise ValueError("a worker job's cases must be indices of its inputs")
        return cls(**data)


def _typed(data: dict, name: str, kind: type) -> Any:
    if not isinstance(data.get(name), kind):
        raise ValueError(f"a worker job's {name} must be a {kind.__name__}")
    return data[name]


# --------------------------------------------------------------------------------------------- the records


class Kind(IntEnum):
    """What a frame of the record stream carries."""

    LOAD = 1
    """JSON: whether the import worked, the required kernels' autotune configs, the sandbox report."""
    STATUS = 2
    """JSON: progress (the case it is running, runs done, done): the runner's stall clock and the judge's
    account of where a worker stopped."""
    CASE = 3
    """Tensors (key: the case index): {"id", "runs"}, each run's outputs, guard records and launches."""
    PERF = 4
    """Tensors (key: the speed test's index): the times of the submission's and the baseline's calls."""


MAGIC = b"GRR1"
HEADER = struct.Struct("<4sBxxxqQ")
"""magic, kind, (3 pad bytes), key, payload length."""
JSON_LIMIT = 8 << 20
"""The largest JSON frame read (the load report is well under 1 MB)."""
TENSOR_LIMIT = 2 << 30
"""The largest tensor frame read into memory: the sandbox's file-size limit (2 GiB) bounds a stream anyway, and a
CUDA-sized case's runs are a few hundred MB. A header that claims more makes the stream garbled there."""
RECORDS_FD_ENV = "GRADER_RECORDS_FD"


class RecordWriter:
    """The worker's end of the stream: frames appended to a descriptor opened for it before the sandbox."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def _frame(self, kind: Kind, key: int, payload) -> None:
        for data in (HEADER.pack(MAGIC, int(kind), key, len(payload)), payload):
            data = memoryview(data).cast("B")
            while data:
                data = data[os.write(self.fd, data):]

    def json(self, kind: Kind, data: dict, key: int = 0) -> None:
        self._frame(kind, key, json.dumps(data).encode())

    def tensors(self, kind: Kind, key: int, data: dict) -> None:
        import torch

        buf = io.BytesIO()
        torch.save(data, buf)
        self._frame(kind, key, buf.getbuffer())


def _frame_at(fh, offset: int, size: int) -> tuple[int, int, int, int] | str:
    """The frame at `offset` of a stream of `size` bytes (`fh` positioned there): (kind, key, payload start,
    payload length), or why it cannot be read: "header" (the stream ends inside its header), "garbled", or "frame"
    (the stream ends inside it)."""
    head = fh.read(HEADER.size)
    if len(head) < HEADER.size:
        return "header"
    magic, kind, key, length = HEADER.unpack(head)
    limit = JSON_LIMIT if kind in (Kind.LOAD, Kind.STATUS) else TENSOR_LIMIT
    if magic != MAGIC or kind not in Kind._value2member_map_ or length > limit:
        return "garbled"
    start = offset + HEADER.size
    return "frame" if start + length > size else (kind, key, start, length)


def _status_of(fh, length: int) -> dict | None:
    """A STATUS frame's payload (`fh` at its start), if it reads as a JSON object (a worker's text: what does not
    parse, nested too deep for the parser included, is no status)."""
    try:
        status = json.loads(fh.read(length))
    except (ValueError, RecursionError):
        return None
    return status if isinstance(status, dict) else None


class StatusTail:
    """The trusted side's running look at a live worker's stream: its last STATUS frame so far, read on from where
    the last look stopped (past other frames by their headers alone). A frame not yet whole waits for the next
    look; a garbled one ends the looking (the last status stays). Never raises."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.status: dict = {}
        self.garbled = False

    def latest(self) -> dict:
        if self.garbled:
            return self.status
        try:
            fd = open_trusted(self.path)
        except OSError:
            return self.status
        with os.fdopen(fd, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            fh.seek(self.offset)
            while self.offset < size:
                frame = _frame_at(fh, self.offset, size)
                if isinstance(frame, str):
                    self.garbled = frame == "garbled"
                    break
                kind, _key, start, length = frame
                status = _status_of(fh, length) if kind == Kind.STATUS else None
                if status is not None:
                    self.status = status
                fh.seek(start + length)
                self.offset = start + length
        return self.status


class RecordStream:
    """The trusted side's reading of one worker run's record stream. Only the headers are read up front; a frame
    is read when asked for, and the last frame of a (kind, key) wins. `problem` says where a garbled stream broke."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.frames: dict[tuple[int, int], tuple[int, int]] = {}
        self.problem = ""
        self.status: dict = {}
        """The last STATUS frame that reads as a JSON object."""
        if path is None:
            return
        try:
            fd = open_trusted(path)
        except OSError as exc:
            self.problem = f"no record stream ({exc.strerror or exc})"
            return
        with os.fdopen(fd, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            offset = 0
            while offset < size:
                frame = _frame_at(fh, offset, size)
                if isinstance(frame, str):
                    self.problem = {"header": f"the stream ends inside a frame header at byte {offset}",
                                    "garbled": f"a garbled frame at byte {offset}",
                                    "frame": f"the stream ends inside a frame at byte {offset}"}[frame]
                    break
                kind, key, start, length = frame
                self.frames[(kind, key)] = (start, length)
                status = _status_of(fh, length) if kind == Kind.STATUS else None
                if status is not None:
                    self.status = status
                fh.seek(start + length)
                offset = start + length

    def has(self, kind: Kind, key: int = 0) -> bool:
        return (int(kind), key) in self.frames

    def _payload(self, kind: Kind, key: int) -> bytes:
        start, length = self.frames[(int(kind), key)]
        fd = open_trusted(self.path)
        try:
            return os.pread(fd, length, start)
        finally:
            os.close(fd)

    def json(self, kind: Kind, key: int = 0) -> Any:
        """A JSON frame's value; KeyError if there is none, ValueError if it is not JSON."""
        return json.loads(self._payload(kind, key))

    def tensors(self, kind: Kind, key: int) -> Any:
        """A tensor frame's value, loaded with weights_only=True (tensors and plain data only); KeyError if there
        is none, any other exception if it is garbled."""
        import torch

        return torch.load(io.BytesIO(self._payload(kind, key)), weights_only=True)


def open_trusted(path: Path, flags: int = os.O_RDONLY) -> int:
    """Open a file of the trusted tree for reading: never through a link, and only a regular file."""
    fd = os.open(path, flags | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(f"{path.name} is not a regular file")
    return fd


def create_trusted(path: Path) -> int:
    """Create a file of the trusted tree for appending: it must not exist (no link, nothing planted)."""
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_APPEND
                   | getattr(os, "O_CLOEXEC", 0), 0o600)


# ------------------------------------------------------------------------------------------------ the GPU gate


@dataclass
class WorkerRun:
    """What the runner saw of one worker run, for the judge: where its record stream is, how it ended. The
    runner's half of the runner/judge contract (the judge never starts or supervises a worker)."""

    records: Path | None
    """The run's record stream, in the job's trusted folder (None: no worker was started)."""
    returncode: int | None
    timed_out: bool
    seconds: float
    log: str
    run_id: str = "0-0"
    cases: list[int] = field(default_factory=list)
    crashed: dict[int, str] = field(default_factory=dict)
    """Case index -> how the worker died while running it (the runner's word: the worker wrote no record)."""
    perf: bool = False
    """A timing worker's run (speed tests, no cases)."""
    sees_hidden: bool = False
    """Whether the run held the inputs of a case that is not public (its LOAD report is used for messages only
    when no run of the job held none)."""
    problem: str = ""
    """Why the runner could not start or supervise the worker (a grader error: fails this job only)."""
    stalled_s: float = 0.0
    """Set when the worker was stopped for making no progress: the stall limit it exceeded."""
    quiet_s: float = 0.0
    """The longest stretch without a progress report, as the runner saw it (with a stall limit only): what a
    right worker needs of `grading.stall_s` (scripts/bench_class.py reports it over a class)."""

    def status(self) -> dict:
        """The run's last progress report (empty if none)."""
        return RecordStream(self.records).status if self.records else {}

    def describe_exit(self) -> str:
        if self.problem:
            return f"the grader could not run the worker ({self.problem})"
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


class GpuGate:
    """Who may use one GPU when: any number of case workers at once, or one speed test's timed calls alone.

    Speed tests used to run after every case of the class, one timing worker at a time, so that no other kernel
    shared the GPU with a timed call: 10-16 s a file of start-up and compiling for 0.1-0.5 s that needs the GPU
    alone. With the gate, timing workers start, compile and warm up beside the case workers, and only the timed
    calls hold the GPU to themselves.

    Three flock(2) locks on files of the trusted tree, opened by the worker before its sandbox (flock needs no
    right on the file but an open descriptor):
    - the *room*, which workers that use the GPU hold shared and a timer holds exclusive;
    - the *turnstile*, which a timer holds while it waits for the room to empty, so that no new sharer enters
      meanwhile (flock alone would let a stream of sharers keep a timer out for ever); a sharer passes it on its
      way in and does not keep it;
    - the *queue*, where timers wait for their turn, one at a time, so that the sharers are held up by one timer
      at a time and get in between two (`GRACE_S`): with timers queueing at the turnstile instead, eight timing
      workers of a class kept the case workers out for minutes (measured on the H200 box: 9 of 47 files in 335 s).

    Waits are bounded, so that no worker's misbehaviour can stop another's grading: a sharer that cannot enter
    within `SHARED_WAIT_S` goes on without the gate (a timer then measures a busier GPU, and says so in its
    record), a timer that cannot have the room within `ROOM_WAIT_S` (or its turn within `QUEUE_WAIT_S`) times
    anyway and says that too. While it waits, a worker calls `heartbeat` about once a second: waiting is progress
    for the runner's stall clock.
    """

    SUFFIXES = (".turnstile", ".room", ".queue")
    SHARED_WAIT_S = 20.0
    ROOM_WAIT_S = 5.0
    """A timer waits this long for the room to empty. A submission that hung inside its call (a Python loop in
    its wrapper, as one demo file does) used to hold its share until the stall limit stopped it: with 15 s here,
    each timer of the class waited that long in turn, holding every case worker up meanwhile (8 students: 6 of
    32 files in 180 s on the H200 box). Such a share is now let go after about IDLE_S (`release_when_idle`);
    this bound stays for a worker that keeps launching. A timed call that did not have the GPU alone says so in
    its verdict."""
    QUEUE_WAIT_S = 120.0
    GRACE_S = 0.05
    POLL_S = 0.002

    def __init__(self, turnstile: int, room: int, queue: int, heartbeat: Callable[[], None] | None = None) -> None:
        self.turnstile, self.room, self.queue = turnstile, room, queue
        self.heartbeat = heartbeat or (lambda: None)
        self.held = ""
        """"shared", "exclusive" or "" (the room as this process holds it)."""
        self.wanted = 0
        """How many `shared()` windows are open: a launch inside one takes the hold again (`touch`)."""
        self.waited_s = 0.0
        """Seconds this process spent waiting at the gate, in all."""
        self.bypassed = 0
        """How many times a wait ran out and the work went on without the gate."""
        self.idle_releases = 0
        """How many times `release_when_idle` let a shared hold go."""
        self._lock = threading.RLock()
        self._uses = 0
        self._last_use = 0.0
        self._held_since = 0.0

    @classmethod
    def open(cls, stem: str, heartbeat: Callable[[], None] | None = None) -> GpuGate:
        """The gate whose files `GradingTree.gate` made (before the sandbox: afterwards they are out of reach)."""
        fds = [open_trusted(Path(stem + suffix)) for suffix in cls.SUFFIXES]
        return cls(*fds, heartbeat=heartbeat)

    def _take(self, fd: int, how: int, limit_s: float) -> bool:
        start = last = time.monotonic()
        while True:
            try:
                fcntl.flock(fd, how | fcntl.LOCK_NB)
                self._waited(fd, start, "")
                return True
            except BlockingIOError:
                pass
            now = time.monotonic()
            if now - start > limit_s:
                self._waited(fd, start, ", ran out")
                self.bypassed += 1
                return False
            if now - last > 1.0:
                self.heartbeat()
                last = now
            time.sleep(self.POLL_S)

    def _waited(self, fd: int, start: float, how: str) -> None:
        spent = time.monotonic() - start
        self.waited_s += spent
        if spent > 1.0:  # for staff, in the worker's log
            which = {self.turnstile: "turnstile", self.room: "room", self.queue: "queue"}.get(fd, "?")
            print(f"gate: waited {spent:.1f} s for the {which}{how} (at {time.time():.1f})", flush=True)

    def enter_shared(self) -> None:
        with self._lock:
            if self.held:
                return
            start = time.monotonic()
            if self._take(self.turnstile, fcntl.LOCK_EX, self.SHARED_WAIT_S):
                fcntl.flock(self.turnstile, fcntl.LOCK_UN)
                left = self.SHARED_WAIT_S - (time.monotonic() - start)
                if self._take(self.room, fcntl.LOCK_SH, max(left, 0.0)):
                    self.held = "shared"
                    self._held_since = self._last_use = time.monotonic()

    def leave(self) -> None:
        with self._lock:
            if self.held:
                fcntl.flock(self.room, fcntl.LOCK_UN)
                held_s = time.monotonic() - self._held_since
                if self.held == "shared" and held_s > 2.0:  # a long hold keeps a timer waiting: for staff, in the log
                    print(f"gate: a shared hold of {held_s:.1f} s (at {time.time():.1f})", flush=True)
                self.held = ""

    @contextlib.contextmanager
    def shared(self) -> Iterator[None]:
        """Use the GPU beside other sharers (a case worker's call, a timing worker's warm-up)."""
        with self._lock:
            self.wanted += 1
            self.enter_shared()
        try:
            yield
        finally:
            with self._lock:
                self.wanted -= 1
                if not self.wanted and self.held == "shared":
                    self.leave()

    def touch(self) -> None:
        """A kernel is about to be launched: inside a `shared()` window, the hold is taken again if
        `release_when_idle` let it go, and the idle clock restarts."""
        with self._lock:
            self._uses += 1
            self._last_use = time.monotonic()
            if self.wanted and not self.held:
                self.enter_shared()

    IDLE_S = 1.0
    """A shared hold with no launch for this long, and no GPU work left, is let go (`release_when_idle`)."""

    def release_when_idle(self, sync: Callable[[], None]) -> threading.Thread:
        """Watch the shared hold from a thread of its own: once no kernel was launched for `IDLE_S` (`touch`) and
        the GPU work queued so far is done (`sync`), the hold is let go, and the next launch takes it again.
        A submission that spins in Python inside its call (a loop that never ends, as one demo file's wrapper
        does) used to keep its share until the stall limit stopped it (120 s), and every timer of the class
        waited `ROOM_WAIT_S` for the room in turn; now it keeps the GPU for about `IDLE_S`. The thread never
        waits for the lock: a hold being taken or let go by the worker itself is left alone."""

        def watch() -> None:
            while True:
                time.sleep(self.IDLE_S / 4)
                if self.held != "shared" or time.monotonic() - self._last_use < self.IDLE_S:
                    continue
                uses = self._uses
                sync()  # outside the lock: a kernel that runs for seconds keeps its hold until it ends
                if not self._lock.acquire(blocking=False):
                    continue
                try:
                    if self.held == "shared" and self._uses == uses \
                            and time.monotonic() - self._last_use >= self.IDLE_S:
                        self.leave()
                        self.idle_releases += 1
                finally:
                    self._lock.release()

        thread = threading.Thread(target=watch, name="gpu-gate-idle", daemon=True)
        thread.start()
        return thread

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[bool]:
        """Have the GPU alone (a speed test's timed calls); yields whether it does (False: a wait ran out)."""
        self.leave()
        wanted, self.wanted = self.wanted, 0  # no launch inside takes a shared hold
        taken = []
        try:
            if self._take(self.queue, fcntl.LOCK_EX, self.QUEUE_WAIT_S):
                taken.append(self.queue)
                time.sleep(self.GRACE_S)  # the sharers the last timer held up get in first
                if self._take(self.turnstile, fcntl.LOCK_EX, self.ROOM_WAIT_S):
                    taken.append(self.turnstile)
                    if self._take(self.room, fcntl.LOCK_EX, self.ROOM_WAIT_S):
                        self.held = "exclusive"
            start = time.monotonic()
            yield self.held == "exclusive"
            print(f"gate: held the GPU {'alone' if self.held else 'not alone'} for {time.monotonic() - start:.2f} s "
                  f"(at {time.time():.1f})", flush=True)
        finally:
            self.leave()
            self.wanted = wanted
            for fd in reversed(taken):
                fcntl.flock(fd, fcntl.LOCK_UN)

    def suspend(self, sync: Callable[[], None]) -> bool:
        """Let a shared hold go for a while (CPU work that may take seconds, during which a timer should not wait:
        a compilation, an interpreted kernel): `sync` first waits for the GPU work queued so far. Returns whether
        there was a hold to let go (then `enter_shared` takes it again)."""
        with self._lock:
            if self.held != "shared":
                return False
            sync()
            self.leave()
            return True

    def paused(self, work: Callable[[], Any], sync: Callable[[], None]) -> Any:
        """`work()` with a shared hold let go meanwhile (`suspend`)."""
        if not self.suspend(sync):
            return work()
        try:
            return work()
        finally:
            self.enter_shared()


STAGES = ("load", "import", "compile", "cases", "address", "twin", "records", "timing", "gate_wait", "gate_bypassed",
          "gate_idle_releases")
"""What a worker's last STATUS frame may count in its `stages` (seconds; `gate_bypassed` and `gate_idle_releases`,
the holds let go while a call idled, are counts): where the worker's time went, for the class benchmark."""


def worker_stages(status: dict) -> dict[str, float]:
    """The `stages` of a worker's last STATUS frame, keeping only known names with plausible numbers (the
    worker's word: staff statistics, never a verdict)."""
    raw = status.get("stages") if isinstance(status, dict) else None
    if not isinstance(raw, dict):
        return {}
    return {name: float(raw[name]) for name in STAGES
            if isinstance(raw.get(name), (int, float)) and not isinstance(raw.get(name), bool)
            and 0 <= raw[name] < 1e6}
