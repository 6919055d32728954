"""The class rules of `batch`: attempt limit, late policy, best/last, resume, and a batch killed midway. Grading
itself is stubbed here (the end-to-end path is covered by test_hostile.py and selftest; the rules read only the
ledger), but for the killed batch, a real `python -m grader batch` on two puzzles on the CPU."""

import contextlib
import csv
import dataclasses
import datetime as dt
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grader.config import Homework, load_config
from grader.course.batch import late_days, late_factor, run_batch
from grader.pipeline.grading import TaskResult

DEADLINE = dt.datetime(2025, 11, 10, 23, 59, tzinfo=dt.timezone(dt.timedelta(hours=3)))
ROOT = Path(__file__).resolve().parent.parent


class FakeGrader:
    """Scores a file by its first line, '# score: X'. With calls_back, hands each result to on_result as it is
    made, as grade_jobs does; without, only returns them."""

    def __init__(self, calls_back: bool = False):
        self.graded = []
        self.calls_back = calls_back

    def __call__(self, jobs, cfg, device, workers, on_result=None):
        out = []
        for job in jobs:
            self.graded.append(job.submission.read_text().splitlines()[0])
            score = float(job.submission.read_text().splitlines()[0].split(":")[1])
            out.append(TaskResult(task=job.task.id, student=job.student, submission=str(job.submission),
                                  score=score, max_score=job.task.points, tests=[], checks={}, environment={},
                                  submission_sha256="", graded_at="2025-11-01T00:00:00+00:00"))
            if self.calls_back and on_result:
                on_result(out[-1])
        return out


@pytest.fixture
def setup(tmp_path, task10):
    hw = Homework(id="hw", title="HW", tasks={task10.id: 2.0}, deadline=DEADLINE, max_attempts=2,
                  late_penalty_per_day=0.25, late_max_days=2, counts="best")
    root = tmp_path / "subs"
    (root / "ann").mkdir(parents=True)
    return hw, load_config(), root, tmp_path / "results", {task10.id: task10}


def _submit(root, task_id, score, when: dt.datetime, student="ann"):
    path = root / student / f"{task_id}.py"
    path.write_text(f"# score: {score}\n")
    os.utime(path, (when.timestamp(), when.timestamp()))


def _run(setup, grader, manifest=None, out=None, **changes):
    hw, cfg, root, results, tasks = setup
    return run_batch(root, dataclasses.replace(hw, **changes), tasks, cfg, "cpu", out or results, grade=grader,
                     manifest=manifest, show=lambda s: None)


def _ledger_rows(out):
    """The ledger's (student, task) rows, read apart from the batch: only what it committed."""
    db = sqlite3.connect(f"file:{out / 'ledger.sqlite'}?mode=ro", uri=True)
    try:
        return db.execute("SELECT student, task FROM attempts ORDER BY id").fetchall()
    finally:
        db.close()


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
    told = json.loads((out / "ann" / "results.json").read_text())["tests"]  # the student hears of it
    assert any(t["name"] == f"{tid} / not graded" and "limit of 2 graded attempts" in t["output"] for t in told)

    _submit(setup[2], tid, 2.0, DEADLINE + dt.timedelta(minutes=5))  # with room, but one started day late
    rows = _run(setup, grader, max_attempts=5, counts="last")
    assert not (out / "ann" / "refused.json").exists()  # graded now: nothing refused any more
    assert grader.graded[-1] == "# score: 2.0" and len(grader.graded) == 3
    assert rows["ann"][tid] == 1.5 and rows["ann"]["late"] == "yes"  # 75% of 2.0


