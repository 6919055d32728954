"""The grading pool (grader/isolation/schedule.py) and the GPU gate (grader/protocol GpuGate)."""

from __future__ import annotations

import multiprocessing
import os
import threading
import time

import pytest

from grader.isolation.schedule import Scheduler
from grader.protocol import GpuGate, GradingTree


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


def test_an_idle_share_is_let_go_and_the_next_launch_takes_it_again(tmp_path):
    """A case call that spins in Python (no launch, no GPU work left) keeps a timer waiting about `IDLE_S`, not
    until the stall limit; a launch inside the same call takes the share back. Two opens of the gate's files in
    one process lock against each other like two workers (flock(2) locks belong to the open file)."""
    stem = GradingTree(tmp_path).gate(0)
    sharer, timer = GpuGate.open(stem), GpuGate.open(stem)
    sharer.IDLE_S = 0.4
    syncs = []
    sharer.release_when_idle(lambda: syncs.append(time.monotonic()))
    timer.ROOM_WAIT_S = 5.0
    with sharer.shared():
        sharer.touch()  # a launch
        assert sharer.held == "shared"
        start = time.monotonic()
        with timer.exclusive() as alone:  # the sharer's call now spins without launching
            waited = time.monotonic() - start
            assert alone is True and sharer.held == "" and sharer.idle_releases == 1 and syncs
            assert 0.3 <= waited < 2.0
        sharer.touch()  # the next launch of the same call
        assert sharer.held == "shared"
        stop = threading.Event()

        def launches():  # the call now launches every 0.1 s: its share is kept, and the timer's wait runs out
            while not stop.wait(0.1):
                sharer.touch()

        thread = threading.Thread(target=launches)
        thread.start()
        timer.ROOM_WAIT_S = 1.0
        with timer.exclusive() as alone:
            assert alone is False and sharer.held == "shared" and sharer.idle_releases == 1
        stop.set()
        thread.join(5)
    assert sharer.held == ""


def test_an_idle_share_is_kept_while_its_gpu_work_runs(tmp_path):
    """The release waits for the work queued so far (`sync`), and a launch that comes meanwhile keeps the hold."""
    stem = GradingTree(tmp_path).gate(0)
    gate = GpuGate.open(stem)
    gate.IDLE_S = 0.2

    def slow_sync():  # a kernel that runs for a while, and the call launches another before it ends
        time.sleep(0.3)
        if not syncs:
            gate._last_use = time.monotonic()
            gate._uses += 1
        syncs.append(1)

    syncs: list[int] = []
    gate.release_when_idle(slow_sync)
    with gate.shared():
        time.sleep(0.45)
        assert gate.held == "shared" and gate.idle_releases == 0  # the first idle look found a launch after it
        deadline = time.monotonic() + 3
        while gate.held and time.monotonic() < deadline:
            time.sleep(0.05)
        assert gate.held == "" and gate.idle_releases == 1 and len(syncs) >= 2


