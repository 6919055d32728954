"""The record stream a worker sends back: its frames, the worker's writer and the trusted side's readers.

What the worker sends back travels through one file descriptor, opened for it before the sandbox on a file of
`trusted/` that it cannot otherwise reach (append-only): a stream of frames, each a fixed header (magic, kind,
key, payload length) and a payload. JSON frames carry the load report and progress; tensor frames carry a case's
runs or a speed test's timings (torch.save, read back with weights_only=True). The trusted side reads the stream
with `RecordStream`: every frame is bounded, a truncated or garbled stream ends where it breaks, and what it lacks
fails that job's tests with a message, never anything else.
"""

from __future__ import annotations

import io
import json
import os
import re
import struct
from enum import IntEnum
from pathlib import Path
from typing import Any

from grader.protocol.trusted_files import open_trusted


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

    @property
    def before_loading(self) -> bool:
        """Whether the worker said nothing past its first record (`started`: interpreter and grader loaded, nothing
        of the submission read), so it died or hung before loading the submission."""
        return not set(self.status) - {"started"}

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


STAGES = ("load", "load_inputs", "load_baseline", "load_sandbox", "load_cuda", "import", "compile", "compile_wall",
          "cases", "address", "twin", "records", "timing", "timing_warm_baseline", "timing_warm_submission",
          "timing_timed", "gate_wait", "gate_bypassed", "gate_idle_releases", "gpu_checks", "parallel_compiles",
          "parallel_failed")
"""What a worker's last STATUS frame may count in its `stages`: where the worker's time went, for the class
benchmark. Seconds, except the counts (COUNTED_STAGES): `gate_bypassed` and `gate_idle_releases` (the holds let
go while a call idled), `gpu_checks` (the GPU compile check's compilations), `parallel_compiles` (compilations
made side by side in child processes) and `parallel_failed` (those whose child did not exit 0). `compile` sums
every compilation's seconds, side by side ones each in full; `compile_wall` is the worker's wall seconds spent
compiling or waiting for compilations. A timing worker's `timing` is split, of it, into `timing_warm_baseline`,
`timing_warm_submission` and `timing_timed` (grader/worker/timing.py `time_calls`); `load` into `load_inputs`
(the cases' inputs read), `load_baseline` (a timing worker's staff baselines loaded), `load_sandbox` and
`load_cuda` (the CUDA context made)."""

COUNTED_STAGES = ("gate_bypassed", "gate_idle_releases", "gpu_checks", "parallel_compiles", "parallel_failed")
"""Of STAGES, the ones that count events, not seconds."""


DIGEST = re.compile(r"[0-9a-f]{64}")
COMPILE_PASSED_MAX = 512


def compile_passed(status: dict) -> list[str]:
    """The GPU compile check's keys a worker's last STATUS frame says compiled (`compile_passed`: digests), or
    nothing if the list is not one of at most COMPILE_PASSED_MAX digests. The worker's word, as every in-process
    check is: a later worker of the same job skips those compilations (on the CPU, a hidden shard after its
    job's public ones), and no text of it goes anywhere else."""
    raw = status.get("compile_passed") if isinstance(status, dict) else None
    if not isinstance(raw, list) or len(raw) > COMPILE_PASSED_MAX:
        return []
    if not all(isinstance(d, str) and DIGEST.fullmatch(d) for d in raw):
        return []
    return sorted(set(raw))


def worker_stages(status: dict) -> dict[str, float]:
    """The `stages` of a worker's last STATUS frame, keeping only known names with plausible numbers (the
    worker's word: staff statistics, never a verdict)."""
    raw = status.get("stages") if isinstance(status, dict) else None
    if not isinstance(raw, dict):
        return {}
    return {name: float(raw[name]) for name in STAGES
            if isinstance(raw.get(name), (int, float)) and not isinstance(raw.get(name), bool)
            and 0 <= raw[name] < 1e6}
