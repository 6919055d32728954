"""The submission server: students submit to the course's GPU box and read GPU verdicts in seconds.

    python -m grader serve --homework HW --tokens TOKENS.csv --data DIR [--host H] [--port P] [--device D]

Everything it keeps is under DIR:

* `server.sqlite`: the queue, one row per submission, with its state (queued, running, graded, failed,
  repeat) and the server's clock at the moment the file was stored (`submitted_at`);
* `uploads/`: each submitted file, written whole and flushed to disk before its row is committed, so a
  submission the server answered for is never lost;
* `results/`: what `batch` writes for a class, from the same code (grader/course/batch.py): the ledger of graded
  attempts (`ledger.sqlite`), each student's files, `gradebook.csv`, `canvas.csv` (Canvas's gradebook import),
  `summary.md`, `results.json` and the Gradescope upload, the leaderboard.

Rules are batch's: a task's `max_attempts` counts distinct files (a file submitted again is no new attempt and is
not graded again), lateness is by the homework's late policy, now by the server's clock; a submission that would
earn nothing for lateness, or past the attempts, is refused with the reason. The queue is served round-robin by
student (the student served longest ago first), so 50 attempts of one student do not starve the class; each
student has a rate limit and each file a size limit (the intake's). A kill -9 loses nothing: on start, a
submission left `running` is graded again unless the ledger already holds its attempt, so each is recorded once.

Student text is data: the web page (grader/course/server_page.py) puts every value into the page as text, never
as markup, and every answer is JSON.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
import os
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

from grader.config import CourseConfig, Homework, TaskSpec
from grader.course import batch, canvas, leaderboard
from grader.course.ledger import Ledger
from grader.course.tokens import TokenBook
from grader.gates.intake import MAX_NOTEBOOK_BYTES, MAX_SOURCE_BYTES
from grader.gates.notebook import Notebook, is_notebook
from grader.pipeline.grading import Job, grade_jobs, judge_processes
from grader.pipeline.result import refused_result
from grader.results import TaskResult, report

CLOCK_ENV = "GRADER_CLOCK_FILE"
"""A file holding an ISO 8601 time with an offset: when set, the server's clock reads it (for tests of lateness);
otherwise the system's clock in UTC."""

SCHEMA = """
CREATE TABLE IF NOT EXISTS submissions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    student TEXT NOT NULL,
    task TEXT NOT NULL,
    filename TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    upload TEXT NOT NULL,
    submitted_at TEXT NOT NULL,
    state TEXT NOT NULL,
    same_as INTEGER,
    started_at TEXT,
    started_seq INTEGER,
    graded_at TEXT,
    score REAL,
    max_score REAL,
    late_days INTEGER,
    result TEXT,
    report TEXT,
    error TEXT
);
CREATE INDEX IF NOT EXISTS by_state ON submissions (state, id);
CREATE INDEX IF NOT EXISTS by_student ON submissions (student, task);
"""

STATES = ("queued", "running", "graded", "failed", "repeat")


def now(clock_file: str | None = None) -> dt.datetime:
    path = clock_file if clock_file is not None else os.environ.get(CLOCK_ENV)
    if path:
        value = dt.datetime.fromisoformat(Path(path).read_text().strip())
        value = value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc)
        return value.astimezone(dt.timezone.utc)  # stored in UTC: the times in the table compare as text
    return dt.datetime.now(dt.timezone.utc)


