"""Timing a submission against a staff baseline (speed tests), in the timing worker.

What a call's time is on CUDA ("gpu" clock): the span of its GPU work, from the start of its first activity
(kernel, copy or fill, on any stream) to the end of its last, as CUPTI records it. The profiler traces GPU
activity only, not the host's operators: tracing the host as well slowed it enough to widen the idle gaps between
a call's kernels (task 23's baseline at K = 8192 read 61-91 us against 38 us of kernels). Calls are told apart by
marker kernels that nothing else launches (`torch.cuda._sleep`'s `spin_kernel`, a few hundred nanoseconds): one
after each call's L2 flush, one after the synchronize that ends it, so every activity between the two is that
call's, on any stream.

Also here: how the timing worker loads a staff baseline (`load_baseline`) and lets a torch.compile'd one compile
inside the sandbox (`compile_here`).
"""

from __future__ import annotations

import contextlib
import linecache
import os
import sys
import time
import traceback
import types
from collections.abc import Callable
from pathlib import Path

import torch

L2_FLUSH_BYTES = 256 << 20
"""Written and read back between timed calls so that neither side finds its inputs in the L2 cache (50-60 MB on
Hopper)."""


class L2Flush:
    """Empties the L2 cache between timed calls, and leaves it clean.

    Writing a buffer larger than L2 evicts whatever the last call left there, but fills L2 with the buffer's dirty
    lines, and the next call pays for writing them back to memory as its own loads evict them. On the H100 that
    write-back added about 10 us to every call that streams memory, both sides alike, so it pulled every ratio
    toward 1 (medians, clean against dirty: task 12's reference at B = 16 31.7 against 41.3 us, task 11's at
    8192 x 8192 63.2 against 72.2, a 128 MB copy 87.7 against 94.1). Reading the buffer back after writing it does
    that write-back inside the flush: the lines it leaves in L2 are clean, and not the call's."""

    def __init__(self, device: str) -> None:
        self.buffer = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.float32, device=device)

    def __call__(self) -> None:
        self.buffer.zero_()  # evicts everything the last call left in L2
        self.buffer.sum()    # writes the zeros' dirty lines back now, rather than during the next call


SIDE_WORDS = {"submission": "your function", "baseline": "the baseline"}
MARKER = "spin_kernel"
"""The marker's kernel name: torch.cuda._sleep's, which neither side of a speed test launches."""
MARKER_CYCLES = 1000
"""The marker's length in GPU clock cycles (well under a microsecond)."""


def marked_calls(activity: list[tuple[float, float, str]]) -> list[list[tuple[float, float, str]]]:
    """Each timed call's own GPU activities, from a trace of GPU activity (start, end, name).

    Every call k sits between two markers, 2k and 2k + 1: the first after its L2 flush, the second after the
    device-wide synchronize that ends it, so the call's work on every stream lies between them, and the flush and
    the next call's fresh inputs (copies made before its flush) lie outside."""
    acts = sorted(activity)
    marks = [i for i, (_, _, name) in enumerate(acts) if MARKER in name]
    return [acts[i + 1:j] for i, j in zip(marks[0::2], marks[1::2])]


def span(own: list[tuple[float, float, str]]) -> float:
    """A call's GPU span: from the start of its first activity to the end of its last (`marked_calls`)."""
    return max(end for _, end, _ in own) - min(start for start, _, _ in own)


def busy_time(own: list[tuple[float, float, str]]) -> float:
    """How long a call's activities kept the GPU busy: the length of the union of their intervals (idle gaps
    between kernels, where the GPU waits for the host, do not count; overlapping work on two streams counts once)."""
    total, end = 0.0, float("-inf")
    for start, stop, _ in sorted(own):
        if stop > end:
            total += stop - max(start, end)
            end = stop
    return total


def gpu_activity(profiler) -> list[tuple[float, float, str]]:
    """(start, end, name) of every GPU activity in a finished profile (microseconds)."""
    return [(e.time_range.start, e.time_range.end, e.name) for e in profiler.events()
            if e.device_type == torch.autograd.DeviceType.CUDA]


def _marker() -> None:
    torch.cuda._sleep(MARKER_CYCLES)


