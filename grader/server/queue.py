"""The submission server's queue: one row per submission in `server.sqlite`, stored before it is answered, taken
fairly, recorded once.

A row's `state`: queued (stored, waiting for room), running (in the grading scheduler), graded (its verdict is
recorded: the first pass, at once when its cases are judged; `speed` is "pending" until its speed tests are timed,
then "done"), failed (the grader's own failure), repeat (a file the student handed in before: no new attempt).
`lane` 0 is a student's submission; 1 a staff regrade, taken only when no student's waits.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import sqlite3
import threading
from pathlib import Path

from grader.gates.notebook import is_notebook
from grader.results.atomic import write_atomic

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
    error TEXT,
    lane INTEGER NOT NULL DEFAULT 0,
    speed TEXT,
    verdict_at TEXT
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
        have = {r[1] for r in self.db.execute("PRAGMA table_info(submissions)")}
        for column, kind in (("lane", "INTEGER NOT NULL DEFAULT 0"), ("speed", "TEXT"), ("verdict_at", "TEXT")):
            if column not in have:  # a data folder from before these columns
                self.db.execute(f"ALTER TABLE submissions ADD COLUMN {column} {kind}")
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
                                   "state IN ('queued', 'running', 'graded') AND lane = 0", (student, task)).fetchall()
        return {r[0] for r in rows}

    def since(self, student: str, when: str) -> int:
        with self.lock:
            return self.db.execute("SELECT COUNT(*) FROM submissions WHERE student = ? AND submitted_at >= ? "
                                   "AND lane = 0", (student, when)).fetchone()[0]

    # -- writing
    def store(self, student: str, task: str, filename: str, data: bytes, submitted_at: dt.datetime,
              same_as: int | None = None, lane: int = 0) -> int:
        """The file on disk (flushed), then its row (committed): a submission is stored before it is answered."""
        sha = hashlib.sha256(data).hexdigest()
        suffix = ".ipynb" if is_notebook(Path(filename)) else ".py"
        upload = self.uploads / sha / f"{task}{suffix}"  # named as the task's file: what messages show
        if not upload.is_file():
            upload.parent.mkdir(exist_ok=True)
            write_atomic(upload, data)
        with self.wake:
            cur = self.db.execute(
                "INSERT INTO submissions (student, task, filename, sha256, upload, submitted_at, state, same_as, "
                "lane) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (student, task, filename, sha, f"{sha}/{upload.name}", submitted_at.isoformat(),
                 "repeat" if same_as is not None else "queued", same_as, lane))
            self.wake.notify_all()
            return int(cur.lastrowid)

    def order(self) -> list[int]:
        """Queued submissions in the order they will be taken: students' first, round-robin by student (the
        student whose last start is the oldest, or who never started, first; then the earliest submitted), each
        student's own in the order they came; then a staff regrade's, in the order they came."""
        with self.lock:
            queued = self.db.execute("SELECT id, student, lane FROM submissions WHERE state = 'queued' "
                                     "ORDER BY id").fetchall()
            served = dict(self.db.execute("SELECT student, MAX(started_seq) FROM submissions WHERE started_seq "
                                          "IS NOT NULL AND lane = 0 GROUP BY student").fetchall())
        per: dict[str, list[int]] = {}
        for sid, student, lane in queued:
            if not lane:
                per.setdefault(student, []).append(sid)
        # Round k takes each student's k-th queued submission, students ordered by when they were last served.
        students = sorted(per, key=lambda s: (served.get(s, -1), per[s][0]))
        out: list[int] = []
        for k in range(max((len(v) for v in per.values()), default=0)):
            out += [per[s][k] for s in students if k < len(per[s])]
        return out + [sid for sid, _, lane in queued if lane]

    def take(self, limit: int, lanes: tuple[int, ...] = (0, 1)) -> list[dict]:
        """Up to `limit` queued submissions of these lanes, at most one per student, marked running."""
        with self.wake:
            chosen, seen = [], set()
            for sid in self.order():
                row = self.get(sid)
                if row["student"] in seen or row["lane"] not in lanes:
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
        """After a crash: every `running` submission, and every graded one whose speed tests were still being
        timed, back to `queued`; returns them."""
        with self.wake:
            rows = [dict(r) for r in self.db.execute("SELECT * FROM submissions WHERE state = 'running' OR "
                                                     "(state = 'graded' AND speed = 'pending')")]
            self.db.execute("UPDATE submissions SET state = 'queued', speed = NULL WHERE state = 'running' OR "
                            "(state = 'graded' AND speed = 'pending')")
            return rows

    def paces(self, limit: int = 40) -> tuple[list[float], list[float]]:
        """From the latest verdicts: the seconds between one start and the next (the queue's pace under load), and
        the seconds from a start to its verdict (one file's latency)."""
        with self.lock:
            rows = self.db.execute("SELECT started_at, verdict_at FROM submissions WHERE verdict_at IS NOT NULL "
                                   "AND started_at IS NOT NULL AND lane = 0 ORDER BY started_seq DESC LIMIT ?",
                                   (limit,)).fetchall()
        starts = sorted(dt.datetime.fromisoformat(r[0]) for r in rows)
        gaps = [(b - a).total_seconds() for a, b in zip(starts, starts[1:])]
        latency = [(dt.datetime.fromisoformat(v) - dt.datetime.fromisoformat(s)).total_seconds() for s, v in rows]
        return gaps, latency
