"""The server under load (grader/server/scheduler.py): grading is continuous, with no barrier between submissions,
the verdict comes at the first pass and the speed tier completes it after, a regrade runs in a lane below every
student's, and a recorded job leaves no state behind. A Server in this process, on the CPU with two workers,
grading task 22 cut to one case (one shard a file, so one of the two workers stays free while a file runs)."""

from __future__ import annotations

import dataclasses
import threading
import time
from pathlib import Path

import pytest

from grader.config import ROOT, PerfTest, load_config, load_task
from grader.isolation.schedule import Scheduler
from grader.server.queue import Queue

TASK = "22_lowbit_relu_mask"
FOLDER = ROOT / "tasks" / TASK


def _sleeping(seconds: float, tag: str) -> str:
    """Task 22's solution, each call sleeping `seconds` first: slow, and right."""
    return ((FOLDER / "solution.py").read_text().replace("def relu_mask(", "import time\n\n\ndef _relu_mask(")
            + f"\n\ndef relu_mask(x, dy, mask):\n    time.sleep({seconds})  # {tag}\n"
            "    return _relu_mask(x, dy, mask)\n")


def _task(perf: bool):
    task = load_task(FOLDER)
    task = dataclasses.replace(task, cases=[task.cases[0]], allowed_imports=[*task.allowed_imports, "time"])
    if perf:  # a speed test on the CPU (the course's run theirs on CUDA only): 1 warm-up and 10 timed calls
        task = dataclasses.replace(task, perf=[PerfTest(id="speed", points=1.0, case=task.cases[0].id,
                                                        baseline=str(FOLDER / "solution.py"), threshold=0.01,
                                                        devices=("cpu",), warmup=1, reps=10)])
    else:
        task = dataclasses.replace(task, perf=[])
    return task


@pytest.fixture
def server(tmp_path, monkeypatch):
    pytest.importorskip("fastapi")
    from grader.server.service import Server, ServerConfig
    from grader.server.tokens import TokenBook, make_tokens

    def start(perf: bool):
        monkeypatch.setenv("GRADER_STAFF_TIMING", str(tmp_path / "staff"))  # the staff's timing run made here
        roster = tmp_path / "roster.csv"
        roster.write_text("student\nann\nbob\ncid\n")
        make_tokens(roster, tmp_path / "tokens.csv")
        clock = tmp_path / "clock.txt"
        clock.write_text("2025-12-01T12:00:00+00:00")  # before the lowbit homework's deadline
        cfg = load_config()
        sc = ServerConfig(cfg.homeworks["lowbit"], {TASK: _task(perf)}, cfg, "cpu", tmp_path / "data",
                          TokenBook.from_file(tmp_path / "tokens.csv"), workers=2, rate_per_minute=0,
                          clock_file=str(clock))
        started.append(Server(sc))
        started[-1].start()
        return started[-1]

    started: list = []
    yield start
    for s in started:
        s.stop()


def _wait(server, sid: int, until, timeout: float = 240.0) -> dict:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        row = server.queue.get(sid)
        if until(row):
            return row
        time.sleep(0.05)
    raise AssertionError(f"submission {sid} still {server.queue.get(sid)['state']} after {timeout} s")


def test_a_quick_file_is_not_held_behind_a_slow_one_and_leaves_no_state(server, tmp_path):
    """Before the continuous scheduler, the server graded what it had taken as one batch and took nothing else
    until the batch ended: the quick file waited for the slow one's 12 s."""
    s = server(perf=False)
    slow = s.submit("ann", TASK, f"{TASK}.py", _sleeping(6, "slow").encode())["id"]
    _wait(s, slow, lambda r: r["state"] == "running")
    time.sleep(1.0)  # the slow file's worker is running its first call
    quick = s.submit("bob", TASK, f"{TASK}.py", _sleeping(0, "quick").encode())["id"]
    quick_row = _wait(s, quick, lambda r: r["state"] == "graded")
    slow_row = s.queue.get(slow)
    assert slow_row["state"] == "running", "the slow file was judged before the quick one: no room was made"
    slow_row = _wait(s, slow, lambda r: r["state"] == "graded")
    assert quick_row["verdict_at"] < slow_row["verdict_at"]
    assert quick_row["score"] == slow_row["score"] == quick_row["max_score"], (quick_row["report"], slow_row["report"])
    # Once recorded, a job leaves nothing in the serving run: its memory stays flat over a term's submissions.
    run = s.scheduler.run
    deadline = time.monotonic() + 10
    while run.contexts and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not run.contexts and not run.runs and not run.pending and not run.finished and not run.callbacks
    assert not [k for k in run.pool._finished if k[0] in ("shard", "timing")]


