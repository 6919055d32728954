"""The attempts ledger: every graded attempt, in an embedded SQLite file (results/ledger.sqlite).

One row per graded (student, task, submission): when it was submitted and graded, its sha256, its score before
and after the late policy, and the grader version that graded it. The rules that read it (attempt limit, which
attempt counts, resume) live in grader/course/batch.py.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

SCHEMA = """
CREATE TABLE IF NOT EXISTS attempts (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    homework TEXT NOT NULL,
    student TEXT NOT NULL,
    task TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    submitted_at TEXT NOT NULL,
    graded_at TEXT NOT NULL,
    raw_score REAL NOT NULL,
    score REAL NOT NULL,
    max_score REAL NOT NULL,
    late_days INTEGER NOT NULL,
    grader_version TEXT NOT NULL,
    result_path TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS by_student_task ON attempts (homework, student, task);
"""


@dataclass(frozen=True)
class Attempt:
    id: int
    homework: str
    student: str
    task: str
    sha256: str
    submitted_at: str
    graded_at: str
    raw_score: float
    score: float
    max_score: float
    late_days: int
    grader_version: str
    result_path: str


class Ledger:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(path, check_same_thread=False)  # batch.py records from one thread at a time
        self.db.executescript(SCHEMA)

    def attempts(self, homework: str, student: str, task: str) -> list[Attempt]:
        rows = self.db.execute(
            "SELECT * FROM attempts WHERE homework = ? AND student = ? AND task = ? ORDER BY id",
            (homework, student, task),
        ).fetchall()
        return [Attempt(*row) for row in rows]

    def record(self, **fields) -> None:
        names = ", ".join(fields)
        marks = ", ".join("?" for _ in fields)
        self.db.execute(f"INSERT INTO attempts ({names}) VALUES ({marks})", tuple(fields.values()))
        self.db.commit()

    def close(self) -> None:
        self.db.close()