def test_a_first_result_is_shown_and_written_but_only_the_full_one_is_recorded(setup, task10):
    """grade_jobs hands a job with speed tests over twice: once its cases are judged (`pending` names the speed
    tests not timed yet), then in full. The first is shown and written as the attempt's file; only the full one
    gets a ledger row, and a batch killed between the two grades the file again."""
    out, tid = setup[3], task10.id
    seen = []

    def grade(jobs, cfg, device, workers, on_result=None):
        (job,) = jobs
        first = TaskResult(task=tid, student=job.student, submission=str(job.submission), score=1.0, max_score=2.0,
                           tests=[], checks={}, environment={}, submission_sha256="", graded_at="2025-11-01",
                           pending=["speed_vs_compile"])
        on_result(first)
        seen.append((json.loads(next((out / "ann" / "attempts").glob("*.json")).read_text())["pending"],
                     _ledger_rows(out)))
        if grade.killed:
            raise KeyboardInterrupt
        full = dataclasses.replace(first, score=2.0, pending=[])
        on_result(full)
        return [full]

    grade.killed = True
    _submit(setup[2], tid, 2.0, DEADLINE - dt.timedelta(days=1))
    with pytest.raises(KeyboardInterrupt):
        _run(setup, grade)
    assert seen == [(["speed_vs_compile"], [])]  # written, not recorded
    grade.killed = False
    lines = []
    hw, cfg, root, results, tasks = setup
    rows = run_batch(root, hw, tasks, cfg, "cpu", results, grade=grade, show=lines.append)
    assert len(seen) == 2 and rows["ann"][tid] == 2.0 and _ledger_rows(out) == [("ann", tid)]
    assert any("(cases judged; speed_vs_compile not timed yet)" in line for line in lines), lines
    assert json.loads((out / "ann" / f"{tid}.json").read_text())["pending"] == []


def test_manifest_times_decide_lateness(setup, task10, tmp_path):
    _submit(setup[2], task10.id, 2.0, DEADLINE - dt.timedelta(days=3))
    manifest = tmp_path / "times.csv"
    manifest.write_text(f"student,task,submitted_at\nann,{task10.id},2025-11-12T10:00:00+03:00\n")
    rows = _run(setup, FakeGrader(), manifest=manifest)
    assert rows["ann"][task10.id] == 1.0 and rows["ann"]["late"] == "yes"  # 2 started days late: 50%
    assert "## Pass rate per test" in (setup[3] / "summary.md").read_text()
    gradescope = json.loads((setup[3] / "ann" / "results.json").read_text())
    assert gradescope["tests"][-1]["name"].endswith("/ late") and "2 day(s) late" in gradescope["tests"][-1]["output"]