def test_the_verdict_comes_before_the_speed_tier_and_the_full_result_replaces_it(server):
    """Each call sleeps 1 s: the case shard makes two calls (the graded one and its twin), the timing worker eleven
    after the staff's timing run; the first pass is judged seconds before the full result."""
    s = server(perf=True)
    sid = s.submit("cid", TASK, f"{TASK}.py", _sleeping(1.0, "timed").encode())["id"]
    first = _wait(s, sid, lambda r: r["state"] in ("graded", "failed"))
    assert first["state"] == "graded" and first["speed"] == "pending", first
    shown = s.view(first)
    assert shown["speed"] == "pending" and "speed not timed yet" in shown["report"], shown["report"]
    assert shown["result"]["speed"] == "pending"
    case_points = _task(True).cases[0].points
    assert shown["score"] == case_points and shown["max_score"] == case_points + 1.0, shown["report"]
    full = _wait(s, sid, lambda r: r["speed"] == "done")
    assert full["verdict_at"] == first["verdict_at"]  # the verdict's time is the first pass's
    assert full["graded_at"] >= first["graded_at"]
    shown = s.view(full)
    assert "speed" not in shown and "not timed yet" not in shown["report"]
    speed = {t["name"]: t for t in shown["result"]["tests"]}["speed"]
    assert speed["outcome"] in ("passed", "failed") and "not timed yet" not in speed.get("message", "")
    # One attempt in the ledger, from the full result; the first pass's file is gone.
    from grader.course.ledger import Ledger

    ledger = Ledger(s.out / "ledger.sqlite")
    try:
        assert len(ledger.attempts("lowbit", "cid", TASK)) == 1
    finally:
        ledger.close()
    assert not list(s.out.rglob("*.pending.json"))


def test_a_regrade_waits_behind_students_and_never_holds_every_worker(tmp_path):
    """The queue's lanes (regrade rows after every student's) and the pool's (regrade items after every student's,
    and at most workers - 1 of them at once)."""
    import datetime as dt

    q = Queue(tmp_path)
    when = dt.datetime(2026, 12, 1, tzinfo=dt.timezone.utc)
    regrades = [q.store(f"s{i}", TASK, "a.py", f"r{i}".encode(), when, lane=1) for i in range(3)]
    student = q.store("ann", TASK, "a.py", b"mine", when)
    assert q.order() == [student, *regrades]
    assert [r["id"] for r in q.take(5, lanes=(0,))] == [student]
    assert q.attempts("s0", TASK) == set()  # a regrade uses no attempt
    assert [r["id"] for r in q.take(5, lanes=(1,))] == regrades  # one per student: three students

    order, lock, running, most = [], threading.Lock(), [0], [0]

    def item(name: str):
        def run():
            with lock:
                order.append(name)
                running[0] += name.startswith("regrade")
                most[0] = max(most[0], running[0])
            time.sleep(0.05)
            with lock:
                running[0] -= name.startswith("regrade")
        return run

    gate = threading.Event()
    pool = Scheduler(3, {"regrade": 2})
    pool.add("block", lambda: gate.wait(5), priority=(-1,))
    for i in range(4):
        pool.add(f"regrade{i}", item(f"regrade{i}"), priority=(1, 2, i), kind=("case", "regrade"))
    pool.add("student", item("student"), priority=(0, 2, 9))
    # nothing runs yet (the threads start with results()): 3 free slots, less "block" and "student" waiting; and
    # less the four regrade items too when a regrade asks
    assert pool.room("case", ignore="regrade") == 1 and pool.room("case") == -3
    gate.set()
    list(pool.results())
    assert order.index("student") < 2, order  # ahead of every regrade still waiting
    assert most[0] == 2  # regrade items at once: at most workers - 1, so a student's always finds a thread


def test_the_estimated_wait_follows_the_queues_pace(tmp_path):
    """The wait a queued student is shown: the median gap between starts, once per submission ahead and once for
    its own turn, then one file's latency."""
    import datetime as dt

    from grader.server.scheduler import GradingScheduler

    q = Queue(tmp_path)
    t0 = dt.datetime(2026, 12, 1, tzinfo=dt.timezone.utc)
    for i in range(6):
        sid = q.store(f"s{i}", TASK, "a.py", f"x{i}".encode(), t0)
        q.finish(sid, state="graded", started_at=(t0 + dt.timedelta(seconds=4 * i)).isoformat(), started_seq=i + 1,
                 verdict_at=(t0 + dt.timedelta(seconds=4 * i + 10)).isoformat())
    sched = GradingScheduler.__new__(GradingScheduler)
    sched.queue = q
    assert sched.estimate(0) == 4 + 10 and sched.estimate(3) == 4 * 4 + 10
    assert GradingScheduler.estimate(sched, None) == 10.0
    assert Path(tmp_path / "server.sqlite").is_file()
