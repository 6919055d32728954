"""A CUDA worker compiles an autotuned kernel's configs side by side, each in a child process, at the kernel's first
launch of a case.

A case worker runs each case under every autotune config in turn (grader/worker/main.py `run_case`), and a
config's first launch compiles it: a file with eight configs waited for eight compilations in a row, at one core.
Measured on the H200 box (triton 3.6) at ce162b4: one task-12 file took 19.0 s to grade, of which its workers
spent 25.4 core-seconds compiling.

Here, when a kernel's autotuner is launched during a case's first run, every config the worker will run it under
is compiled first, through Triton's own asynchronous compilation (AsyncCompileMode, in
triton.runtime._async_compile of triton 3.6 and 3.9): a `warmup=True` launch per config with the launch's own
arguments (Triton's `Autotuner.warmup` does the same, one config after another). Triton hands each compilation to
an executor; this one (`ForkPool`) forks the worker for it. The child has the worker's memory, sandbox and
limits, compiles into the job's Triton cache (TRITON_CACHE_DIR) and exits; it touches no CUDA (a compilation for
a known target needs none). The worker then loads each binary from that cache, and each config's real launch
finds it in the kernel's cache.

Why processes and not threads: with a pool of threads, triton 3.6's compilations held the interpreter lock for
most of their time. Measured on the H200 box, one task-12 file: 18.8 s against 19.1 s one by one, and its
compilations' seconds summed rose from 25.2 to 42.2 (each slowed by the others).

What it changes is when compilations happen, never what runs: the same binaries, the same launches, the same
records. It is best effort: a config whose child fails (a compile error, a crash, a refused fork) is compiled
again by the worker itself, whose own compilation reports the error as it always did. Only the graded run of each
case (config 0's) is armed, and a timing worker's first call; the twin and the address check's interpreted re-run
are not.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import warnings
from concurrent.futures import Executor, Future

CHILDREN_MAX = 8
"""The most compilations a worker runs side by side when the job leaves it to the worker (`compile_processes` 0)."""

_local = threading.local()


def in_pool() -> bool:
    """Whether this thread compiles for a ParallelCompile (a child's, or the thread that loads a child's binary):
    its compilations leave the GPU gate alone, since the thread that waits for them has let the gate's hold go
    for all of them at once."""
    return getattr(_local, "pool", False)


def most_at_once(requested: int, configs: int) -> int:
    """How many compilations run side by side for `configs` configs: `requested` (the job's `compile_processes`), or
    when 0 the worker's cores, at most CHILDREN_MAX; never more than there are configs."""
    if requested <= 0:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        requested = min(CHILDREN_MAX, cores)
    return max(1, min(requested, configs))


class ForkPool(Executor):
    """An executor for Triton's AsyncCompileMode: `submit(fn)` forks a child that calls `fn` (a compilation, which
    writes its binary to the Triton cache) and exits; once every compilation of the batch is submitted
    (`submitted`) and the child is gone, a thread of the worker calls `fn` again, which finds the cache entry, and
    that is the future's result. At most `most` children in a batch: beyond them, `fn` runs in a thread of the
    worker once every fork is made (as it would without the pool, beside the others). `seconds`: the children's
    wall seconds, summed."""

    def __init__(self, most: int) -> None:
        self.most = most
        self.children = 0
        self.seconds = 0.0
        self.failed = 0
        """Children that did not exit 0 (their compilations are made again by the worker)."""
        self._all_in = threading.Event()
        self._lock = threading.Lock()
        self._waiters: list[threading.Thread] = []

    def submit(self, fn, /, *args, **kwargs) -> Future:  # noqa: D102 - Executor's
        future: Future = Future()
        pid = -1
        if self.children < self.most:
            try:
                with warnings.catch_warnings():  # Python 3.12 warns of a fork with threads: the child only compiles
                    warnings.simplefilter("ignore", DeprecationWarning)
                    pid = os.fork()  # from the thread that launched the kernel: none of the worker's compiles runs
            except OSError:
                pid = -1
            if pid == 0:
                _child(fn, args, kwargs)
        if pid < 0:
            self._waiters.append(threading.Thread(target=self._resolve, args=(future, fn, args, kwargs), daemon=True))
            return future
        self.children += 1
        waiter = threading.Thread(target=self._wait, args=(pid, time.perf_counter(), future, fn, args, kwargs),
                                  daemon=True)
        waiter.start()
        self._waiters.append(waiter)
        return future

    def submitted(self) -> None:
        """Every compilation of the batch is submitted: no fork comes after this, and the worker's threads may
        compile (a thread inside the compiler while the worker forks would leave its locks held in the child)."""
        self._all_in.set()
        for waiter in self._waiters:
            if waiter.ident is None:  # a compilation past `most`, made here
                waiter.start()

    def _wait(self, pid: int, start: float, future: Future, fn, args, kwargs) -> None:
        try:
            _, status = os.waitpid(pid, 0)
            ok = os.waitstatus_to_exitcode(status) == 0
        except ChildProcessError:
            ok = False
        with self._lock:
            self.seconds += time.perf_counter() - start
            self.failed += not ok
        self._resolve(future, fn, args, kwargs)

    def _resolve(self, future: Future, fn, args, kwargs) -> None:
        self._all_in.wait()
        _local.pool = True
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # noqa: BLE001 - the future carries it (Triton's mode ignores it)
            future.set_exception(exc)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:  # noqa: D102 - Executor's
        self.submitted()
        if wait:
            for waiter in self._waiters:
                if waiter.ident:
                    waiter.join()
        self._waiters = []


def _child(fn, args, kwargs) -> None:
    """In the forked child: compile, and leave without running anything of the worker's (no atexit, no flush)."""
    code = 1
    try:
        _local.pool = True
        fn(*args, **kwargs)
        code = 0
    except BaseException:  # noqa: BLE001, S110 - the worker compiles it again and reports it
        pass
    finally:
        os._exit(code)


class ParallelCompile:
    """One per CUDA worker (case or timing): `install(tuners)` once, then `armed` around the calls whose launches
    compile their autotuners' configs side by side."""

    def __init__(self, processes: int, on_wait=None, waited=None) -> None:
        self.processes = processes
        """The job's `compile_processes` (0: the worker's cores, at most CHILDREN_MAX; 1: off)."""
        self.on_wait = on_wait
        """Called with the work and returns its result: the worker's GPU gate lets its hold go meanwhile."""
        self.waited = waited
        """Called with the seconds the worker waited for each batch of the children's compilations (the worker's
        `Stages.waited`: of the compile stage, not of the stage they happened in)."""
        self.armed = False
        self.configs: dict[int, list] = {}
        """id(autotuner) -> every config a case worker runs it under (the list `run_case` forces one of)."""
        self.natural: set[int] = set()
        """id(autotuner) of a timing worker's autotuners, which benchmark the configs their pruning keeps."""
        self.children = 0
        self.child_seconds = 0.0
        """The children's wall seconds, summed (each a compilation, as the compile stage counts one)."""
        self.failed = 0

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
        """Armed within: a case's graded run (config 0's), a timing worker's first call of the submission (its
        warm-up compiles and benchmarks)."""
        self.armed = True
        try:
            yield
        finally:
            self.armed = False

    def compile_configs(self, tuner, args: tuple, kwargs: dict) -> None:
        """Compile, side by side, every config of `tuner` for this launch's arguments (those already in the
        kernel's cache cost a lookup and no child)."""
        configs = self.configs_for(tuner, args, kwargs)
        most = most_at_once(self.processes, len(configs))
        if most < 2:
            return
        from triton.runtime._async_compile import AsyncCompileMode

        options = {k: v for k, v in kwargs.items() if k != "warmup"}
        pool = ForkPool(most)

        def work() -> None:
            try:
                with AsyncCompileMode(pool, ignore_errors=True):
                    try:
                        for config in configs:
                            try:
                                tuner.fn.run(*args, warmup=True, **options, **config.all_kwargs())
                            except Exception:  # noqa: BLE001, S112 - the config's own launch reports it
                                continue
                    finally:
                        pool.submitted()  # before the mode's exit waits for the compilations
            finally:
                pool.shutdown()

        start = time.perf_counter()
        try:
            self.on_wait(work) if self.on_wait is not None else work()
        except Exception:  # noqa: BLE001, S110 - best effort: the launches compile what is missing
            pass
        if self.waited is not None:
            self.waited(time.perf_counter() - start)
        self.child_seconds += pool.seconds
        self.children += pool.children
        self.failed += pool.failed
