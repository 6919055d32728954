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
item has run, or, for a pool that lives as long as its service (`forever=True`: the submission server's), when it
is closed. An item's function never raises into the pool: an exception becomes its result.

The pool is also the machine's budget of processes (`slots`, about its cores): each running item holds one slot.
An item that could use more (a CUDA worker compiles an autotuned kernel's configs in child processes) is told at
its start how many slots nobody wants then (`granted()`: the free slots less the items waiting for one, at most
its `extra` more than its own). A lone file compiles on every core; under a burst each worker compiles in its own
process, and the earliest files' workers run first: files finish one after another instead of all together.
"""

from __future__ import annotations

import collections
import heapq
import itertools
import queue
import threading
import time
from collections import Counter
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass, field

_local = threading.local()


def granted() -> int:
    """In an item's function: its own slot plus those nobody wanted when it started (at most its `extra`)."""
    return getattr(_local, "slots", 1)


@dataclass
class _Item:
    key: Hashable
    fn: Callable[[], object]
    priority: tuple
    kinds: tuple[str, ...]
    after: set = field(default_factory=set)
    early: bool = False
    """May run before its prerequisites when a thread has nothing else to do."""
    extra: int = 0
    """The most slots it may hold beyond its own (its function reads `granted()`)."""


class Scheduler:
    """`workers` threads running items (from `start()` on); `limits` caps how many of a kind run at once; `slots`
    (default: `workers`) is the budget the running items share."""

    def __init__(self, workers: int, limits: dict[str, int] | None = None, slots: int | None = None,
                 forever: bool = False) -> None:
        self.limits = dict(limits or {})
        self.workers = max(1, workers)
        self.slots = max(1, slots or workers)
        self.forever = forever
        self._held = 0
        """Slots held: one per running item."""
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
        self.trace: collections.deque[tuple[Hashable, float, float]] = collections.deque(maxlen=100_000)
        """(key, start, end) of every item run, seconds since the pool started (GRADER_TRACE=1 prints them)."""
        self._threads = [threading.Thread(target=self._work, name=f"grader-pool-{i}", daemon=True)
                         for i in range(max(1, workers))]

    def start(self) -> None:
        """Start the threads (add what is known first: the threads take the best of what is there)."""
        for thread in self._threads:
            if not thread.is_alive():
                thread.start()

    def add(self, key: Hashable, fn: Callable[[], object], priority: tuple = (), kind: str | tuple[str, ...] = "case",
            after: set | list | tuple = (), early: bool = False, extra: int = 0) -> None:
        """Run `fn` after the items named in `after` have finished (or earlier, if `early` and a thread is idle);
        lower `priority` first. `kind`: one kind or several (each counted against its limit)."""
        with self._cv:
            kinds = (kind,) if isinstance(kind, str) else tuple(kind)
            item = _Item(key, fn, tuple(priority), kinds, set(after) - self._finished, early, extra)
            self._left += 1
            if item.after:
                self._waiting[key] = item
            else:
                heapq.heappush(self._ready, (item.priority, next(self._seq), item))
            self._cv.notify_all()

    def _allowed(self, item: _Item) -> bool:
        return all(self._running[k] < self.limits.get(k, 1 << 30) for k in item.kinds)

    def _pick(self) -> _Item | None:
        if self._held >= self.slots:
            return None
        held = []
        chosen = None
        while self._ready:
            entry = heapq.heappop(self._ready)
            item = entry[2]
            if self._allowed(item):
                chosen = item
                break
            held.append(entry)
        for entry in held:
            heapq.heappush(self._ready, entry)
        if chosen is None:  # nothing else this thread may run: take a waiting item that may start early
            early = [i for i in self._waiting.values() if i.early and self._allowed(i)]
            if early:
                chosen = min(early, key=lambda i: i.priority)
                del self._waiting[chosen.key]
        return chosen

    def _work(self) -> None:
        while True:
            with self._cv:
                if self._closed and self.forever:  # a service stopping: nothing new starts
                    return
                item = self._pick()
                while item is None:
                    if self._closed and (not self._left or self.forever):
                        return
                    self._cv.wait()
                    item = None if self._closed and self.forever else self._pick()
                self._running.update(item.kinds)
                self._held += 1
                wanted = len(self._ready) + sum(1 for i in self._waiting.values() if i.early)
                slots = 1 + max(0, min(item.extra, self.slots - self._held - wanted))
            start = time.monotonic() - self._t0
            _local.slots = slots
            try:
                result = item.fn()
            except BaseException as exc:  # noqa: BLE001 - handed to the caller as the item's result
                result = exc
            finally:
                _local.slots = 1
            with self._cv:
                self.trace.append((item.key, round(start, 2), round(time.monotonic() - self._t0, 2)))
                self._running.subtract(item.kinds)
                self._held -= 1
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
                if self._closed and self.forever:
                    return
                if not self._left and not self.forever:
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

    def room(self, kind: str = "case", ignore: str | None = None) -> int:
        """How many more items of `kind` could start now without waiting: the free slots less the items of that
        kind already waiting for one (ready, or allowed to start early). The server admits a new submission while
        this is positive, so that no slot idles and nothing waits in the pool that could still wait in the queue,
        in the queue's fair order. Waiting items of kind `ignore` do not count (they come after the new one)."""
        with self._cv:
            def counts(i: _Item) -> bool:
                return kind in i.kinds and (ignore is None or ignore not in i.kinds)

            waiting = sum(1 for _, _, i in self._ready if counts(i))
            waiting += sum(1 for i in self._waiting.values() if i.early and counts(i))
            return min(self.slots, self.workers) - self._held - waiting

    def forget(self, keys: set) -> None:
        """Drop finished items' keys (a long-lived pool: a job's items, once it is recorded)."""
        with self._cv:
            self._finished -= set(keys)

    def close(self) -> None:
        with self._cv:
            self._closed = True
            self._cv.notify_all()
