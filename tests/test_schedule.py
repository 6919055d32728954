"""The grading pool (grader/schedule.py) and the GPU gate (grader/protocol.py GpuGate)."""

from __future__ import annotations

import multiprocessing
import threading
import time

from grader.protocol import GpuGate, GradingTree
from grader.schedule import Scheduler


def test_priorities_prerequisites_and_limits():
    order, lock = [], threading.Lock()

    def item(name, seconds=0.01):
        def run():
            with lock:
                order.append(name)
            time.sleep(seconds)
            return name
        return run

    gate = threading.Event()
    pool = Scheduler(1, {"timing": 1})
    pool.add("block", lambda: gate.wait(5), priority=(-1,))  # holds the only thread while the rest are added
    pool.add("late", item("late"), priority=(5,))
    pool.add("hidden", item("hidden"), priority=(1,), after=["public"])
    pool.add("public", item("public"), priority=(2,))
    pool.add("first", item("first"), priority=(0,))
    gate.set()
    got = [key for key, _ in pool.results()]
    assert order == ["first", "public", "hidden", "late"]  # hidden waits for public, then beats "late"
    assert sorted(got) == sorted(["block", "late", "hidden", "public", "first"])

    running, most = [0], [0]

    def timed():
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.05)
        with lock:
            running[0] -= 1

    pool = Scheduler(4, {"timing": 2})
    for i in range(6):
        pool.add(i, timed, kind="timing")
    assert len(list(pool.results())) == 6 and most[0] == 2


def test_an_idle_thread_starts_an_early_item_and_errors_come_back_as_results():
    pool = Scheduler(2)
    release = threading.Event()
    pool.add("slow", lambda: release.wait(5))
    pool.add("early", lambda: release.set() or "ran early", after=["slow"], early=True)
    pool.add("strict", lambda: 1 / 0, after=["slow"])
    got = dict(pool.results())
    assert got["early"] == "ran early" and got["slow"] is True  # the early item freed the slow one
    assert isinstance(got["strict"], ZeroDivisionError)


def _hold(stem: str, how: str, entered, release) -> None:
    gate = GpuGate.open(stem)
    with (gate.exclusive() if how == "exclusive" else gate.shared()):
        entered.set()
        release.wait(10)


def test_the_gate_keeps_a_timer_alone_and_lets_no_sharer_overtake_a_waiting_timer(tmp_path):
    tree = GradingTree(tmp_path)
    stem = tree.gate(None)
    ctx = multiprocessing.get_context("fork")
    sharer_in, sharer_go = ctx.Event(), ctx.Event()
    sharer = ctx.Process(target=_hold, args=(stem, "shared", sharer_in, sharer_go))
    sharer.start()
    assert sharer_in.wait(10)
    timer_in, timer_go = ctx.Event(), ctx.Event()
    timer = ctx.Process(target=_hold, args=(stem, "exclusive", timer_in, timer_go))
    timer.start()
    time.sleep(0.3)
    assert not timer_in.is_set()  # a sharer is in the room
    late_in, late_go = ctx.Event(), ctx.Event()
    late = ctx.Process(target=_hold, args=(stem, "shared", late_in, late_go))
    late.start()
    time.sleep(0.3)
    assert not late_in.is_set()  # the waiting timer holds the turnstile: no new sharer enters
    sharer_go.set()
    assert timer_in.wait(10)  # the room emptied: the timer is alone
    time.sleep(0.2)
    assert not late_in.is_set()
    timer_go.set()
    assert late_in.wait(10)
    late_go.set()
    for p in (sharer, timer, late):
        p.join(10)
        assert p.exitcode == 0


def test_a_wait_at_the_gate_is_bounded_and_reported(tmp_path):
    stem = GradingTree(tmp_path).gate(0)
    ctx = multiprocessing.get_context("fork")
    held, release = ctx.Event(), ctx.Event()
    hog = ctx.Process(target=_hold, args=(stem, "exclusive", held, release))  # a worker that never lets go
    hog.start()
    assert held.wait(10)
    beats = []
    gate = GpuGate.open(stem, heartbeat=lambda: beats.append(time.monotonic()))
    gate.SHARED_WAIT_S = 2.5
    start = time.monotonic()
    with gate.shared():
        assert gate.held == ""  # went on without the gate
    assert 2.5 <= time.monotonic() - start < 5 and gate.bypassed == 1 and len(beats) >= 2
    gate.QUEUE_WAIT_S = gate.ROOM_WAIT_S = 1.0
    with gate.exclusive() as alone:
        assert alone is False
    release.set()
    hog.join(10)
    with gate.exclusive() as alone:
        assert alone is True and gate.held == "exclusive"
    assert gate.held == ""
