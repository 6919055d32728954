"""The submission server: students submit to the course's GPU box and read GPU verdicts in seconds.

    python -m grader serve --homework HW --tokens TOKENS.csv --data DIR [--host H] [--port P] [--device D]

Everything it keeps is under DIR:

* `server.sqlite`: the queue (grader/server/queue.py), one row per submission, with its state (queued, running,
  graded, failed, repeat) and the server's clock at the moment the file was stored (`submitted_at`);
* `uploads/`: each submitted file, written whole and flushed to disk before its row is committed, so a
  submission the server answered for is never lost;
* `results/`: what `batch` writes for a class, from the same code (grader/course/batch.py): the ledger of graded
  attempts (`ledger.sqlite`), each student's files, `gradebook.csv`, `canvas.csv` (Canvas's gradebook import),
  `summary.md`, `results.json` and the Gradescope upload, the leaderboard.

Rules are batch's: a task's `max_attempts` counts distinct files (a file submitted again is no new attempt and is
not graded again), lateness is by the homework's late policy, now by the server's clock; a submission that would
earn nothing for lateness, or past the attempts, is refused with the reason. The queue is served round-robin by
student (the student served longest ago first), so 50 attempts of one student do not starve the class; each
student has a rate limit and each file a size limit (the intake's). Grading is continuous
(grader/server/scheduler.py): a submission starts as soon as the machine has room, its verdict is recorded when its
cases are judged, and its speed tests complete it after. A kill -9 loses nothing: on start, a submission left
`running` (or with its speed tests still pending) is graded again unless the ledger already holds its attempt, so
each is recorded once.

Student text is data: the web page (grader/server/pages.py) puts every value into the page as text, never
as markup, and every answer is JSON.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
import sqlite3
import threading
from pathlib import Path

from grader.config import CourseConfig, Homework, TaskSpec
from grader.course import batch, canvas, leaderboard
from grader.course.ledger import Ledger
from grader.gates.intake import MAX_NOTEBOOK_BYTES, MAX_SOURCE_BYTES
from grader.gates.notebook import Notebook, is_notebook
from grader.pipeline.grading import Job
from grader.pipeline.result import refused_result
from grader.results import TaskResult, report
from grader.results.atomic import write_atomic
from grader.server.queue import Queue, Refused, now
from grader.server.scheduler import GradingScheduler
from grader.server.tokens import TokenBook


@dataclasses.dataclass
class ServerConfig:
    homework: Homework
    tasks: dict[str, TaskSpec]
    cfg: CourseConfig
    device: str
    data: Path
    tokens: TokenBook
    workers: int = 0
    rate_per_minute: int = 10
    """A student's submissions in any minute, at most (429 past it)."""
    clock_file: str | None = None
    backend: str = "local"
    """Where workers run: "local" processes, or "ray" tasks on a cluster of GPU boxes (`address`)."""
    address: str | None = None


