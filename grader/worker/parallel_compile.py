"""A CUDA case worker compiles an autotuned kernel's configs side by side, at the kernel's first launch of a case.

A case worker runs each case under every autotune config in turn (grader/worker/main.py `run_case`), and a
config's first launch compiles it: a file with eight configs waited for eight compilations in a row, at one core.
Measured on the H200 box (triton 3.6) at ce162b4: one task-12 file took 19.0 s to grade, of which its workers
spent 25.4 core-seconds compiling.

Here, when a kernel's autotuner is launched during a case's first run, every config the worker will run it under
is compiled first, in a pool of threads, through Triton's own asynchronous compilation (AsyncCompileMode, in
triton.runtime._async_compile of triton 3.6 and 3.9): a `warmup=True` launch per config with the launch's own
arguments (Triton's `Autotuner.warmup` does the same, one config after another), so that each config's real
launch finds its binary in the kernel's cache. The threads overlap where the compiler lets the interpreter go
(LLVM's code generation, ptxas in a subprocess; the MLIR passes too in triton 3.9).

What it changes is when compilations happen, never what runs: the same binaries, the same launches, the same
records. It is best effort: a config whose compilation fails here is compiled again by its own launch, which
reports the error as it always did. Only the graded run of each case (config 0's) is armed; the twin and the
address check's interpreted re-run are not.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

THREADS_MAX = 8
"""The most threads a worker compiles with when the job leaves it to the worker (`compile_threads` 0)."""

_local = threading.local()


def in_pool() -> bool:
    """Whether this thread is one of a ParallelCompile's (its compilations leave the GPU gate alone: the thread
    that waits for them has let the gate's hold go for all of them at once)."""
    return getattr(_local, "pool", False)


def _mark() -> None:
    _local.pool = True


def threads_for(requested: int, configs: int) -> int:
    """How many threads compile `configs` configs: `requested` (the job's `compile_threads`), or when 0 the
    worker's cores, at most THREADS_MAX; never more than there are configs."""
    if requested <= 0:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        requested = min(THREADS_MAX, cores)
    return max(1, min(requested, configs))


class ParallelCompile:
    """One per CUDA case worker: `install(tuners)` once, then `armed` around the runs whose launches may compile
    their autotuner's configs side by side."""

    def __init__(self, threads: int, on_wait=None) -> None:
        self.threads = threads
        """The job's `compile_threads` (0: the worker's cores, at most THREADS_MAX; 1: off)."""
        self.on_wait = on_wait
        """Called with the work and returns its result: the worker's GPU gate lets its hold go meanwhile."""
        self.armed = False
        self.configs: dict[int, list] = {}
        """id(autotuner) -> every config a case worker runs it under (the list `run_case` forces one of)."""
        self.natural: set[int] = set()
        """id(autotuner) of a timing worker's autotuners, which benchmark the configs their pruning keeps."""
        self.wall = 0.0
        """Seconds the worker waited for the threads' compilations."""
        self.batches = 0
        """How many times configs were compiled side by side."""
        self._pool: ThreadPoolExecutor | None = None

    def install(self, tuners: list, forced: bool = True) -> None:
        """Remember each autotuner's configs (`forced`: a case worker's, which runs every one of them in turn;
        else a timing worker's, whose autotuner benchmarks what its pruning keeps) and wrap Autotuner.run, once
        per process."""
        from triton.runtime.autotuner import Autotuner

        for tuner, configs in tuners:
            if forced:
                self.configs[id(tuner)] = list(configs)
            else:
                self.natural.add(id(tuner))
        if getattr(Autotuner.run, "_parallel_compile", None) is not None:
            Autotuner.run._parallel_compile = self
            return
        orig = Autotuner.run

        def run(tuner, *args, **kwargs):
            current = run._parallel_compile
            if current.armed:
                current.compile_configs(tuner, args, kwargs)
            return orig(tuner, *args, **kwargs)

        run._parallel_compile = self
        Autotuner.run = run

    def configs_for(self, tuner, args: tuple, kwargs: dict) -> list:
        """The configs `tuner` will launch with these arguments: a case worker's every one; a timing worker's,
        those its pruning keeps (`prune_configs`, as Autotuner.run calls it before it benchmarks them)."""
        if id(tuner) in self.configs:
            return self.configs[id(tuner)]
        if id(tuner) not in self.natural or len(tuner.configs) < 2:
            return []
        tuner.nargs = dict(zip(tuner.arg_names, args))
        try:
            return list(tuner.prune_configs(kwargs))
        except Exception:  # noqa: BLE001 - Autotuner.run calls it again and reports it
            return []
        finally:
            tuner.nargs = None

    @contextlib.contextmanager
    def arming(self):
        """Armed within: a timing worker's first call of the submission (its warm-up compiles and benchmarks)."""
        self.armed = True
        try:
            yield
        finally:
            self.armed = False

    def compile_configs(self, tuner, args: tuple, kwargs: dict) -> None:
        """Compile, side by side, every config of `tuner` for this launch's arguments (those already in the
        kernel's cache cost a lookup)."""
        configs = self.configs_for(tuner, args, kwargs)
        threads = threads_for(self.threads, len(configs))
        if threads < 2:
            return
        from triton.runtime._async_compile import AsyncCompileMode

        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="grader-compile",
                                            initializer=_mark)
        options = {k: v for k, v in kwargs.items() if k != "warmup"}
        pool = self._pool

        def work() -> None:
            with AsyncCompileMode(pool, ignore_errors=True):
                for config in configs:
                    try:
                        tuner.fn.run(*args, warmup=True, **options, **config.all_kwargs())
                    except Exception:  # noqa: BLE001, S112 - the config's own launch reports it
                        continue

        start = time.perf_counter()
        try:
            self.on_wait(work) if self.on_wait is not None else work()
        except Exception:  # noqa: BLE001, S110 - best effort: the launches compile what is missing
            pass
        self.wall += time.perf_counter() - start
        self.batches += 1

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
