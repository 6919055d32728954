"""The grading run's worker pool: items by priority, with prerequisites and per-kind limits.

A class is graded as one pipeline on one pool of threads (each thread supervises one worker process at a time):

- the staff's timing run of each task with speed tests goes first (every job's speed verdict needs it, and each
  timing worker starts from its Inductor cache);
- case shards, the heaviest first; a job's hidden-case shards wait for its public ones, so that they find the
  job's kernels compiled in its Triton cache instead of compiling them again beside them (a thread with nothing
  else to do takes one early: a student checking one file waits for nothing);
- one timing worker per job with speed tests, once its task's staff run is done and no case shard waits for a
  thread (grader/protocol GpuGate: only its timed calls have the GPU alone), at most `limits["timing"]` at
  once.

Results come back to the one thread that calls `results()`, in the order they finish; `results()` ends when every
item has run. An item's function never raises into the pool: an exception becomes its result.
"""

from __future__ import annotations

import heapq
import itertools
import queue
import threading
import time
from collections import Counter
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass, field


@dataclass
class _Item:
    key: Hashable
    fn: Callable[[], object]
    priority: tuple
    kind: str
    after: set = field(default_factory=set)
    early: bool = False
    """May run before its prerequisites when a thread has nothing else to do."""


class Scheduler:
    """`workers` threads running items (from `start()` on); `limits` caps how many of a kind run at once."""

    def __init__(self, workers: int, limits: dict[str, int] | None = None) -> None:
        self.limits = dict(limits or {})
        self._cv = threading.Condition()
        self._ready: list[tuple[tuple, int, _Item]] = []
        self._waiting: dict[Hashable, _Item] = {}
        self._running: Counter = Counter()
        self._finished: set = set()
        self._seq = itertools.count()
        self._left = 0
        self._closed = False
        self._out: queue.Queue = queue.Queue()
        self._t0 = time.monotonic()
        self.trace: list[tuple[Hashable, float, float]] = []
        """(key, start, end) of every item run, seconds since the pool started (GRADER_TRACE=1 prints them)."""
        self._threads = [threading.Thread(target=self._work, name=f"grader-pool-{i}", daemon=True)
                         for i in range(max(1, workers))]

    def start(self) -> None:
        """Start the threads (add what is known first: the threads take the best of what is there)."""
        for thread in self._threads:
            if not thread.is_alive():
                thread.start()

    def add(self, key: Hashable, fn: Callable[[], object], priority: tuple = (), kind: str = "case",
            after: set | list | tuple = (), early: bool = False) -> None:
        """Run `fn` after the items named in `after` have finished (or earlier, if `early` and a thread is idle);
        lower `priority` first."""
        with self._cv:
            item = _Item(key, fn, tuple(priority), kind, set(after) - self._finished, early)
            self._left += 1
            if item.after:
                self._waiting[key] = item
            else:
                heapq.heappush(self._ready, (item.priority, next(self._seq), item))
            self._cv.notify_all()

    def _pick(self) -> _Item | None:
        held = []
        chosen = None
        while self._ready:
            entry = heapq.heappop(self._ready)
            item = entry[2]
            if self._running[item.kind] < self.limits.get(item.kind, 1 << 30):
                chosen = item
                break
            held.append(entry)
        for entry in held:
            heapq.heappush(self._ready, entry)
        if chosen is None:  # nothing else this thread may run: take a waiting item that may start early
            early = [i for i in self._waiting.values() if i.early]
            if early:
                chosen = min(early, key=lambda i: i.priority)
                del self._waiting[chosen.key]
        return chosen

    def _work(self) -> None:
        while True:
            with self._cv:
                item = self._pick()
                while item is None:
                    if self._closed and not self._left:
                        return
                    self._cv.wait()
                    item = self._pick()
                self._running[item.kind] += 1
            start = time.monotonic() - self._t0
            try:
                result = item.fn()
            except BaseException as exc:  # noqa: BLE001 - handed to the caller as the item's result
                result = exc
            with self._cv:
                self.trace.append((item.key, round(start, 2), round(time.monotonic() - self._t0, 2)))
                self._running[item.kind] -= 1
                self._finished.add(item.key)
                for other in list(self._waiting.values()):
                    other.after.discard(item.key)
                    if not other.after:
                        del self._waiting[other.key]
                        heapq.heappush(self._ready, (other.priority, next(self._seq), other))
                self._out.put((item.key, result))
                self._cv.notify_all()

    def results(self, idle: Callable[[], None] = lambda: None,
                idle_s: float = 0.2) -> Iterator[tuple[Hashable, object]]:
        """(key, result) of every item added, as each finishes; items may be added while this runs. `idle` runs
        every `idle_s` seconds while no item finishes (the caller's other work: a judged job is recorded then, not
        when the class's slowest worker ends)."""
        self.start()
        while True:
            with self._cv:
                if not self._left:
                    self._closed = True
                    self._cv.notify_all()
                    return
            try:
                key, result = self._out.get(timeout=idle_s)
            except queue.Empty:
                idle()
                continue
            with self._cv:
                self._left -= 1
            yield key, result

    def close(self) -> None:
        with self._cv:
            self._closed = True
            self._cv.notify_all()