class Server:
    """The queue, the grading scheduler and the course's views; the web app (grader/server/app.py) calls it."""

    def __init__(self, sc: ServerConfig) -> None:
        self.sc = sc
        self.hw = sc.homework
        self.out = sc.data / "results"
        self.out.mkdir(parents=True, exist_ok=True)
        self.queue = Queue(sc.data)
        self.versions = {t: batch.grader_version(sc.tasks[t]) for t in self.hw.tasks if t in sc.tasks}
        self._touched: set[str] = set()
        self._views_lock = threading.Lock()
        self.recover()
        self.scheduler = GradingScheduler(self.queue, sc.cfg, sc.device,
                                          [sc.tasks[t] for t in self.hw.tasks if t in sc.tasks], self._prepare,
                                          self._record, self._fail, self._publish_all, workers=sc.workers,
                                          backend=sc.backend, address=sc.address)

    @property
    def paused(self) -> bool:
        return self.scheduler.paused

    @paused.setter
    def paused(self, value: bool) -> None:
        self.scheduler.paused = value
        with self.queue.wake:
            self.queue.wake.notify_all()

    def warnings(self, roster: list[str] | None = None) -> list[str]:
        """What the TA should know before students arrive: what would refuse every upload (for the students of
        `roster` without a token: theirs), and where it grades."""
        found = []
        missing = sorted(set(roster or ()) - set(self.sc.tokens.students))
        if missing:
            shown = ", ".join(ascii(n)[1:-1] for n in missing[:10]) + (f" and {len(missing) - 10} more"
                                                                       if len(missing) > 10 else "")
            found.append(f"{len(missing)} student(s) of the roster have no token, and cannot sign in: {shown} "
                         "(run `tokens` again: everyone else keeps theirs)")
        when = now(self.sc.clock_file)
        days = batch.late_days(when, self.hw.deadline)
        if days and batch.late_factor(days, self.hw) == 0.0:
            found.append(f"{self.hw.id} closed: its deadline was {self.hw.deadline.isoformat()} and its late policy "
                         f"gives no points after {self.hw.late_max_days} day(s), so every upload will be refused "
                         "(config.yaml: homeworks.<id>.deadline, late_max_days)")
        if not self.sc.tokens.students:
            found.append("tokens.csv holds no student's token: only staff can sign in (python -m grader tokens "
                         "ROSTER --out tokens.csv)")
        if self.sc.device == "cpu":
            found.append("grading on the CPU (Triton's interpreter, the cases' CPU sizes, no speed tests): no GPU is "
                         "visible here")
        return found

    # ------------------------------------------------------------------------------------------- submitting
    def submit(self, student: str, task_id: str, filename: str, data: bytes) -> dict:
        """Store a submission or refuse it (Refused, with the HTTP status and the reason)."""
        if task_id not in self.hw.tasks or task_id not in self.sc.tasks:
            raise Refused(404, f"{self.hw.id} has no task {task_id!r}; its tasks: {', '.join(self.hw.tasks)}")
        name = Path(filename or f"{task_id}.py").name
        if not (name.endswith(".py") or is_notebook(Path(name))):
            raise Refused(415, f"{ascii(name)}: hand in the task's .py or a notebook (.ipynb)")
        limit = MAX_NOTEBOOK_BYTES if is_notebook(Path(name)) else MAX_SOURCE_BYTES
        if len(data) > limit:
            raise Refused(413, f"the file is {len(data)} bytes, over the grader's limit of {limit} bytes")
        when = now(self.sc.clock_file)
        with self.queue.lock:
            minute_ago = (when - dt.timedelta(minutes=1)).isoformat()
            if self.sc.rate_per_minute and self.queue.since(student, minute_ago) >= self.sc.rate_per_minute:
                raise Refused(429, f"more than {self.sc.rate_per_minute} submissions in a minute: wait a minute")
            days = batch.late_days(when, self.hw.deadline)
            if days and batch.late_factor(days, self.hw) == 0.0:
                raise Refused(403, f"past the late limit: {days} day(s) after the deadline "
                                   f"({self.hw.deadline.isoformat()}), and the late policy gives no points after "
                                   f"{self.hw.late_max_days} day(s); nothing was stored")
            sha = hashlib.sha256(data).hexdigest()
            used = self.queue.attempts(student, task_id) | self._ledger_attempts(student, task_id)
            earlier = next((r for r in reversed(self.queue.of_student(student)) if r["task"] == task_id
                            and r["sha256"] == sha and r["state"] in ("queued", "running", "graded")
                            and not r["lane"]), None)
            if earlier is None and self.hw.max_attempts and len(used) >= self.hw.max_attempts:
                raise Refused(403, f"the limit of {self.hw.max_attempts} graded attempts for {task_id} is reached "
                                   f"({len(used)} used): your points are those of the attempt already counted")
            sid = self.queue.store(student, task_id, name, data, when,
                                   same_as=earlier["id"] if earlier is not None else None)
        used_now = len(used | {sha})
        answer = {"id": sid, "state": "repeat" if earlier is not None else "queued", "task": task_id,
                  "submitted_at": when.isoformat(), "attempts_used": used_now,
                  "max_attempts": self.hw.max_attempts or None,
                  **({"same_as": earlier["id"]} if earlier is not None else {})}
        if earlier is None:
            position = self.queue.position(sid)
            answer |= {"position": position, "wait_s": self.scheduler.estimate(position)}
        return answer

    def regrade(self, task_id: str | None = None) -> dict:
        """Staff: grade each student's latest graded file of `task_id` (every task: None) again, in the lane below
        every student's submission, with the grader as it is now (its attempt is the same file: none is used)."""
        rows, seen = [], set()
        for row in self.queue.recent(1 << 30):
            key = (row["student"], row["task"])
            if row["state"] != "graded" or row["lane"] or key in seen or (task_id and row["task"] != task_id):
                continue
            seen.add(key)
            data = (self.queue.uploads / row["upload"]).read_bytes()
            rows.append(self.queue.store(row["student"], row["task"], row["filename"], data,
                                         dt.datetime.fromisoformat(row["submitted_at"]), lane=1))
        return {"queued": len(rows), "ids": rows}

    def _ledger_attempts(self, student: str, task_id: str) -> set[str]:
        path = self.out / "ledger.sqlite"
        if not path.is_file():
            return set()
        db = sqlite3.connect(path)
        try:
            rows = db.execute("SELECT DISTINCT sha256 FROM attempts WHERE homework = ? AND student = ? AND task = ?",
                              (self.hw.id, student, task_id)).fetchall()
        finally:
            db.close()
        return {r[0] for r in rows}

    # ------------------------------------------------------------------------------------------- views
    def view(self, row: dict, own: bool = True) -> dict:
        """A submission as its student sees it: state, place in the queue and the estimated wait, and once it has
        its verdict the student JSON (hidden tests by points only) and the report `grade` prints of it, with
        `speed: "pending"` until its speed tests are timed."""
        if row["state"] == "repeat" and row["same_as"]:
            first = self.queue.get(row["same_as"]) or {}
            shown = {**self.view(first), "id": row["id"], "filename": row["filename"],
                     "submitted_at": row["submitted_at"], "same_as": row["same_as"], "repeat": True}
            return shown
        out = {k: row[k] for k in ("id", "task", "filename", "submitted_at", "state", "graded_at", "score",
                                   "max_score", "late_days")}
        if row["state"] == "queued":
            out["position"] = self.queue.position(row["id"])
            out["wait_s"] = self.scheduler.estimate(out["position"])
        elif row["state"] == "running":
            out["wait_s"] = self.scheduler.estimate(None, row["started_at"])
        if row["speed"] == "pending":
            out["speed"] = "pending"
        if row["error"]:
            out["error"] = row["error"]
        if row["state"] == "graded" and own:
            out["report"] = row["report"] or ""
            path = Path(row["result"] or "")
            if path.is_file() and path.parent.parent == self.out / row["student"]:
                out["result"] = json.loads(path.read_text())
        return out

    def results(self, student: str) -> dict:
        """A student's submissions (oldest first) and, per task, what the page's summary shows: the best score,
        the attempts used of the maximum, the last verdict and its late days."""
        submissions = [self.view(r) for r in self.queue.of_student(student) if not r["lane"]]
        tasks = {}
        for task_id, points in self.hw.tasks.items():
            mine = [s for s in submissions if s["task"] == task_id]
            graded = [s for s in mine if s["state"] == "graded" and s.get("score") is not None]
            last = mine[-1] if mine else None
            tasks[task_id] = {
                "points": points, "best": max((s["score"] for s in graded), default=None),
                "used": len(self.queue.attempts(student, task_id) | self._ledger_attempts(student, task_id)),
                "max_attempts": self.hw.max_attempts or None,
                "last": {k: last.get(k) for k in ("id", "state", "score", "max_score", "late_days", "submitted_at")}
                if last else None}
        return {"student": student, "homework": self.hw.id, "title": self.hw.title,
                "deadline": self.hw.deadline.isoformat() if self.hw.deadline else None,
                "now": now(self.sc.clock_file).isoformat(), "tasks": tasks, "submissions": submissions}

    def history(self, student: str) -> dict:
        """Staff: every submission of `student` (regrades included), newest first, as staff see them."""
        return {"student": student, "submissions": [
            {**self.view(r, own=False), "lane": r["lane"]} for r in reversed(self.queue.of_student(student))]}

    def staff_queue(self) -> dict:
        recent = []
        for r in self.queue.recent(100):
            recent.append({k: r[k] for k in ("id", "student", "task", "filename", "state", "submitted_at",
                                             "started_at", "graded_at", "score", "max_score", "late_days", "error",
                                             "lane", "speed", "verdict_at")})
        return {"homework": self.hw.id, "paused": self.paused, "counts": self.queue.counts(),
                "order": self.queue.order(), "recent": recent, "room": self.scheduler.run.room(0)}

    def board(self) -> dict:
        students = self.sc.tokens.students
        entries = leaderboard.collect(self.out, self.hw, students)
        if not entries:
            return {"entries": [], "why_empty": leaderboard.why_empty(self.out, self.hw, students, self.sc.tasks)}
        secret = leaderboard.secret_of(self.out)
        named = self.hw.leaderboard_names == "student"
        rows = []
        for e in sorted(entries, key=lambda e: (e.task, e.test, -e.speedup)):
            rows.append({"task": e.task, "test": e.test,
                         "name": e.student if named else leaderboard.pseudonym(secret, e.student),
                         "speedup": e.speedup, "vs_reference": e.vs_reference, "ms": e.ms})
        return {"entries": rows}

    # ------------------------------------------------------------------------------------------- grading
    def recover(self) -> None:
        """After a crash or kill -9: a submission left running (or with its speed tests pending) is recorded from
        the ledger if its attempt is there (its result was written before the row), else queued again."""
        ledger = Ledger(self.out / "ledger.sqlite")
        try:
            for row in self.queue.requeue_running():
                version = self.versions.get(row["task"])
                done = [a for a in ledger.attempts(self.hw.id, row["student"], row["task"])
                        if a.sha256 == row["sha256"] and a.grader_version == version]
                if done and not row["lane"]:
                    a = done[-1]
                    self.queue.finish(row["id"], state="graded", graded_at=a.graded_at, score=a.score,
                                      max_score=a.max_score, late_days=a.late_days, result=a.result_path,
                                      report=self._report_of(Path(a.result_path)), speed="done")
        finally:
            ledger.close()

    @staticmethod
    def _report_of(path: Path) -> str:
        side = path.with_suffix(".report.txt")
        return side.read_text() if side.is_file() else ""

    def start(self) -> None:
        self.scheduler.start()

    def stop(self) -> None:
        self.scheduler.stop()

    def _planned(self, row: dict, read: bool = True) -> batch.Planned:
        """The row as batch plans a file; `read=False`: without its bytes (recording needs only the sha256)."""
        task = self.sc.tasks[row["task"]]
        path = self.queue.uploads / row["upload"]
        when = dt.datetime.fromisoformat(row["submitted_at"])
        return batch.Planned(row["student"], task, path, row["sha256"], when, path.read_bytes() if read else b"",
                             time_source="server clock")

    def _prepare(self, row: dict) -> Job | TaskResult:
        """A running submission as the pipeline's job, or the result of one refused before anything runs."""
        p = self._planned(row)
        if not is_notebook(Path(row["filename"])):
            return Job(p.task, p.path, row["student"], p.source)
        part = Notebook(p.source, row["filename"]).extract(p.task)
        if not part.defines:
            return refused_result(p.task, row["student"], row["filename"], self.sc.device, part.why_not())
        return Job(p.task, p.path, row["student"], part.source, part)

    def _record(self, row: dict, r: TaskResult) -> None:
        """A first pass (`r.pending`): the verdict shown at once, speed "pending"; the full result: the attempt in
        the ledger and its files, as `batch` records one."""
        p = self._planned(row, read=False)  # (a notebook is not extracted again: the ledger keeps its sha256)
        r.submitted_as = row["filename"]  # the student's own name for it, not the upload's path
        report.save_pictures(r, self.out / p.student)
        verdict_at = (self.queue.get(row["id"]) or {}).get("verdict_at") or dt.datetime.now(dt.timezone.utc)\
            .isoformat()
        if r.pending:
            days = batch.late_days(p.submitted_at, self.hw.deadline)
            factor = batch.late_factor(days, self.hw)
            data = r.student_json() | {"homework": self.hw.id, "submitted_at": p.submitted_at.isoformat(),
                                       "late_days": days, "raw_score": r.score,
                                       "score": round(r.score * factor, 6), "speed": "pending"}
            path = self.out / p.student / batch.ATTEMPTS / f"{p.task.id}.{p.sha256[:12]}.pending.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(path, json.dumps(data, indent=2) + "\n")
            self.queue.finish(row["id"], state="graded", graded_at=r.graded_at, score=data["score"],
                              max_score=r.max_score, late_days=days, result=str(path), speed="pending",
                              report=report.summary(r.student_view()), verdict_at=verdict_at)
            return
        ledger = Ledger(self.out / "ledger.sqlite")
        try:
            late = batch.record_result(ledger, self.out, self.hw, self.versions[p.task.id], p, r)
            attempt = ledger.attempts(self.hw.id, p.student, p.task.id)[-1]
        finally:
            ledger.close()
        text = report.summary(r.student_view()) + (f"\n{late}" if late else "")
        write_atomic(Path(attempt.result_path).with_suffix(".report.txt"), text)
        self._touched.add(p.student)
        self.queue.finish(row["id"], state="graded", graded_at=r.graded_at, score=attempt.score,
                          max_score=attempt.max_score, late_days=attempt.late_days, result=attempt.result_path,
                          report=text, speed="done", verdict_at=verdict_at)
        Path(attempt.result_path).with_suffix(".pending.json").unlink(missing_ok=True)

    def _fail(self, row: dict, why: str) -> None:
        self.queue.finish(row["id"], state="failed", error=why)

    def _publish_all(self) -> None:
        """The publishing thread's call (grader/server/scheduler.py): the views, with the Gradescope files of the
        students recorded since the last."""
        with self._views_lock:
            touched, self._touched = self._touched, set()
            try:
                self._publish(touched)
            except Exception:
                self._touched |= touched
                raise

    def fresh_views(self) -> None:
        """The views as of the latest verdict, for a staff download: made now if a result was recorded since the
        publishing thread last made them (or never made)."""
        if self._touched or not (self.out / "gradebook.csv").is_file():
            self._publish_all()

    def _publish(self, students: set[str]) -> None:
        """The course's views from the ledger, as batch ends with them: results.json per student, gradebook.csv,
        canvas.csv, summary.md and the leaderboard."""
        # A staff member's upload is graded and shown to staff (their results and history), and is in no view of
        # the class: not the gradebook, Canvas's file, the summary, the leaderboard or a Gradescope file.
        students = students - set(self.sc.tokens.staff)
        everyone = sorted(set(self.sc.tokens.students) | students)
        ledger = Ledger(self.out / "ledger.sqlite")
        try:
            rows = batch.gradebook(ledger, self.hw, everyone)
        finally:
            ledger.close()
        board = leaderboard.collect(self.out, self.hw, everyone)
        for student in students:
            batch.write_gradescope(self.out, student, self.hw, [e for e in board if e.student == student])
        if board:
            leaderboard.write(self.out, self.hw, board)
        batch.write_gradebook(rows, self.hw, self.out / "gradebook.csv")
        canvas.write(rows, self.hw, self.out / batch.CANVAS)
        batch.write_summary(rows, self.hw, self.out, self.out / "summary.md")
