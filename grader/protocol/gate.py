"""The GPU gate (`GpuGate`): who may use one GPU while a speed test times, through flock(2) locks on files of
the trusted tree."""

from __future__ import annotations

import contextlib
import fcntl
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from grader.protocol.trusted_files import open_trusted


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