def test_canvas_csv_is_written_beside_the_gradebook_with_its_totals(setup, task10):
    """results/canvas.csv (grader/course/canvas.py): Canvas's identity columns and its Points Possible row, then a
    row per student with the total the gradebook counts (the late factor applied), the student's id in Student and
    SIS Login ID; a folder named like a formula comes out as text."""
    hw, cfg, root, out, tasks = setup
    tid = task10.id
    day = DEADLINE - dt.timedelta(days=1)
    _submit(root, tid, 1.25, day)
    for student in ("=2+3", "@SUM(1,2)", "eve"):
        (root / student).mkdir()
    _submit(root, tid, 2.0, DEADLINE + dt.timedelta(hours=2), student="=2+3")  # a started day late: 75%
    _submit(root, tid, 0.5, day, student="@SUM(1,2)")
    rows = _run(setup, FakeGrader())  # eve handed in nothing: 0 in the gradebook
    with (out / "canvas.csv").open(newline="") as f:
        lines = list(csv.reader(f))
    assert lines[:2] == [["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "HW"],
                         ["Points Possible", "", "", "", "", "2"]]
    body = {r[3]: r for r in lines[2:]}
    assert body["'=2+3"] == ["'=2+3", "", "", "'=2+3", "", "1.5"]  # data, not a formula
    assert body["'@SUM(1,2)"] == ["'@SUM(1,2)", "", "", "'@SUM(1,2)", "", "0.5"]
    assert body["ann"] == ["ann", "", "", "ann", "", "1.25"] and body["eve"][5] == "0"
    assert {r[3].removeprefix("'"): float(r[5]) for r in lines[2:]} == {s: r["total"] for s, r in rows.items()}
    assert [r[3] for r in lines[2:]] == [r[0] for r in list(csv.reader((out / "gradebook.csv").open()))[1:]]
    assert (out / "canvas.csv").read_bytes().startswith(b"Student,ID,SIS User ID,SIS Login ID,Section,HW\r\n"
                                                        b"Points Possible,,,,,2\r\n")
    _run(setup, FakeGrader(), canvas_assignment_id=4321)  # config.yaml's canvas.assignment_id: Canvas's `Name (ID)`
    assert (out / "canvas.csv").read_text().splitlines()[0].endswith(",Section,HW (4321)")


class ScoredFakeGrader(FakeGrader):
    """FakeGrader whose results carry one test worth the whole score (so that results.json has entries)."""

    def __call__(self, jobs, cfg, device, workers, on_result=None):
        from grader.results import TestResult

        out = super().__call__(jobs, cfg, device, workers)
        for r in out:
            r.tests = [TestResult("case", "passed" if r.score == r.max_score else "failed", r.score, r.max_score,
                                  "what the case said"),
                       TestResult("speed", "not_run", 0.0, 0.0, "not run on cpu")]
            if on_result:
                on_result(r)
        return out


@pytest.mark.parametrize("counts", ["best", "last"])
def test_every_view_counts_the_attempt_the_homework_counts(setup, task10, counts):
    """A right file and then a worse one: the gradebook, results/<student>/<task>.json, results.json (what a course
    takes to Gradescope) and the summary all show the attempt `counts` picks; every attempt keeps its own files;
    and grade-dir refuses to write over a class's records."""
    hw, cfg, root, out, tasks = setup
    tid = task10.id
    day = DEADLINE - dt.timedelta(days=2)
    _submit(root, tid, 2.0, day)
    _run(setup, ScoredFakeGrader(), counts=counts)
    _submit(root, tid, 0.5, day + dt.timedelta(hours=1))
    rows = _run(setup, ScoredFakeGrader(), counts=counts)
    want = 2.0 if counts == "best" else 0.5
    assert rows["ann"][tid] == want
    assert json.loads((out / "ann" / f"{tid}.json").read_text())["score"] == want
    assert json.loads((out / "ann" / f"{tid}.staff.json").read_text())["score"] == want
    assert json.loads((out / "ann" / "results.json").read_text())["score"] == want
    assert f"ann,{want},{want},no" in (out / "gradebook.csv").read_text()
    kept = sorted(json.loads(f.read_text())["score"] for f in (out / "ann" / "attempts").glob(f"{tid}.*.json")
                  if not f.name.endswith(".staff.json"))
    assert kept == [0.5, 2.0]

    summary = (out / "summary.md").read_text()
    assert f"| {tid} | case |" in summary and "| speed |" not in summary  # a test not run here has no pass rate

    refused = subprocess.run([sys.executable, "-m", "grader", "grade-dir", str(root / "ann"), "--out", str(out)],
                             cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2 and "only `batch` writes there" in refused.stderr
    assert json.loads((out / "ann" / f"{tid}.json").read_text())["score"] == want

    said = []  # the console: one line a job by default
    _submit(root, tid, 1.0, day + dt.timedelta(hours=2))
    run_batch(root, dataclasses.replace(hw, counts=counts, max_attempts=5), tasks, cfg, "cpu", out,
              grade=ScoredFakeGrader(), show=said.append)
    assert f"ann/{tid}: 1 / 2  failed: case" in said


def test_lateness_from_file_times_is_said_aloud(setup, task10):
    """No manifest, and the files' times are past the deadline for most of the class (a class unzipped after
    it): batch warns once, and each late result's line says it is late and what it keeps; on-time files are
    quiet. With a manifest, nothing is guessed from file times."""
    hw, cfg, root, results, tasks = setup
    for student in ("bea", "cid", "dan"):
        (root / student).mkdir()
        _submit(root, task10.id, 2.0, DEADLINE + dt.timedelta(days=400), student=student)
    _submit(root, task10.id, 2.0, DEADLINE - dt.timedelta(days=1))
    said = []
    run_batch(root, hw, tasks, cfg, "cpu", results, grade=FakeGrader(calls_back=True), show=said.append)
    warnings = [s for s in said if s.startswith("warning:")]
    assert len(warnings) == 1 and "3 of 4 files are past the deadline by their modification times" in warnings[0]
    assert "--manifest" in warnings[0]
    late_lines = [s for s in said if "late:" in s]
    assert len(late_lines) == 3 and all("0% of the points kept" in s and "score 0 / 2" in s for s in late_lines)

    manifest = results.parent / "times.csv"
    manifest.write_text("student,task,submitted_at\n" + "".join(
        f"{s},{task10.id},2025-11-09T10:00:00+03:00\n" for s in ("ann", "bea", "cid", "dan")))
    said.clear()
    run_batch(root, hw, tasks, cfg, "cpu", results.parent / "r2", grade=FakeGrader(calls_back=True),
              manifest=manifest, show=said.append)
    assert not [s for s in said if s.startswith("warning:") or "late:" in s]


def test_each_job_is_on_disk_and_in_the_ledger_as_soon_as_it_is_judged(setup, task10, tmp_path):
    """A batch that dies after its first job was judged keeps that job (its JSON files, then its ledger row), and
    its rerun grades only the other job and ends with the gradebook of a batch that never died."""
    root, out, tid = setup[2], setup[3], task10.id
    (root / "bob").mkdir()
    on_time = DEADLINE - dt.timedelta(days=1)
    _submit(root, tid, 1.5, on_time)
    _submit(root, tid, 0.5, DEADLINE + dt.timedelta(hours=1), student="bob")  # a day late: 75% of 0.5 kept
    checked = []

    def dies_after_the_first_job(jobs, cfg, device, workers, on_result=None):
        assert [j.student for j in jobs] == ["ann", "bob"]
        FakeGrader(calls_back=True)(jobs[:1], cfg, device, workers, on_result)  # ann judged; grading goes on
        assert json.loads((out / "ann" / f"{tid}.json").read_text())["score"] == 1.5
        assert json.loads((out / "ann" / f"{tid}.staff.json").read_text())["student"] == "ann"
        assert _ledger_rows(out) == [("ann", tid)]
        assert not (out / "bob").exists()
        checked.append(True)
        raise KeyboardInterrupt  # Ctrl-C before bob's job is judged

    with pytest.raises(KeyboardInterrupt):
        _run(setup, dies_after_the_first_job)
    assert checked and not (out / "gradebook.csv").exists()
    assert not list(out.rglob("*.tmp"))  # every file was put in place whole

    rerun = FakeGrader(calls_back=True)
    rows = _run(setup, rerun)
    assert rerun.graded == ["# score: 0.5"]  # ann's job was not graded again
    assert _ledger_rows(out) == [("ann", tid), ("bob", tid)]
    assert rows["ann"][tid] == 1.5 and rows["bob"][tid] == 0.375

    whole = tmp_path / "uninterrupted"
    _run(setup, FakeGrader(calls_back=True), out=whole)
    assert (out / "gradebook.csv").read_text() == (whole / "gradebook.csv").read_text()
    for student in ("ann", "bob"):
        assert (out / student / f"{tid}.json").read_text() == (whole / student / f"{tid}.json").read_text()


PUZZLES = ("puzzle01_constant_add", "puzzle02_constant_add_block")


def _batch(root, out, *extra, log):
    """`python -m grader batch` on the CPU, in a process group of its own (the judges go with it when it is
    killed), its output unbuffered into `log`."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with log.open("w") as f:
        return subprocess.Popen([sys.executable, "-m", "grader", "batch", str(root), "--homework", "puzzles",
                                 "--device", "cpu", "--out", str(out), *extra], cwd=ROOT, env=env,
                                stdout=f, stderr=subprocess.STDOUT, start_new_session=True,
                                preexec_fn=_interruptible)


def _interruptible() -> None:
    """SIGINT as a terminal's Ctrl-C finds it. A shell without job control starts background jobs with SIGINT
    ignored, and Python keeps an ignored SIGINT ignored: `make test &` in a script gave the batch below a Ctrl-C
    it never saw (a fresh clone's run hung here 60 s)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _finish(proc, log, timeout=300):
    assert proc.wait(timeout) == 0, log.read_text()[-3000:]
    return log.read_text()


def test_a_batch_killed_mid_class_resumes_where_it_stopped(tmp_path):
    """SIGKILL a real batch (3 students x 2 puzzles, one job at a time) once its first job is in the ledger, rerun
    it: the rerun grades only the jobs the killed one did not record, and the gradebook is an uninterrupted run's."""
    root = tmp_path / "class"
    for student in ("ann", "bob", "cid"):
        (root / student).mkdir(parents=True)
        for task in PUZZLES:
            (root / student / f"{task}.py").write_bytes((ROOT / "tasks" / task / "solution.py").read_bytes())
    (root / "bob" / f"{PUZZLES[0]}.py").write_bytes(
        (ROOT / "tasks" / PUZZLES[0] / "wrong" / "plus_one.py").read_bytes())  # bob: one puzzle fails
    jobs = 3 * len(PUZZLES)

    whole = tmp_path / "uninterrupted"  # the batch to compare with, run beside the killed one (they share nothing)
    uninterrupted = _batch(root, whole, log=tmp_path / "whole.log")
    try:
        out, log = tmp_path / "killed", tmp_path / "killed.log"
        proc = _batch(root, out, "--workers", "1", log=log)
        deadline, recorded = time.monotonic() + 300, []
        try:
            while proc.poll() is None and time.monotonic() < deadline:
                if any(not p.name.endswith(".staff.json") for p in out.glob("*/*.json")):  # a result on disk:
                    try:
                        recorded = _ledger_rows(out)  # its ledger row follows it
                    except sqlite3.Error:  # the ledger is being created
                        pass
                    if recorded:
                        break
                time.sleep(0.02)
        finally:
            with contextlib.suppress(ProcessLookupError):  # gone already when it finished first
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        assert recorded, f"no job recorded before the batch ended (exit {proc.returncode}): {log.read_text()[-3000:]}"
        judged = log.read_text().count("\n  score: ")  # the summary batch prints once a job is judged
        assert judged < jobs, f"the batch recorded nothing until its last job was judged ({judged} of {jobs})"
        kept = _ledger_rows(out)
        assert 1 <= len(kept) < jobs
        for student, task in kept:  # every ledger row has its files, whole
            assert json.loads((out / student / f"{task}.json").read_text())["task"] == task
            assert json.loads((out / student / f"{task}.staff.json").read_text())["task"] == task

        text = _finish(_batch(root, out, log=tmp_path / "rerun.log"), tmp_path / "rerun.log")
        assert f"graded {jobs - len(kept)} new submission(s)" in text, text[-3000:]
        rows = _ledger_rows(out)
        assert sorted(rows) == sorted((s, t) for s in ("ann", "bob", "cid") for t in PUZZLES)  # one row per job
        assert rows[:len(kept)] == kept
        text = _finish(uninterrupted, tmp_path / "whole.log")
        assert f"graded {jobs} new submission(s)" in text
        assert (out / "gradebook.csv").read_text() == (whole / "gradebook.csv").read_text()
        assert "bob,0.0,1.0" in (whole / "gradebook.csv").read_text()  # the wrong puzzle scored 0 (a real grading)
    finally:
        if uninterrupted.poll() is None:  # a failed assertion above leaves no batch running
            os.killpg(uninterrupted.pid, signal.SIGKILL)
            uninterrupted.wait()


def test_a_results_folder_holds_one_class(setup, task10, tmp_path):
    """Two sections graded into one results folder would share a ledger (the same student names, one attempt
    count): the second is refused, by run_batch and by the command line, and its own folder works."""
    from grader.course.batch import OtherClass

    hw, cfg, root, out, tasks = setup
    _submit(root, task10.id, 2.0, DEADLINE - dt.timedelta(days=1))
    _run(setup, FakeGrader())
    other = tmp_path / "section-b"
    (other / "ann").mkdir(parents=True)
    _submit(other, task10.id, 1.0, DEADLINE - dt.timedelta(days=1))
    with pytest.raises(OtherClass, match="its own results folder with --out"):
        run_batch(other, hw, tasks, cfg, "cpu", out, grade=FakeGrader(), show=lambda s: None)
    refused = subprocess.run([sys.executable, "-m", "grader", "batch", str(other), "--homework", "hw4_int8",
                              "--out", str(out), "--device", "cpu"], cwd=ROOT, capture_output=True, text=True,
                             timeout=120)
    assert refused.returncode == 2 and "holds the records of the class in" in refused.stderr
    rows = run_batch(other, hw, tasks, cfg, "cpu", tmp_path / "results-b", grade=FakeGrader(), show=lambda s: None)
    assert rows["ann"][task10.id] == 1.0


def test_no_file_a_student_may_be_handed_tells_a_hidden_case(tmp_path, task10):
    """A real batch (CPU) of task 10's wrong/absmax_eps.py, which passes every public case and fails only the
    hidden tiny_fp32 and small_fp16: no file a TA may hand the student (everything in results/<student>/ but
    the *.staff.json files) holds a hidden case's name, its sizes or a word of its message; the staff files do,
    and gradescope.staff.json (Gradescope's upload) has every test under its own name."""
    wrong = task10.wrong["absmax_eps.py"]
    hidden = {c.id for c in task10.cases if c.visibility == "hidden"}
    failing = wrong.expected_failures(task10.test_names) - {"imports", "signatures"}
    assert failing and failing <= hidden  # the premise: only hidden cases fail
    root = tmp_path / "subs"
    (root / "ann").mkdir(parents=True)
    (root / "ann" / f"{task10.id}.py").write_bytes((task10.folder / "wrong" / "absmax_eps.py").read_bytes())
    hw = Homework(id="hw", title="HW", tasks={task10.id: task10.points_on("cpu")})
    out = tmp_path / "results"
    run_batch(root, hw, {task10.id: task10}, load_config(), "cpu", out, workers=2, show=lambda s: None)

    staff = json.loads((out / "ann" / f"{task10.id}.staff.json").read_text())
    failed = {t["name"]: t["message"] for t in staff["tests"] if t["outcome"] == "failed"}
    assert set(failed) == failing, failed  # graded as declared: the hidden cases fail, with messages
    # what would tell a hidden case: its id, its sizes (n, as the case and the CPU's shrunk size write them) and
    # the lines of its message (got/expected values)
    secrets = set(hidden) | {ln.strip() for m in failed.values() for ln in m.splitlines() if len(ln.strip()) > 12}
    sizes = {str(c.params_for("cpu").get("n")) for c in task10.cases if c.visibility == "hidden"}

    def strings(value):  # every string of a JSON file but hashes (a hex digest could hold "5003" by chance)
        if isinstance(value, dict):
            return [s for k, v in value.items() if "sha256" not in k for s in [k, *strings(v)]]
        if isinstance(value, list):
            return [s for v in value for s in strings(v)]
        return [str(value)]

    handed = [p for p in (out / "ann").rglob("*") if p.is_file() and not p.name.endswith(".staff.json")]
    assert {p.name for p in handed} >= {"results.json", f"{task10.id}.json"}
    for path in handed:
        text = "\n".join(strings(json.loads(path.read_text())))
        assert not [s for s in secrets if s in text], (path, [s for s in secrets if s in text])
        assert not [n for n in sizes if f"n={n}" in text or f"{n} (CUDA" in text or f": {n}" in text], path
    student_view = json.loads((out / "ann" / "results.json").read_text())
    assert sum(t["score"] for t in student_view["tests"]) == pytest.approx(staff["score"])  # same points
    upload = json.loads((out / "ann" / "gradescope.staff.json").read_text())
    shown = {t["name"].split(" / ")[1]: t for t in upload["tests"]}
    assert {n: shown[n]["visibility"] for n in failing} == {n: "hidden" for n in failing}
    assert all(failed[n].splitlines()[0] in shown[n]["output"] for n in failing)  # the upload keeps messages


def test_every_decision_the_ta_did_not_make_is_said(setup, task10, tmp_path):
    """On 1824752 each of these was decided in silence. A manifest row for `Ann` (the folder is `ann`)
    left ann's file to its modification time, 383 days late, said only on ann's own line; `10_x (1).py` (a browser's
    re-upload) beside `10_x.py`, a file in a subfolder, a zip, an empty folder and stray files were skipped with
    no word, and three students got 0 and no results folder. Now each decision is in the console, in the
    student's intake.json and results.json (with the tasks not submitted and an overall output, as Gradescope's
    run writes it), and in summary.md."""
    hw, cfg, root, out, tasks = setup
    tid = task10.id
    hw = dataclasses.replace(hw, tasks={tid: 2.0, "11_quantize_rowwise_int8": 3.0})
    day = DEADLINE - dt.timedelta(days=1)
    _submit(root, tid, 2.0, DEADLINE + dt.timedelta(days=383))  # ann: the manifest's row says "Ann"
    for student in ("bob", "cat", "dan", "eve", "fay"):
        (root / student).mkdir()
    _submit(root, tid, 0.5, day, student="bob")
    (root / "bob" / f"{tid} (1).py").write_text("# score: 2.0\n")
    (root / "cat" / "hw4").mkdir()
    (root / "cat" / "hw4" / f"{tid}.py").write_text("# score: 1.5\n")
    (root / "dan" / "hw4.zip").write_bytes(b"PK\x03\x04")
    _submit(root, tid, 2.0, day, student="fay")
    (root / "fay" / "notes.txt").write_text("my notes")
    (root / "fay" / "quantise_global.py").write_text("# score: 2.0\n")
    manifest = tmp_path / "times.csv"
    manifest.write_text("student,task,submitted_at\n" + "".join(
        f"{s},{tid},2025-11-09T10:00:00+03:00\n" for s in ("Ann", "bob", "cat", "fay")))
    said = []
    rows = run_batch(root, hw, tasks, cfg, "cpu", out, grade=ScoredFakeGrader(), manifest=manifest,
                     show=said.append)
    console = "\n".join(said)
    assert "times.csv:2: no student folder is named Ann; did you mean ann?" in console
    assert f"ann: {tid}: the manifest has no row for you and this task" in console
    assert f"bob: {tid} (1).py: not graded, no task is named {tid} (1); {tid}.py is the file graded for {tid}" \
        in console
    assert "dan: hw4.zip: not graded, an archive is never unpacked" in console
    assert "eve: your folder holds no file" in console
    assert "fay: not graded, not a task's .py nor a notebook: notes.txt" in console
    assert f"fay: quantise_global.py: not graded, no task is named quantise_global; did you mean {tid}.py?" not in \
        console  # fay's tid.py exists: the hint names the file graded instead
    assert f"fay: quantise_global.py: not graded, no task is named quantise_global; {tid}.py is the file graded" \
        in console
    assert rows["cat"][tid] == 1.5  # a task's file in a subfolder is graded, as Gradescope's run grades it
    assert rows["bob"][tid] == 0.5 and rows["ann"]["late"] == "yes"
    ann = json.loads((out / "ann" / f"{tid}.json").read_text())
    assert ann["time_source"] == "file time, no manifest row" and "by the file's modification time" in ann["late"]
    for student, words in (("ann", "the manifest has no row"), ("bob", "(1).py: not graded"),
                           ("dan", "an archive is never unpacked"), ("eve", "holds no file"), ("fay", "notes.txt")):
        assert any(words in w for w in json.loads((out / student / "intake.json").read_text())), student
        data = json.loads((out / student / "results.json").read_text())
        assert any(t["name"] == "submission / intake" and words in t["output"].replace("\\", "")  # Markdown-escaped
                   for t in data["tests"]), student
        missing = [t for t in data["tests"] if t["name"] == "11_quantize_rowwise_int8 / file"]
        assert len(missing) == 1 and missing[0]["max_score"] == 3.0 and "no file named" in missing[0]["output"]
        assert "`11_quantize_rowwise_int8`: not submitted (0 / 3)" in data["output"]
    assert "`10_quantize_global_int8`: 0 / " in json.loads((out / "ann" / "results.json").read_text())["output"]
    said.clear()  # a rerun grades nothing new and still says all of it (resumed files included)
    run_batch(root, hw, tasks, cfg, "cpu", out, grade=ScoredFakeGrader(), manifest=manifest, show=said.append)
    assert f"ann: {tid}: the manifest has no row for you and this task" in "\n".join(said)
    assert any("the manifest has no row" in w for w in json.loads((out / "ann" / "intake.json").read_text()))
    summary = (out / "summary.md").read_text().split("## Decided by the grader")[1].replace("\\", "")  # Markdown
    for words in ("times.csv:2: no student folder is named Ann", f"bob: {tid} (1).py: not graded", "dan: hw4.zip",
                  "eve: your folder holds no file", f"ann: {tid}: 383 day(s) late"):
        assert words in summary, words


def test_editing_one_task_regrades_only_that_tasks_files(tmp_path):
    """The grader version hashed all of tasks/, so adding a task to a new homework started the hw4 batch
    again at [1/19]. Now each task has its own: the grader's code, its folder, the reference modules its oracle
    imports. In a copy of the project, an edit of task 11's task.yaml changes task 11's version only; a new
    right/ file (it decides nothing) changes none; an edit of a reference module changes the versions of the
    tasks that import it; an edit of the grader's code changes every task's."""
    import shutil

    from grader.config import discover_tasks
    from grader.course.batch import grader_version

    root = tmp_path / "project"
    for folder in ("grader", "reference"):
        shutil.copytree(ROOT / folder, root / folder, ignore=shutil.ignore_patterns("__pycache__"))
    ids = ("10_quantize_global_int8", "11_quantize_rowwise_int8", "puzzle01_constant_add")
    for task_id in ids:
        shutil.copytree(ROOT / "tasks" / task_id, root / "tasks" / task_id)
    tasks, broken = discover_tasks(root)
    assert not broken

    def versions():
        return {t: grader_version(tasks[t], root) for t in ids}

    before = versions()
    assert len(set(before.values())) == 3
    with (root / "tasks" / ids[1] / "task.yaml").open("a") as f:
        f.write("# an edit\n")
    after = versions()
    assert [t for t in ids if after[t] != before[t]] == [ids[1]]
    (root / "tasks" / ids[0] / "right").mkdir(exist_ok=True)
    (root / "tasks" / ids[0] / "right" / "another_way.py").write_text("# decides nothing\n")
    assert versions() == after
    with (root / "reference" / "_puzzles.py").open("a") as f:  # imported by the puzzles' oracles only
        f.write("# an edit\n")
    edited = versions()
    assert [t for t in ids if edited[t] != after[t]] == [ids[2]]
    with (root / "grader" / "cli.py").open("a") as f:
        f.write("# an edit\n")
    assert all(v != edited[t] for t, v in versions().items())


def _descendants(pid: int) -> set[int]:
    """Every process below `pid` by parent (a worker leads a session of its own, but its parent is still ours)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                stat = (entry / "stat").read_text()
                children.setdefault(int(stat.rsplit(")", 1)[1].split()[1]), []).append(int(entry.name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _alive(pid: int) -> bool:
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize("how", ["ctrl-c", "sigterm"])
def test_a_stopped_batch_says_one_line_and_leaves_no_process(tmp_path, how):
    """On 1824752 Ctrl-C printed tracebacks from several processes, and SIGTERM left a judge process and
    multiprocessing's resource_tracker running. Here a batch is stopped while a worker runs (ann's file hangs) and
    after the judge processes started (bob's and cid's files are judged): Ctrl-C as a terminal sends it (SIGINT
    to the whole process group), SIGTERM to the batch alone. It exits with 128 + the signal and one line, no
    traceback, and every process it started (workers, fork server, judges, resource_tracker) is gone. (Before
    this, bob's and cid's results were recorded only once ann's worker ended, at its time limit: the batch
    reached this point after 125 s; now after seconds.)"""
    root = tmp_path / "class"
    task = PUZZLES[0]
    solution = (ROOT / "tasks" / task / "solution.py").read_text()
    spin = "    while B0 > 0:  # spins in the interpreter\n        pass\n"
    hang = solution.replace("    idx = tl.arange(0, B0)\n", spin + "    idx = tl.arange(0, B0)\n", 1)
    assert hang != solution
    for student in ("ann", "bob", "cid"):
        (root / student).mkdir(parents=True)
        (root / student / f"{task}.py").write_text(hang if student == "ann" else solution)
    out, log = tmp_path / "out", tmp_path / "batch.log"
    proc = _batch(root, out, "--workers", "3", log=log)
    deadline, seen = time.monotonic() + 240, set()
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            seen |= _descendants(proc.pid)
            if log.read_text().count(f"/{task}: 1 / 1") >= 2:  # bob and cid judged; ann's worker spins
                break
            time.sleep(0.1)
        seen |= _descendants(proc.pid)
        assert proc.poll() is None, log.read_text()[-3000:]
        if how == "ctrl-c":
            os.killpg(proc.pid, signal.SIGINT)
        else:
            os.kill(proc.pid, signal.SIGTERM)
        code = proc.wait(60)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    text = log.read_text()
    assert code == 128 + (signal.SIGINT if how == "ctrl-c" else signal.SIGTERM), text[-3000:]
    assert "Traceback" not in text, text[-3000:]
    said = [line for line in text.splitlines() if "every worker is stopped" in line]
    assert len(said) == 1 and said[0].startswith("interrupted (Ctrl-C)" if how == "ctrl-c" else "stopped (SIGTERM)")
    assert len(seen) >= 4, seen  # fork server, a worker, judge processes, resource_tracker
    time.sleep(2)
    left = [pid for pid in seen if _alive(pid)]
    assert not left, [(pid, (Path("/proc") / str(pid) / "cmdline").read_bytes()[:200]) for pid in left]


def test_a_bad_manifest_is_one_line_naming_the_file_and_line(tmp_path):
    """On 1824752 a short row gave a TypeError traceback, and a header `Student,Task,Submitted At` gave
    "...:2: submitted_at must be an ISO 8601 time with an offset, got None"."""
    from grader.course.batch import ManifestError, read_manifest

    cases = {"student,task,submitted_at\nann,10_quantize_global_int8\n": "times.csv:2: a row needs student, task",
             "Student,Task,Submitted At\nann,10,2025-11-09T18:00:00+03:00\n": "times.csv: no column student, "
                                                                               "submitted_at, task",
             "student,task,submitted_at\nann,10,yesterday\n": "times.csv:2: submitted_at must be an ISO 8601 time",
             "student,task,submitted_at\nann,10,2025-11-09T18:00:00\n": "times.csv:2: submitted_at needs a UTC offset"}
    for text, words in cases.items():
        path = tmp_path / "times.csv"
        path.write_text(text)
        with pytest.raises(ManifestError) as raised:
            read_manifest(path)
        assert words in str(raised.value).replace(str(tmp_path) + "/", ""), str(raised.value)
    path.write_text("student,task,submitted_at\nann,10,2025-11-09T18:00:00+03:00\nann,10,2025-11-10T18:00:00+03:00\n")
    times = read_manifest(path)
    assert times[("ann", "10")].day == 10 and times.notes == [
        "times.csv:3: a second row for ann and 10 (the first is line 2): line 3 is used"]