def profile_marked(fn, args: list, kwargs: dict, reps: int, host_too: bool = False,
                   ) -> tuple[list[list[tuple[float, float, str]]], list[float]]:
    """For the benchmark scripts: profile `reps` calls of `fn` (CUDA) as the speed tests' GPU clock sees them, each
    after an L2 flush and between two markers (see `time_calls`). Returns each call's own GPU activities
    (`marked_calls`; a call that launched nothing has none) and the host's seconds from the call's synchronized
    start until it returned. `host_too` also traces the host's operators, which slows the host (module docstring)."""
    flush = L2Flush("cuda")
    activities = [torch.profiler.ProfilerActivity.CUDA] + ([torch.profiler.ProfilerActivity.CPU] if host_too else [])
    host = []
    with torch.profiler.profile(activities=activities) as profiler:
        for _ in range(reps):
            flush()
            _marker()
            torch.cuda.synchronize()
            start = time.perf_counter()
            fn(*args, **kwargs)
            host.append(time.perf_counter() - start)
            torch.cuda.synchronize()
            _marker()
        torch.cuda.synchronize()
    return marked_calls(gpu_activity(profiler)), host


def time_calls(entry, baseline, case: dict, device: str, warmup: int, reps: int, clock: str = "gpu",
               progress: Callable[[], None] | None = None, gate=None, first=None, phase=None) -> dict:
    """Time the submission against the baseline on one case's inputs, in this process, interleaved.

    Method: each timed call gets fresh inputs (a new copy of the case's inputs, made before the clock starts), the
    L2 cache is flushed, the whole device is synchronized, the call runs, the whole device is synchronized again.
    The order of the two sides alternates (ABBA) so drifts of clock or temperature fall on both. Warm-up calls of
    each side come first (compilation, autotuning). Only times are recorded here.

    `clock` says what a call's time is. "gpu" (CUDA only): the span of its GPU work, from the start of its first
    kernel (or copy, or fill) to the end of its last, over all streams, as CUPTI sees them (GPU activity only, see
    the module's docstring): work a call leaves on side streams is counted, and so is any idle gap between its
    kernels, but not the host's work before its first launch (argument checks, Python dispatch, which at small
    sizes would outweigh the kernels).
    "wall" (and always on the CPU): the host clock from before the call to after the synchronize that ends it.

    `progress` is called after each warm-up pair (the first one compiles, torch.compile's baseline included), so
    the runner's stall clock sees the worker alive.

    `gate` (grader/protocol GpuGate, on CUDA): the warm-up shares the GPU with the case workers of other jobs;
    the timed calls have it alone (the record's `gate` says whether they did).

    `first`: a context the submission's first warm-up call runs in (grader/worker/parallel_compile.py: the
    autotuner's configs compiled side by side before it benchmarks them).

    `phase(name)`: a context for each part of the work, for the staff's statistics (the worker's `Stages.stage`):
    `timing_warm_baseline` (the baseline's warm-up calls: torch.compile's tracing and its kernels' autotuning),
    `timing_warm_submission` (the submission's: its autotuner's benchmarks) and `timing_timed` (the timed calls
    and the profiler, once the GPU is the worker's alone).
    """
    timer = _Timer(entry, baseline, case, device, clock == "gpu" and device == "cuda", gate, phase)
    record: dict = {"method": f"{timer.what()}; fresh inputs and an L2 flush per call; "
                              f"{warmup} warm-up and {reps} timed calls per side, interleaved",
                    "clock": "gpu" if timer.gpu_clock else "wall", "error": None, "submission": [], "baseline": []}
    try:
        timer.warm_up(warmup, progress, first)
        profiler = timer.time_reps(reps, record)
    except BaseException as exc:  # noqa: BLE001 - a failure of either side is a result
        who = SIDE_WORDS.get(timer.side, "the grader's profiler")
        record["error"] = f"{who} raised {type(exc).__name__}: {str(exc)[:2000]}"
        record["traceback"] = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-20000:]
        return record
    if not timer.gpu_clock:
        record.update(timer.walls)
    elif not timer.gpu_spans(profiler, record):
        return record
    items = timer.last if isinstance(timer.last, (tuple, list)) else ([] if timer.last is None else [timer.last])
    record["outputs"] = [{"kind": "tensor", "tensor": t.detach().to("cpu").clone(), "device": str(t.device)}
                         if isinstance(t, torch.Tensor) else {"kind": type(t).__name__, "repr": repr(t)[:200]}
                         for t in items]
    return record