class Refused(Exception):
    """A submission the server does not take: `status` is the HTTP status, the message says why."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _write_durable(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Queue:
    """The submissions table: stored before they are answered, taken round-robin by student, recorded once."""

    def __init__(self, data: Path) -> None:
        self.data = data
        self.uploads = data / "uploads"
        self.uploads.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(data / "server.sqlite", check_same_thread=False, isolation_level=None)
        self.db.row_factory = sqlite3.Row
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")
        self.db.executescript(SCHEMA)
        self.lock = threading.RLock()
        self.wake = threading.Condition(self.lock)

    # -- reading
    def get(self, sid: int) -> dict | None:
        with self.lock:
            row = self.db.execute("SELECT * FROM submissions WHERE id = ?", (sid,)).fetchone()
        return dict(row) if row else None

    def of_student(self, student: str) -> list[dict]:
        with self.lock:
            rows = self.db.execute("SELECT * FROM submissions WHERE student = ? ORDER BY id", (student,)).fetchall()
        return [dict(r) for r in rows]

    def recent(self, limit: int = 50) -> list[dict]:
        with self.lock:
            rows = self.db.execute("SELECT * FROM submissions ORDER BY id DESC LIMIT ?", (limit,)).fetchall()
        return [dict(r) for r in rows]

    def counts(self) -> dict[str, int]:
        with self.lock:
            rows = self.db.execute("SELECT state, COUNT(*) FROM submissions GROUP BY state").fetchall()
        return {state: 0 for state in STATES} | {r[0]: r[1] for r in rows}

    def position(self, sid: int) -> int | None:
        """How many queued submissions come before `sid` in the round-robin order (None: not queued)."""
        order = self.order()
        return order.index(sid) if sid in order else None

    def attempts(self, student: str, task: str) -> set[str]:
        """The distinct files of `student` for `task` that count as attempts: graded, or to be graded."""
        with self.lock:
            rows = self.db.execute("SELECT DISTINCT sha256 FROM submissions WHERE student = ? AND task = ? AND "
                                   "state IN ('queued', 'running', 'graded')", (student, task)).fetchall()
        return {r[0] for r in rows}

    def since(self, student: str, when: str) -> int:
        with self.lock:
            return self.db.execute("SELECT COUNT(*) FROM submissions WHERE student = ? AND submitted_at >= ?",
                                   (student, when)).fetchone()[0]

    # -- writing
    def store(self, student: str, task: str, filename: str, data: bytes, submitted_at: dt.datetime,
              same_as: int | None = None) -> int:
        """The file on disk (flushed), then its row (committed): a submission is stored before it is answered."""
        sha = hashlib.sha256(data).hexdigest()
        suffix = ".ipynb" if is_notebook(Path(filename)) else ".py"
        upload = self.uploads / sha / f"{task}{suffix}"  # named as the task's file: what messages show
        if not upload.is_file():
            upload.parent.mkdir(exist_ok=True)
            _write_durable(upload, data)
        with self.wake:
            cur = self.db.execute(
                "INSERT INTO submissions (student, task, filename, sha256, upload, submitted_at, state, same_as) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (student, task, filename, sha, f"{sha}/{upload.name}", submitted_at.isoformat(),
                 "repeat" if same_as is not None else "queued", same_as))
            self.wake.notify_all()
            return int(cur.lastrowid)

    def order(self) -> list[int]:
        """Queued submissions in the order they will be taken: round-robin by student (the student whose last
        start is the oldest, or who never started, first; then the earliest submitted), each student's own in
        the order they came."""
        with self.lock:
            queued = self.db.execute("SELECT id, student FROM submissions WHERE state = 'queued' ORDER BY id")\
                .fetchall()
            served = dict(self.db.execute("SELECT student, MAX(started_seq) FROM submissions WHERE started_seq "
                                          "IS NOT NULL GROUP BY student").fetchall())
        per: dict[str, list[int]] = {}
        for sid, student in queued:
            per.setdefault(student, []).append(sid)
        # Round k takes each student's k-th queued submission, students ordered by when they were last served.
        students = sorted(per, key=lambda s: (served.get(s, -1), per[s][0]))
        out: list[int] = []
        for k in range(max((len(v) for v in per.values()), default=0)):
            out += [per[s][k] for s in students if k < len(per[s])]
        return out

    def take(self, limit: int) -> list[dict]:
        """Up to `limit` queued submissions, at most one per student, marked running."""
        with self.wake:
            chosen, seen = [], set()
            for sid in self.order():
                row = self.get(sid)
                if row["student"] in seen:
                    continue
                seen.add(row["student"])
                chosen.append(row)
                if len(chosen) == limit:
                    break
            seq = self.db.execute("SELECT COALESCE(MAX(started_seq), 0) FROM submissions").fetchone()[0]
            for k, row in enumerate(chosen, 1):
                self.db.execute("UPDATE submissions SET state = 'running', started_at = ?, started_seq = ? "
                                "WHERE id = ?", (dt.datetime.now(dt.timezone.utc).isoformat(), seq + k, row["id"]))
                row["state"], row["started_seq"] = "running", seq + k
            return chosen

    def finish(self, sid: int, **fields) -> None:
        names = ", ".join(f"{k} = ?" for k in fields)
        with self.wake:
            self.db.execute(f"UPDATE submissions SET {names} WHERE id = ?", (*fields.values(), sid))
            self.wake.notify_all()

    def requeue_running(self) -> list[dict]:
        """After a crash: every `running` submission back to `queued`; returns them."""
        with self.wake:
            rows = [dict(r) for r in self.db.execute("SELECT * FROM submissions WHERE state = 'running'")]
            self.db.execute("UPDATE submissions SET state = 'queued' WHERE state = 'running'")
            return rows


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
    """The queue, the grading thread and the course's views; the web app (`app`) calls it."""

    def __init__(self, sc: ServerConfig, grade: Callable[..., list[TaskResult]] = grade_jobs) -> None:
        self.sc = sc
        self.hw = sc.homework
        self.out = sc.data / "results"
        self.out.mkdir(parents=True, exist_ok=True)
        self.queue = Queue(sc.data)
        self.grade = grade
        self.versions = {t: batch.grader_version(sc.tasks[t]) for t in self.hw.tasks if t in sc.tasks}
        self.paused = False
        cores = os.cpu_count() or 1
        n = sc.cfg.judges if sc.cfg.judges >= 0 else max(1, cores // 2)
        # Judge processes kept for the server's life: each batch of submissions started its own (spawned, torch
        # imported) and a burst paid that at every batch.
        self.judges = judge_processes(n) if n and grade is grade_jobs else None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.recover()

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
                            and r["sha256"] == sha and r["state"] in ("queued", "running", "graded")), None)
            if earlier is None and self.hw.max_attempts and len(used) >= self.hw.max_attempts:
                raise Refused(403, f"the limit of {self.hw.max_attempts} graded attempts for {task_id} is reached "
                                   f"({len(used)} used): your points are those of the attempt already counted")
            sid = self.queue.store(student, task_id, name, data, when,
                                   same_as=earlier["id"] if earlier is not None else None)
        used_now = len(used | {sha})
        return {"id": sid, "state": "repeat" if earlier is not None else "queued", "task": task_id,
                "submitted_at": when.isoformat(), "attempts_used": used_now,
                "max_attempts": self.hw.max_attempts or None,
                **({"same_as": earlier["id"]} if earlier is not None else {})}

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
        """A submission as its student sees it: state, place in the queue, and when graded the student JSON
        (hidden tests by points only) and the report `grade` prints of it."""
        if row["state"] == "repeat" and row["same_as"]:
            first = self.queue.get(row["same_as"]) or {}
            shown = {**self.view(first), "id": row["id"], "filename": row["filename"],
                     "submitted_at": row["submitted_at"], "same_as": row["same_as"], "repeat": True}
            return shown
        out = {k: row[k] for k in ("id", "task", "filename", "submitted_at", "state", "graded_at", "score",
                                   "max_score", "late_days")}
        if row["state"] == "queued":
            out["position"] = self.queue.position(row["id"])
        if row["error"]:
            out["error"] = row["error"]
        if row["state"] == "graded" and own:
            out["report"] = row["report"] or ""
            path = Path(row["result"] or "")
            if path.is_file() and path.parent.parent == self.out / row["student"]:
                out["result"] = json.loads(path.read_text())
        return out

    def results(self, student: str) -> dict:
        return {"student": student, "homework": self.hw.id,
                "submissions": [self.view(r) for r in self.queue.of_student(student)]}

    def staff_queue(self) -> dict:
        recent = []
        for r in self.queue.recent(100):
            recent.append({k: r[k] for k in ("id", "student", "task", "filename", "state", "submitted_at",
                                             "started_at", "graded_at", "score", "max_score", "late_days", "error")})
        return {"homework": self.hw.id, "paused": self.paused, "counts": self.queue.counts(),
                "order": self.queue.order(), "recent": recent}

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
        """After a crash or kill -9: a submission left running is recorded from the ledger if its attempt is
        there (its result was written before the row), else queued again."""
        ledger = Ledger(self.out / "ledger.sqlite")
        try:
            for row in self.queue.requeue_running():
                version = self.versions.get(row["task"])
                done = [a for a in ledger.attempts(self.hw.id, row["student"], row["task"])
                        if a.sha256 == row["sha256"] and a.grader_version == version]
                if done:
                    a = done[-1]
                    self.queue.finish(row["id"], state="graded", graded_at=a.graded_at, score=a.score,
                                      max_score=a.max_score, late_days=a.late_days, result=a.result_path,
                                      report=self._report_of(Path(a.result_path)))
        finally:
            ledger.close()

    @staticmethod
    def _report_of(path: Path) -> str:
        side = path.with_suffix(".report.txt")
        return side.read_text() if side.is_file() else ""

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="grader-server-queue", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        with self.queue.wake:
            self.queue.wake.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=30)
        if self.judges is not None:
            self.judges.shutdown(wait=False, cancel_futures=True)

    def _loop(self) -> None:
        size = self.sc.workers or self.sc.cfg.workers or max(1, (os.cpu_count() or 1))
        while not self._stop.is_set():
            with self.queue.wake:
                rows = [] if self.paused else self.queue.take(size)
                if not rows:
                    self.queue.wake.wait(timeout=1.0)
                    continue
            try:
                self.grade_rows(rows)
            except Exception as exc:  # noqa: BLE001 - the grader's own failure: these jobs fail, the server goes on
                for row in rows:
                    if (self.queue.get(row["id"]) or {}).get("state") == "running":
                        self.queue.finish(row["id"], state="failed",
                                          error=f"the grader failed ({type(exc).__name__}): tell the course staff")

    def grade_rows(self, rows: list[dict]) -> None:
        """Grade running submissions with the class pipeline and record each as it is judged, as `batch` does."""
        planned: dict[tuple[str, str], tuple[dict, batch.Planned]] = {}
        jobs = []
        for row in rows:
            task = self.sc.tasks[row["task"]]
            path = self.queue.uploads / row["upload"]
            source = path.read_bytes()
            when = dt.datetime.fromisoformat(row["submitted_at"])
            p = batch.Planned(row["student"], task, path, row["sha256"], when, source, time_source="server clock")
            job = Job(task, path, row["student"], source)
            if is_notebook(Path(row["filename"])):
                part = Notebook(source, row["filename"]).extract(task)
                if not part.defines:
                    p.refused = refused_result(task, row["student"], row["filename"], self.sc.device,
                                               part.why_not())
                else:
                    p.notebook, p.source = part, part.source
                    job = Job(task, path, row["student"], part.source, part)
            planned[(row["student"], row["task"])] = (row, p)
            if p.refused is not None:
                self._record(row, p, p.refused)
            else:
                jobs.append(job)
        lock = threading.Lock()

        def on_result(r: TaskResult) -> None:
            if r.pending:
                return  # its speed tests are not timed yet: the full result is recorded
            with lock:
                row, p = planned[(r.student, r.task)]
                self._record(row, p, r)

        if jobs:
            extra = {"backend": self.sc.backend, "address": self.sc.address} if self.sc.backend != "local" else {}
            if self.judges is not None:
                extra["judge_pool"] = self.judges
            results = self.grade(jobs, self.sc.cfg, self.sc.device, self.sc.workers, on_result=on_result, **extra)
            for r in results:  # a result on_result did not get
                row, _ = planned[(r.student, r.task)]
                if (self.queue.get(row["id"]) or {}).get("state") == "running":
                    on_result(r)
        self._publish({row["student"] for row in rows})

    def _record(self, row: dict, p: batch.Planned, r: TaskResult) -> None:
        ledger = Ledger(self.out / "ledger.sqlite")
        try:
            report.save_pictures(r, self.out / p.student)
            late = batch.record_result(ledger, self.out, self.hw, self.versions[p.task.id], p, r)
            attempt = ledger.attempts(self.hw.id, p.student, p.task.id)[-1]
        finally:
            ledger.close()
        text = report.summary(r.student_view()) + (f"\n{late}" if late else "")
        batch.write_atomic(Path(attempt.result_path).with_suffix(".report.txt"), text)
        self.queue.finish(row["id"], state="graded", graded_at=r.graded_at, score=attempt.score,
                          max_score=attempt.max_score, late_days=attempt.late_days, result=attempt.result_path,
                          report=text)

    def _publish(self, students: set[str]) -> None:
        """The course's views from the ledger, as batch ends with them: results.json per student, gradebook.csv,
        canvas.csv, summary.md and the leaderboard."""
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