def test_a_speed_test_whose_case_never_ran_is_not_timed(tmp_path):
    """A timing worker starts only for speed tests whose case may pass: once the shard holding a speed test's case
    is done without a record of it (the worker hung or crashed there), that test is left out, and with none left
    no worker starts (grader/judge/speed.py fails it as "not timed: case ... fails" either way)."""
    from pathlib import Path

    from grader.isolation.runner import JobSpec, WorkerRun, forget_timing, stop_timing
    from grader.pipeline.grading import _timed_run
    from grader.protocol import JobFolders, Kind, PerfItem, RecordWriter

    records = tmp_path / "records.bin"
    fd = os.open(records, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    RecordWriter(fd).json(Kind.CASE, {"id": "ran"}, key=3)  # case 3 ran; case 5 never did (the worker hung at it)
    os.close(fd)
    hung = [WorkerRun(records=records, returncode=-9, timed_out=True, seconds=30.0, log="", cases=[3, 5])]
    items = [PerfItem(index=0, test="speed_small", case=3, baseline="b.py", warmup=1, reps=1),
             PerfItem(index=1, test="speed_large", case=5, baseline="b.py", warmup=1, reps=1)]
    spec = JobSpec(Path("s.py"), "f", [], "cuda", {}, 10.0, perf=items)
    started = []

    def runner(folders, shard, spec, cases):
        started.append([item.test for item in spec.perf])
        return ["a timing run"]

    staff = {"t": (None, None)}
    shards = {0: (7, 0), 1: (7, 0)}
    folders = JobFolders(tmp_path / "trusted", tmp_path / "scratch")
    assert _timed_run(staff, "t", runner, folders, 1, spec, {}, shards) == ["a timing run"]  # shard not done yet
    assert _timed_run(staff, "t", runner, folders, 1, spec, {(7, 0): hung}, shards) == ["a timing run"]
    assert started == [["speed_small", "speed_large"], ["speed_small"]]
    items[0].case = 5
    assert _timed_run(staff, "t", runner, folders, 1, spec, {(7, 0): hung}, shards) == []
    assert len(started) == 2
    # every speed test's case judged failing before the timing worker started (stop_timing): none starts
    items[0].case = 3
    stop_timing(folders)
    assert _timed_run(staff, "t", runner, folders, 1, spec, {}, shards) == [] and len(started) == 2
    forget_timing(folders)
    assert _timed_run(staff, "t", runner, folders, 1, spec, {}, shards) == ["a timing run"] and len(started) == 3


def test_the_time_left_is_counted_from_the_first_result(monkeypatch):
    """A class's first result comes after one file's latency, the rest at the pool's pace: 200 files, the first at
    60 s, then one a second, say about 197 s left at the third, not the 3940 s a pace counted from the start
    gives; nothing is estimated before the third."""
    import io

    from grader.pipeline import grading

    clock = [0.0]
    monkeypatch.setattr(grading.time, "monotonic", lambda: clock[0])
    log = io.StringIO()
    progress = grading.Progress(200, log)
    for units, at in ((1, 60.0), (1, 61.0), (1, 62.0), (7, 62.0)):  # the last: seven at once
        clock[0] = at
        progress.step("student/task", units)
    said = [line.split("elapsed, ", 1)[1] for line in log.getvalue().splitlines()]
    assert said[:2] == ["estimating the time left"] * 2
    assert said[2] == "about 197 s left"
    assert said[3] == "about 42 s left"  # 2 s for 9 results since the first: 0.22 s a result, 190 to go


def test_results_that_ran_no_worker_do_not_set_the_pace(monkeypatch):
    """Files refused by their gates, and copies of a file graded once, come at once: four of them, then results a
    minute apart, do not say "about 5 s left"."""
    import io

    from grader.pipeline import grading

    clock = [0.0]
    monkeypatch.setattr(grading.time, "monotonic", lambda: clock[0])
    log = io.StringIO()
    progress = grading.Progress(10, log)
    for at, worked in ((1.0, False), (1.5, False), (2.0, False), (2.5, False), (60.0, True), (120.0, True),
                       (180.0, True)):
        clock[0] = at
        progress.step("student/task", worked=worked)
    said = [line.split("elapsed, ", 1)[1] for line in log.getvalue().splitlines()]
    assert said[:6] == ["estimating the time left"] * 6
    assert said[6] == "about 180 s left"  # 60 s a worker's result since the first, 3 to go


def test_progress_is_a_bar_at_a_terminal_and_lines_elsewhere():
    """grading.Progress: tqdm's bar with the time left where stderr is a terminal, a line per job elsewhere."""
    import io

    from grader.pipeline.grading import Progress

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    log, tty = io.StringIO(), Terminal()
    lines, bar = Progress(3, log), Progress(3, tty)
    for who in ("alice/10", "bob/10", "carol/10"):
        lines.step(who)
        bar.step(who)
    assert log.getvalue().splitlines()[0].startswith("[1/3] alice/10") and "estimating" in log.getvalue()
    pytest.importorskip("tqdm")
    assert bar.bar is not None and "3/3" in tty.getvalue() and "carol/10" in tty.getvalue()
    assert "[1/3]" not in tty.getvalue()