class _Timer:
    """`time_calls`'s phases: the warm-up (the GPU shared), the timed calls (the GPU alone, under the profiler on
    the "gpu" clock), and each call's span read from the profiler's trace. `side` is the side running now (a
    failure is that side's); `walls` the host clock of each timed call, whichever clock decides; `last` the
    submission's last timed result (the judge checks it)."""

    def __init__(self, entry, baseline, case: dict, device: str, gpu_clock: bool, gate, phase) -> None:
        self.entry, self.baseline, self.gate, self.gpu_clock = entry, baseline, gate, gpu_clock
        cuda = device == "cuda"
        self.sync = torch.cuda.synchronize if cuda else (lambda: None)
        self.shared = gate.shared if gate is not None else contextlib.nullcontext
        self.phase = phase if phase is not None else (lambda _name: contextlib.nullcontext())
        with self.shared():
            self.pristine = ([a.to(device) if isinstance(a, torch.Tensor) else a for a in case["args"]],
                             {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in case["kwargs"].items()})
            self.flush = L2Flush(device) if cuda else None
        self.side = "baseline"
        self.order: list[str] = []
        self.walls: dict[str, list[float]] = {"submission": [], "baseline": []}
        self.last = None

    def what(self) -> str:
        return ("GPU span (first kernel start to last kernel end, all streams, GPU activity traced alone)"
                if self.gpu_clock else "host clock around device-wide synchronize")

    def call(self, fn, mark: bool = False) -> tuple[float, object]:
        """One call on fresh inputs after an L2 flush, between device-wide synchronizes: its host seconds and its
        result. `mark`: between marker kernels, the GPU clock's boundaries (what runs between them is its work)."""
        args = [a.clone() if isinstance(a, torch.Tensor) else a for a in self.pristine[0]]
        kwargs = {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in self.pristine[1].items()}
        if self.flush is not None:
            self.flush()
        if mark:
            _marker()
        self.sync()
        if self.gate is not None:
            self.gate.touch()  # a warm-up's hold, let go if the last call idled (GpuGate.release_when_idle), comes back
        start = time.perf_counter()
        out = fn(*args, **kwargs)
        self.sync()
        seconds = time.perf_counter() - start
        if mark:
            _marker()  # the call's other boundary: its work on every stream is done by now
        return seconds, out

    def warm_up(self, warmup: int, progress, first) -> None:
        """The warm-up pairs, the GPU shared with other jobs' case workers: compilation, autotuning."""
        for w in range(warmup):
            with self.shared():
                self.side = "baseline"
                with self.phase("timing_warm_baseline"):
                    self.call(self.baseline)
                self.side = "submission"
                with self.phase("timing_warm_submission"), \
                        first() if first is not None and w == 0 else contextlib.nullcontext():
                    self.call(self.entry)
            if progress is not None:
                progress()

    def time_reps(self, reps: int, record: dict):
        """The timed calls, ABBA, with the GPU alone (the record's `gate` says whether it was); returns the
        profiler that traced them on the "gpu" clock (None on the host clock)."""
        self.side = "profiler"
        profiler = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) \
            if self.gpu_clock else None
        alone = self.gate.exclusive() if self.gate is not None else contextlib.nullcontext(None)
        with alone as had_it, self.phase("timing_timed"), \
                profiler if profiler is not None else contextlib.nullcontext():
            if had_it is not None:
                record["gate"] = "alone" if had_it else (
                    f"shared: the GPU was not free within {self.gate.ROOM_WAIT_S:g} s, the calls were timed beside "
                    "other workers' kernels")
            for r in range(reps):
                for self.side in (("submission", "baseline") if r % 2 == 0 else ("baseline", "submission")):
                    seconds, out = self.call(self.entry if self.side == "submission" else self.baseline,
                                             self.gpu_clock)
                    self.order.append(self.side)
                    self.walls[self.side].append(seconds)
                    if self.side == "submission":
                        self.last = out
        return profiler

    def gpu_spans(self, profiler, record: dict) -> bool:
        """Each timed call's GPU span and busy time from the profiler's trace, into the record; False (and the
        record's error) when the trace cannot be read or a call shows no GPU work."""
        record["wall_submission"], record["wall_baseline"] = self.walls["submission"], self.walls["baseline"]
        record["busy_submission"], record["busy_baseline"] = [], []
        try:
            calls = marked_calls(gpu_activity(profiler))
        except Exception as exc:  # noqa: BLE001 - reported; the test fails closed
            record["error"] = f"the grader's profiler failed: {type(exc).__name__}: {str(exc)[:2000]}"
            return False
        for call, side in enumerate(self.order):
            own = calls[call] if call < len(calls) else []
            if not own:
                record["error"] = (f"the profiler saw no GPU work in a timed call of {SIDE_WORDS[side]}: on CUDA "
                                   "each call must compute its result on the GPU")
                return False
            record[side].append(span(own) * 1e-6)  # the profiler counts microseconds
            # What the staff's check of the baseline compares (grader/judge/speed.py): the host's share of a span
            # varies with the machine's load, the GPU's busy time does not.
            record[f"busy_{side}"].append(busy_time(own) * 1e-6)
        return True


