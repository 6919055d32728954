"""The class rules of `batch`: attempt limit, late policy, best/last, resume. Grading itself is stubbed here
(the end-to-end path is covered by test_hostile.py and selftest); the rules read only the ledger."""

import dataclasses
import datetime as dt
import os

import pytest

from grader.batch import late_days, late_factor, run_batch
from grader.config import Homework, load_config
from grader.grading import TaskResult

DEADLINE = dt.datetime(2025, 11, 10, 23, 59, tzinfo=dt.timezone(dt.timedelta(hours=3)))


class FakeGrader:
    """Scores a file by its first line, '# score: X'."""

    def __init__(self):
        self.graded = []

    def __call__(self, jobs, cfg, device, workers, on_result=None):
        out = []
        for job in jobs:
            self.graded.append(job.submission.read_text().splitlines()[0])
            score = float(job.submission.read_text().splitlines()[0].split(":")[1])
            out.append(TaskResult(task=job.task.id, student=job.student, submission=str(job.submission),
                                  score=score, max_score=job.task.points, tests=[], checks={}, environment={},
                                  submission_sha256="", graded_at="2025-11-01T00:00:00+00:00"))
        return out


@pytest.fixture
def setup(tmp_path, task10):
    hw = Homework(id="hw", title="HW", tasks={task10.id: 2.0}, deadline=DEADLINE, max_attempts=2,
                  late_penalty_per_day=0.25, late_max_days=2, counts="best")
    root = tmp_path / "subs"
    (root / "ann").mkdir(parents=True)
    return hw, load_config(), root, tmp_path / "results", {task10.id: task10}


def _submit(root, task_id, score, when: dt.datetime):
    path = root / "ann" / f"{task_id}.py"
    path.write_text(f"# score: {score}\n")
    os.utime(path, (when.timestamp(), when.timestamp()))


def _run(setup, grader, manifest=None, **changes):
    hw, cfg, root, out, tasks = setup
    return run_batch(root, dataclasses.replace(hw, **changes), tasks, cfg, "cpu", out, grade=grader,
                     manifest=manifest, show=lambda s: None)


def test_late_policy():
    assert late_days(DEADLINE, DEADLINE) == 0
    assert late_days(DEADLINE + dt.timedelta(minutes=1), DEADLINE) == 1
    assert late_days(DEADLINE + dt.timedelta(days=1, seconds=1), DEADLINE) == 2
    hw = Homework("h", "h", {}, DEADLINE, late_penalty_per_day=0.25, late_max_days=2)
    assert [late_factor(d, hw) for d in (0, 1, 2, 3)] == [1.0, 0.75, 0.5, 0.0]


def test_resume_limit_best_last_and_late(setup, task10):
    out, tid = setup[3], task10.id
    grader = FakeGrader()
    on_time = DEADLINE - dt.timedelta(days=1)
    _submit(setup[2], tid, 1.5, on_time)
    rows = _run(setup, grader)
    assert rows["ann"][tid] == 1.5 and rows["ann"]["late"] == "no"
    assert (out / "gradebook.csv").read_text().splitlines() == [f"student,{tid},total,late", "ann,1.5,1.5,no"]

    _run(setup, grader)  # resume: same file, same grader version: not graded again
    assert len(grader.graded) == 1

    _submit(setup[2], tid, 1.0, on_time)  # a worse second attempt
    assert _run(setup, grader)["ann"][tid] == 1.5  # best counts
    assert _run(setup, grader, counts="last")["ann"][tid] == 1.0
    assert len(grader.graded) == 2

    _submit(setup[2], tid, 2.0, on_time)  # a third file: past max_attempts=2, refused
    assert _run(setup, grader)["ann"][tid] == 1.5
    assert len(grader.graded) == 2

    _submit(setup[2], tid, 2.0, DEADLINE + dt.timedelta(minutes=5))  # with room, but one started day late
    rows = _run(setup, grader, max_attempts=5, counts="last")
    assert grader.graded[-1] == "# score: 2.0" and len(grader.graded) == 3
    assert rows["ann"][tid] == 1.5 and rows["ann"]["late"] == "yes"  # 75% of 2.0


def test_manifest_times_decide_lateness(setup, task10, tmp_path):
    _submit(setup[2], task10.id, 2.0, DEADLINE - dt.timedelta(days=3))
    manifest = tmp_path / "times.csv"
    manifest.write_text(f"student,task,submitted_at\nann,{task10.id},2025-11-12T10:00:00+03:00\n")
    rows = _run(setup, FakeGrader(), manifest=manifest)
    assert rows["ann"][task10.id] == 1.0 and rows["ann"]["late"] == "yes"  # 2 started days late: 50%
    assert "## Pass rate per test" in (setup[3] / "summary.md").read_text()
    import json

    gradescope = json.loads((setup[3] / "ann" / "results.json").read_text())
    assert gradescope["tests"][-1]["name"].endswith("/ late") and "2 day(s) late" in gradescope["tests"][-1]["output"]