# ------------------------------------------------------------------- the baseline, in the sandboxed worker


def compile_here(jobdir: Path) -> None:
    """Let a torch.compile'd baseline compile inside the sandbox: Inductor works in this process (no pool of
    compile workers: the sandbox runs no Python but this one), caches in the job folder (which the sandbox lets it
    write, and where the grader may have put a staff run's cache), finds a user name without the password
    database (its default cache folder is named after the user, and the sandbox's user namespace has no entry),
    finds no `nvcc` on PATH (it runs `nvcc --version` for a comment in its debug output, and handles "not found"
    but not the sandbox's refusal to run it), and keeps Triton's own ptxas (Inductor would point Triton at the one
    torch ships, which the sandbox does not run, for every kernel compiled after it: the submission's too)."""
    import triton

    ptxas = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas"
    if ptxas.is_file() and "TRITON_PTXAS_PATH" not in os.environ:
        os.environ["TRITON_PTXAS_PATH"] = str(ptxas)
    path = os.environ.get("PATH", "").split(os.pathsep)
    os.environ["PATH"] = os.pathsep.join(d for d in path if d and not os.path.exists(os.path.join(d, "nvcc")))
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(jobdir / "inductor")
    os.environ["TORCHINDUCTOR_COMPILE_THREADS"] = "1"
    os.environ["USER"] = os.environ["LOGNAME"] = "grader"
    import torch._inductor.config as inductor_config  # the fork server may have read the variables already

    inductor_config.compile_threads = 1
    # No autotune results in files beside the kernels: Inductor bakes their absolute path into the code it caches,
    # so a timing worker starting from the staff run's cache (`inductor_from`) asked for a file in the staff run's
    # folder, which its sandbox refuses; a refusal (unlike a missing file) makes Inductor drop the cached graph and
    # compile the baseline again, in every timing worker. Without them, a cached graph loads and its kernels
    # autotune at their first call, as they did when the file was missing.
    inductor_config.autotune_local_cache = False


def load_baseline(name: str, path: str):
    """Load a staff baseline from memory, under a file name that does not exist: the sandbox refuses the task folder,
    and torch.compile reads the source file of what it compiles (torch._dynamo's profile key hashes the file when
    it exists, and fails when it cannot open it). Its lines go into linecache, where inspect (and so Triton's JIT,
    and a traceback) looks for them."""
    source = Path(path).read_text()
    filename = f"<staff baseline {os.path.basename(path)}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    module = types.ModuleType(name)
    module.__file__ = filename
    sys.modules[name] = module
    exec(compile(source, filename, "exec"), module.__dict__)  # noqa: S102 - staff code, loaded by the grader
    return module
