"""Grading a class: `python -m grader batch submissions/ --homework hw4_int8`.

For every `submissions/<student>/<task_id>.py` of the homework:
* resume: a file whose sha256 was already graded by its task's grader version (`grader_version`: the grader's
  code, the task's folder, its reference modules) is not graded again (`--force` does);
* attempts: a new file past the homework's `max_attempts` for that task is not graded, and the student is told;
* deadline: the submission time is the file's modification time, or the `--manifest` CSV's
  (`student,task,submitted_at` with an ISO 8601 time and offset); late work is scored by the late policy;
* the ledger (results/ledger.sqlite) records every graded attempt; the gradebook counts the best or the last one;
* durable: each job's JSON files and then its ledger row are written as soon as it is judged, each file replaced
  whole, so a batch killed at any point (Ctrl-C, SIGKILL, a lost machine) keeps every job it judged, and its rerun
  grades only the rest (resume) and ends with the gradebook an uninterrupted run writes.

Outputs: results/<student>/<task>.json (and .staff.json), as each job is judged; at the end, from the ledger,
results/gradebook.csv (one row per student, a column per task, total, late flag; sorted by student),
results/canvas.csv (the totals in the CSV Canvas's gradebook import takes: grader/course/canvas.py),
results/<student>/results.json (Gradescope's format, the student's view: hidden tests by points only),
results/<student>/gradescope.staff.json (the same with every message: Gradescope's upload, staff only) and
results/summary.md (score histogram, per-test pass rates).
"""

from __future__ import annotations

import csv
import datetime as dt
import difflib
import hashlib
import io
import json
import math
import os
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import grader
from grader.config import ROOT, CourseConfig, Homework, TaskSpec, reference_modules
from grader.course import canvas, gradescope, leaderboard
from grader.course.ledger import Attempt, Ledger
from grader.gates.intake import LINK_MESSAGE, IntakeError, read_submitted, shown, student_id, task_files
from grader.gates.notebook import Extraction, NotebookFolder
from grader.pipeline.grading import Job, TaskResult, grade_jobs
from grader.pipeline.result import refused_result
from grader.results import escape, report
from grader.results.atomic import write_atomic
from grader.results.outcome import Outcome


def grader_version(task: TaskSpec, root: Path = ROOT) -> str:
    """The version `task`'s results are graded by: the package version plus a digest of what decides that task's
    verdicts: the grader's code, the task's own folder (task.yaml, its baseline, data; not its right/ and wrong/
    files nor its statement, which decide nothing), and the reference modules its oracle imports
    (`reference/<task.reference>.py` and every `reference` module it imports, transitively). A file graded by
    another version is graded again; editing one task (or adding one) regrades only that task's files (with one
    digest of all of tasks/, adding a task to a new homework restarted every class at [1/N])."""
    h = hashlib.sha256()
    files = sorted(path for path in (root / "grader").rglob("*.py") if "__pycache__" not in path.parts)
    files += sorted(path for path in task.folder.rglob("*") if path.is_file() and path.suffix != ".md"
                    and not {"right", "wrong", "__pycache__"} & set(path.relative_to(task.folder).parts))
    # the oracle's modules, and the hidden cases' value patterns where the task has hidden cases (the same
    # modules Gradescope's bundle ships: grader/authoring/release.py)
    hidden = ["_hidden"] if any(c.visibility != "public" for c in task.cases) else []
    files += [path for name in ["__init__", *reference_modules({task.id: task}, root), *hidden]
              if (path := root / "reference" / f"{name}.py").is_file()]
    for path in files:
        h.update(str(path.relative_to(root) if path.is_relative_to(root) else path.name).encode() + b"\0")
        h.update(hashlib.sha256(path.read_bytes()).digest())
    return f"{grader.__version__}+{h.hexdigest()[:12]}"


def late_days(submitted: dt.datetime, deadline: dt.datetime | None) -> int:
    """Started days after the deadline (0 when on time)."""
    if deadline is None or submitted <= deadline:
        return 0
    return math.ceil((submitted - deadline).total_seconds() / 86400)


def late_factor(days: int, hw: Homework) -> float:
    """The share of the points a submission `days` late keeps."""
    if days == 0:
        return 1.0
    if days > hw.late_max_days:
        return 0.0
    return max(0.0, 1.0 - hw.late_penalty_per_day * days)


def counted(attempts: list[Attempt], rule: str) -> Attempt | None:
    if not attempts:
        return None
    return attempts[-1] if rule == "last" else max(attempts, key=lambda a: (a.score, a.id))


class ManifestError(ValueError):
    """The `--manifest` CSV cannot be used; the message names the file and the line."""


def read_manifest(path: Path | None) -> dict[tuple[str, str], dt.datetime]:
    """(student, task) -> submission time, from a CSV with the columns student, task, submitted_at (ISO 8601 with a
    UTC offset). The file comes from an LMS export and its cells from students (names): anything wrong with it
    raises ManifestError, never another error. Student names are matched by their printable id
    (grader/gates/intake.py `student_id`), as the batch grades them."""
    if path is None:
        return ManifestTimes()
    times = ManifestTimes()
    try:
        with path.open(newline="", encoding="utf-8", errors="strict") as f:
            reader = csv.DictReader(f)
            missing = {"student", "task", "submitted_at"} - set(reader.fieldnames or [])
            if missing:
                raise ManifestError(f"{path}: no column {', '.join(sorted(missing))} (the header must name student, "
                                    "task, submitted_at)")
            for n, row in enumerate(reader, start=2):
                when, student, task = row.get("submitted_at"), row.get("student"), row.get("task")
                if not isinstance(when, str) or not isinstance(student, str) or not isinstance(task, str):
                    raise ManifestError(f"{path}:{n}: a row needs student, task and submitted_at")
                try:
                    t = dt.datetime.fromisoformat(when)
                except ValueError:
                    raise ManifestError(f"{path}:{n}: submitted_at must be an ISO 8601 time with an offset, "
                                        f"got {shown(when[:60])}") from None
                if t.tzinfo is None:
                    raise ManifestError(f"{path}:{n}: submitted_at needs a UTC offset, e.g. +03:00")
                key = (student_id(student), task)
                if key in times:  # the later row counts, as an LMS export lists a re-upload after the first one
                    times.notes.append(f"{path.name}:{n}: a second row for {shown(key[0])} and {shown(task)} "
                                       f"(the first is line {times.line[key]}): line {n} is used")
                times[key] = t
                times.line[key] = n
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise ManifestError(f"{path}: cannot be read as a UTF-8 CSV ({type(exc).__name__}: {str(exc)[:100]})") from None
    return times


class ManifestTimes(dict):
    """(student, task) -> submission time, as read from the manifest; `line`: each key's line in the file, `notes`:
    what the reader decided (a second row for the same file)."""

    def __init__(self) -> None:
        super().__init__()
        self.line: dict[tuple[str, str], int] = {}
        self.notes: list[str] = []


def manifest_notes(times: dict, manifest: Path | None, students: list[str], hw: Homework) -> list[str]:
    """For the TA: each manifest row that decides nothing, and why, with the folder or task it looks like (a row
    for `Ann` when the folder is `ann` used to leave ann's file to its modification time, in silence)."""
    notes = list(getattr(times, "notes", []))
    where = manifest.name if manifest is not None else "manifest"
    lines = getattr(times, "line", {})
    known = set(students)
    lower = {s.lower(): s for s in students}
    for (student, task), _ in sorted(times.items(), key=lambda kv: lines.get(kv[0], 0)):
        at = f"{where}:{lines[(student, task)]}" if (student, task) in lines else where
        if student not in known:
            guess = lower.get(student.lower()) or next(iter(difflib.get_close_matches(student, students, n=1,
                                                                                      cutoff=0.6)), None)
            hint = f"; did you mean {shown(guess)}?" if guess else "."
            notes.append(f"{at}: no student folder is named {shown(student)}{hint} The row is not used "
                         "(names match exactly)")
        elif task not in hw.tasks:
            guess = next(iter(difflib.get_close_matches(task, list(hw.tasks), n=1, cutoff=0.5)), None)
            hint = f"; did you mean {guess}?" if guess else f"; the tasks are {', '.join(hw.tasks)}."
            notes.append(f"{at}: {hw.id} has no task {shown(task)}{hint} The row is not used")
    return notes


@dataclass
class Planned:
    student: str
    task: TaskSpec
    path: Path
    sha256: str
    submitted_at: dt.datetime
    source: bytes = b""
    """The bytes the sha256 is of: the ones graded (grading.Job.source)."""
    notebook: Extraction | None = None
    """For a notebook: what `source` was extracted from (grading.Job.notebook)."""
    refused: TaskResult | None = None
    """Set when the intake refused the file (grader/gates/intake.py): its 0-point result, graded by no worker."""
    time_source: str = "manifest"
    """Where `submitted_at` came from: MANIFEST, MTIME_NO_MANIFEST or MTIME_NO_ROW (said wherever it makes a file
    late)."""


GradeFn = Callable[..., list[TaskResult]]


def run_batch(root: Path, hw: Homework, tasks: dict[str, TaskSpec], cfg: CourseConfig, device: str, out: Path,
              workers: int = 0, force: bool = False, manifest: Path | None = None,
              grade: GradeFn = grade_jobs, show: Callable[[str], None] = print,
              verbose: bool = False) -> dict[str, dict]:
    """Grade what is new, record it, and rewrite the gradebook. Returns the gradebook rows by student. Each job
    is shown in one line (`verbose`: the full per-test report). A results folder holds one class: a batch of
    another submissions folder into it raises OtherClass (two sections would share attempt counts)."""
    claim_results_folder(out, root)
    versions = {task_id: grader_version(tasks[task_id]) for task_id in hw.tasks if task_id in tasks}
    times = read_manifest(manifest) if manifest is not None else None
    ledger = Ledger(out / "ledger.sqlite")
    folders, failed = class_folders(root, show)
    students = sorted(folders)
    planned: list[Planned] = []
    refused: dict[str, dict[str, dict]] = {student: {} for student in students}
    # What the grader decided that the TA did not say: per student (their results and the console) and for the
    # class (the console and summary.md), never in silence.
    told: dict[str, list[str]] = {student: [] for student in students}
    class_notes = manifest_notes(times, manifest, students, hw) if times is not None else []
    for note in class_notes:
        show(note)
    for student in students:
        # One student's folder is read in one try: whatever their bytes or names do to the reader fails them,
        # with a line in their own results, and every other student is graded.
        try:
            planned += plan_student(root, folders[student], student, hw, tasks, ledger, versions, force, times,
                                    refused[student], failed, show, device, told[student])
        except Exception as exc:  # noqa: BLE001 - this student's failure, not the class's
            failed.setdefault(student, []).append(f"the grader could not read your folder ({type(exc).__name__}); "
                                                  "nothing of it was graded: tell the course staff")
            show(f"{shown(student)}: not graded: {type(exc).__name__}: {shown(str(exc)[:200])}")

    warning = mtime_lateness_warning(planned, hw, bool(manifest))
    if warning:
        show(warning)
        print(warning, file=sys.stderr)

    # Durable: each job is recorded the moment it is judged (its student and staff JSON in place, then its ledger
    # row), so a batch killed at any point keeps what it graded and the rerun grades only the rest.
    by_key = {(p.student, p.task.id): p for p in planned}
    by_path = {str(p.path): p for p in planned}
    recorded: set[tuple[str, str]] = set()
    lock = threading.Lock()  # on_result may come from more than one thread

    def record(r: TaskResult) -> str:
        p = by_key.get((r.student, r.task)) or by_path.get(r.submission)
        if p is None:
            raise KeyError(f"a result for {r.student}/{r.task} ({r.submission}) that this batch did not plan")
        with lock:
            if (p.student, p.task.id) in recorded:
                return ""
            report.save_pictures(r, out / p.student)
            late = record_result(ledger, out, hw, versions[p.task.id], p, r)
            recorded.add((p.student, p.task.id))
            return late

    def on_result(r: TaskResult) -> None:
        if r.pending:  # a first result, its speed tests not timed yet: said, and not recorded (the full one is)
            p = by_key.get((r.student, r.task)) or by_path.get(r.submission)
            if p is not None:  # its attempt file (no ledger row: a batch killed now grades it again)
                path = out / p.student / ATTEMPTS / f"{p.task.id}.{p.sha256[:12]}.json"
                path.parent.mkdir(parents=True, exist_ok=True)
                write_atomic(path, json.dumps(r.student_json(), indent=2) + "\n")
            show(report.one_line(r))
            return
        late = record(r)
        if verbose:
            show(report.summary(r) + (f"\n{late}" if late else "") + "\n")
        else:
            show(report.one_line(r) + (f"\n{late}" if late else ""))

    for p in planned:  # refused by the intake (a link, a file too large...): a 0-point result that says why
        if p.refused is not None:
            on_result(p.refused)
    to_grade = [p for p in planned if p.refused is None]
    results = grade([Job(p.task, p.path, p.student, p.source, p.notebook) for p in to_grade], cfg, device, workers,
                    on_result=on_result) if to_grade else []
    for r in results:
        if r.staff.get("grader_error"):  # the grader could not judge this student's file: their failure, said
            failed.setdefault(r.student, []).append(f"{r.task}: the grader could not judge it")
    for r in results:  # a grade function that did not call on_result for a job: recorded now
        record(r)

    rows = gradebook(ledger, hw, students)
    ledger.close()
    board = leaderboard.collect(out, hw, students)  # each ranked speed test's measurement, counted attempts
    for student in students:  # what was refused this time, for the student's results.json (gone once it is not)
        for name, content in ((REFUSED, refused[student]), (INTAKE, failed.get(student, []) + told[student])):
            path = out / student / name
            if content:
                path.parent.mkdir(parents=True, exist_ok=True)
                write_atomic(path, json.dumps(content, indent=2) + "\n")
            elif path.is_file():
                path.unlink()
        write_gradescope(out, student, hw, [e for e in board if e.student == student])
    if board:
        leaderboard.write(out, hw, board)
    else:
        show(leaderboard.why_empty(out, hw, students, tasks))
    write_gradebook(rows, hw, out / "gradebook.csv")
    canvas.write(rows, hw, out / CANVAS)
    write_summary(rows, hw, out, out / "summary.md", class_notes, told)
    show(f"graded {len(recorded)} new submission(s); gradebook: {out / 'gradebook.csv'}")
    if failed:
        show(f"{len(failed)} student(s) handed in what could not be read or graded (their results say what): "
             f"{', '.join(shown(s) for s in sorted(failed))}")
    return Gradebook(rows, failed)


class Gradebook(dict):
    """The gradebook's rows by student (a dict, as before), and `failed`: student -> what of theirs could not be
    read or graded this run (a link, an unreadable notebook, a file the grader could not judge); the CLI exits
    with SOME_FAILED when it is not empty."""

    def __init__(self, rows: dict[str, dict], failed: dict[str, list[str]]) -> None:
        super().__init__(rows)
        self.failed = failed


CANVAS = "canvas.csv"
"""results/canvas.csv: the gradebook's totals for Canvas's gradebook import (grader/course/canvas.py)."""

INTAKE = "intake.json"
"""results/<student>/intake.json: what of the student's folder the intake could not read this run, and why."""


def class_folders(root: Path, show: Callable[[str], None] = print) -> tuple[dict[str, str], dict[str, list[str]]]:
    """The class's student folders: student id -> folder name (grader/gates/intake.py `student_id`: a name that is
    not printable UTF-8 is graded under its escaped form), and the students failed already: a folder that is a
    symbolic link is never followed (it could point at the answer key), and is reported under its own id."""
    folders: dict[str, str] = {}
    failed: dict[str, list[str]] = {}
    with os.scandir(root) as entries:
        found = sorted(entries, key=lambda e: e.name)
    for entry in found:
        if entry.name.startswith("."):
            continue
        link = entry.is_symlink()
        if not link and not entry.is_dir(follow_symlinks=False):
            continue
        sid = student_id(entry.name)
        if sid in folders:  # `a\nb` written out, beside a folder whose name holds the newline
            show(f"{shown(entry.name)}: not graded, its id {sid!r} is another folder's")
            continue
        folders[sid] = entry.name
        if link:
            failed[sid] = [f"your folder {shown(entry.name)} {LINK_MESSAGE}: nothing in it was graded"]
    return folders, failed


def plan_student(root: Path, name: str, student: str, hw: Homework, tasks: dict[str, TaskSpec], ledger: Ledger,
                 versions: dict[str, str], force: bool, times: dict[tuple[str, str], dt.datetime] | None,
                 refused: dict[str, dict], failed: dict[str, list[str]], show: Callable[[str], None],
                 device: str = "cpu", told: list[str] | None = None) -> list[Planned]:
    """What to grade of one student's folder `root/name` (graded as `student`), read as hostile bytes
    (grader/gates/intake.py): a `<task_id>.py` that is a link, not a regular file or too large gets a 0-point
    result saying so; what else cannot be read goes to `failed`. Which file counts for a task is the rule every
    way of grading shares (intake `task_files`); each file not graded, and why, goes to `told` and the console.
    `times`: the manifest's submission times (None: no manifest, the files' modification times decide)."""
    planned: list[Planned] = []
    told = [] if told is None else told
    folder = root / name
    if failed.get(student):  # a folder that is a link: nothing below it is looked at
        return planned
    decided = task_files(folder, [t for t in hw.tasks if t in tasks])
    told += decided.notes
    if decided.empty:
        told.append("your folder holds no file: nothing was handed in")
    notebooks = NotebookFolder(folder, deep=True)  # a notebook submits each task it defines that has no .py
    for task_id in hw.tasks:
        part, why = None, None
        if task_id not in tasks:
            continue
        if task_id in decided.files:  # a link too: refused below, and said
            path = folder / decided.files[task_id]
            try:
                source = read_submitted(folder, decided.files[task_id])
            except IntakeError as exc:
                why, source = str(exc), b""
        elif found := notebooks.for_task(tasks[task_id]):
            path, part = found
            source = part.source  # the task's extracted source: what is graded, and hashed
        else:
            continue
        sha = hashlib.sha256(source if why is None else f"refused: {why}".encode()).hexdigest()
        if why is not None:  # said on every run while the file stays refused (its result is resumed, not redone)
            failed.setdefault(student, []).append(why)
        try:
            mtime = dt.datetime.fromtimestamp(path.lstat().st_mtime, dt.timezone.utc)
        except OSError:
            mtime = dt.datetime.now(dt.timezone.utc)
        if times is None:
            when, source_of_time = mtime, MTIME_NO_MANIFEST
        elif (student, task_id) in times:
            when, source_of_time = times[(student, task_id)], MANIFEST
        else:
            when, source_of_time = mtime, MTIME_NO_ROW
        if source_of_time == MTIME_NO_ROW:  # said on every run, resumed or not, as every note of the intake
            told.append(f"{task_id}: the manifest has no row for you and this task: your file's modification time "
                        f"({when.isoformat(timespec='seconds')}) is your submission time")
        previous = ledger.attempts(hw.id, student, task_id)
        if not force and any(a.sha256 == sha and a.grader_version == versions[task_id] for a in previous):
            continue  # resume: graded before, by this grader
        if hw.max_attempts and sha not in {a.sha256 for a in previous} \
                and len({a.sha256 for a in previous}) >= hw.max_attempts:
            why = (f"your latest {f'{task_id}.py' if part is None else f'{shown(path.name)} ({task_id})'} was not "
                   f"graded: the limit of {hw.max_attempts} graded attempts "
                   "is reached; your points are those of the attempt already counted")
            refused[task_id] = {"sha256": sha, "why": why}
            show(f"{shown(student)}/{task_id}: not graded: the limit of {hw.max_attempts} attempts is reached")
            continue
        if why is not None:
            planned.append(Planned(student, tasks[task_id], path, sha, when, refused=refused_result(
                tasks[task_id], student, str(path), device, why), time_source=source_of_time))
            continue
        planned.append(Planned(student, tasks[task_id], path, sha, when, source, part, time_source=source_of_time))
    told += notebooks.notes
    for note in told:
        show(f"{shown(student)}: {shown(note)}")
    if notebooks.problems:
        failed.setdefault(student, []).extend(notebooks.problems)
        for note in notebooks.problems:
            show(f"{shown(student)}: {shown(note)}")
    return planned


MANIFEST = "manifest"
MTIME_NO_MANIFEST = "file time"
"""The submission time is the file's modification time: no --manifest was given."""
MTIME_NO_ROW = "file time, no manifest row"
"""A --manifest was given and has no row for this student and task: the file's modification time decides."""


CLASS_FILE = "class.json"


class OtherClass(ValueError):
    """The results folder belongs to the class of another submissions folder."""


def claim_results_folder(out: Path, root: Path) -> None:
    """Record which submissions folder `out` grades (results/class.json), or refuse another one."""
    path = out / CLASS_FILE
    here = str(root.resolve())
    if path.is_file():
        theirs = json.loads(path.read_text()).get("submissions")
        if theirs != here:
            raise OtherClass(f"{out} holds the records of the class in {theirs}, not of {here}: give each class (or "
                             "section) its own results folder with --out, or they share one ledger and its "
                             "attempt counts")
        return
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps({"submissions": here}, indent=2) + "\n")


def mtime_lateness_warning(planned: list[Planned], hw: Homework, have_manifest: bool) -> str:
    """A warning when, with no manifest, at least half of the files (and 3 or more) are late by their modification
    times: a class copied or unzipped after the deadline would be graded all late, 0 points past max_days."""
    if have_manifest or hw.deadline is None or not planned:
        return ""
    late = [p for p in planned if late_days(p.submitted_at, hw.deadline)]
    if len(late) < 3 or 2 * len(late) < len(planned):
        return ""
    return (f"warning: {len(late)} of {len(planned)} files are past the deadline by their modification times (no "
            f"--manifest): if the class was copied or unzipped after {hw.deadline.isoformat()}, every one of them "
            "is graded late. Pass --manifest with each file's submission time (student,task,submitted_at: a "
            "Gradescope or LMS export; docs/tas.md)")


def record_result(ledger: Ledger, out: Path, hw: Homework, version: str, p: Planned, r: TaskResult) -> str:
    """Write one graded job's student and staff JSON, then its ledger row: a batch that finds the row finds the
    files too (each file is replaced whole, so a kill leaves the old one or the new one, never a part)."""
    days = late_days(p.submitted_at, hw.deadline)
    factor = late_factor(days, hw)
    data = r.student_json()
    data.update({"homework": hw.id, "submitted_at": p.submitted_at.isoformat(), "time_source": p.time_source,
                 "late_days": days, "raw_score": r.score, "score": round(r.score * factor, 6),
                 "grader_version": version})
    if days:
        by = {MTIME_NO_MANIFEST: "; by the file's modification time (no --manifest gave a submission time)",
              MTIME_NO_ROW: "; by the file's modification time (the manifest has no row for this file)"}
        data["late"] = (f"{days} day(s) late: {factor:.0%} of the points kept "
                        f"(policy: -{hw.late_penalty_per_day:.0%} per day, 0 after {hw.late_max_days})"
                        + by.get(p.time_source, ""))
    # Every attempt keeps its own files (attempts/<task>.<sha>.json); <task>.json is the attempt the homework
    # counts, as the gradebook, results.json and the summary count it (the ledger decides, `publish_counted`).
    result_path = out / p.student / ATTEMPTS / f"{p.task.id}.{p.sha256[:12]}.json"
    result_path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(result_path.with_suffix(".staff.json"), json.dumps(r.staff_json(), indent=2) + "\n")
    write_atomic(result_path, json.dumps(data, indent=2) + "\n")
    row = dict(homework=hw.id, student=p.student, task=p.task.id, sha256=p.sha256,
               submitted_at=p.submitted_at.isoformat(), graded_at=r.graded_at, raw_score=r.score,
               score=data["score"], max_score=r.max_score, late_days=days, grader_version=version,
               result_path=str(result_path))
    # The counted copy first, then the ledger row: a batch killed in between regrades this file and publishes
    # again; one that finds the row finds every file it names.
    previous = ledger.attempts(hw.id, p.student, p.task.id)
    publish_counted(previous + [Attempt(id=max([a.id for a in previous], default=0) + 1, **row)], out, hw,
                    p.student, p.task.id)
    ledger.record(**row)
    return (f"  late: {data['late']}: score {data['score']:g} / {r.max_score:g}" if days else "")


ATTEMPTS = "attempts"
REFUSED = "refused.json"
"""results/<student>/refused.json: the tasks whose current file the batch did not grade, and why."""


def publish_counted(attempts: list[Attempt], out: Path, hw: Homework, student: str, task_id: str) -> None:
    """results/<student>/<task>.json (and .staff.json): a copy of the attempt the homework counts (best or last,
    among the ledger's `attempts`), which every other view reads: results.json, the summary. The staff file
    first: whoever finds the student file finds both."""
    chosen = counted(attempts, hw.counts)
    if chosen is None:
        return
    source = Path(chosen.result_path)
    target = out / student / f"{task_id}.json"
    for src, dst in ((source.with_suffix(".staff.json"), target.with_suffix(".staff.json")), (source, target)):
        if src.is_file() and src.resolve() != dst.resolve():
            write_atomic(dst, src.read_text())


def gradebook(ledger: Ledger, hw: Homework, students: list[str]) -> dict[str, dict]:
    rows = {}
    for student in students:
        row: dict = {"student": student}
        total, late = 0.0, False
        for task_id in hw.tasks:
            chosen = counted(ledger.attempts(hw.id, student, task_id), hw.counts)
            row[task_id] = round(chosen.score, 6) if chosen else ""
            total += chosen.score if chosen else 0.0
            late = late or bool(chosen and chosen.late_days)
        row["total"] = round(total, 6)
        row["late"] = "yes" if late else "no"
        rows[student] = row
    return rows


GRADESCOPE_STAFF = "gradescope.staff.json"
"""results/<student>/gradescope.staff.json: Gradescope's format with every test's name and message, hidden ones
included (Gradescope hides them by `visibility`): the file to upload, never to hand to a student. The student's
results.json beside it is the same without what a hidden test would tell (the student JSON's view)."""


def write_gradescope(out: Path, student: str, hw: Homework, board: list[leaderboard.Entry] | None = None) -> None:
    """Two files in Gradescope's autograder format, from the counted result of each task, points with the late rule
    applied (the student JSON's score): results/<student>/results.json, the student's view, which a TA may hand
    to the student (a test that is not public by its neutral name and points only, as in the student JSON), and
    gradescope.staff.json, the upload to Gradescope (names and messages from the staff JSON: Gradescope hides a
    test by its visibility). `board`: the student's leaderboard entries (its `leaderboard` field, and their
    pseudonym in the output)."""
    refused_path = out / student / REFUSED
    refused = json.loads(refused_path.read_text()) if refused_path.is_file() else {}
    intake_path = out / student / INTAKE
    intake = json.loads(intake_path.read_text()) if intake_path.is_file() else []
    for staff_view, name in ((False, "results.json"), (True, GRADESCOPE_STAFF)):
        tests, lines = [], []
        for task_id, points in hw.tasks.items():
            path = out / student / f"{task_id}.json"
            if not path.is_file():  # nothing graded for it: said, with its points, as Gradescope's run says it
                if task_id not in refused:
                    tests.append({"name": f"{task_id} / file", "score": 0.0, "max_score": points,
                                  "status": "failed", "visibility": "visible", "output_format": "md",
                                  "output": f"no file named `{task_id}.py` in your folder, nor a notebook defining "
                                            "its kernels: nothing was graded for this task"})
                    lines.append(f"- `{task_id}`: not submitted (0 / {points:g})")
                continue
            data = json.loads(path.read_text())
            staff = path.with_suffix(".staff.json")
            shown = json.loads(staff.read_text())["tests"] if staff_view and staff.is_file() else data.get("tests", [])
            factor = data["score"] / data["raw_score"] if data.get("raw_score") else 1.0
            files = {t["name"]: report.picture_file(out / student, t["picture"]) for t in shown if t.get("picture")}
            pictures = {name: path.read_bytes() for name, path in files.items() if path is not None}
            tests += gradescope.entries_of(task_id, shown, factor, pictures)
            # One lateness rule, said once: each test's points above are already scaled by the late factor (the
            # score the gradebook counts); the late entry and the line below say by how much, and from what.
            late = f"; {escape.md_inline(data['late'])}" if data.get("late") else ""
            lines.append(f"- `{task_id}`: {data['score']:g} / {data.get('max_score', points):g}{late}")
            if data.get("late"):
                tests.append({"name": f"{task_id} / late", "score": 0, "max_score": 0, "output": data["late"],
                              "output_format": "md", "visibility": "visible"})
        for task_id, entry in refused.items():  # `why` names the student's notebook file: data, not Markdown
            tests.append({"name": f"{task_id} / not graded", "score": 0, "max_score": 0,
                          "output": escape.md_inline(entry["why"]), "output_format": "md", "visibility": "visible"})
            lines.append(f"- `{task_id}`: this file was not graded: {escape.md_inline(entry['why'])}")
        for why in intake:  # names the student's files: data, not Markdown
            tests.append({"name": "submission / intake", "score": 0, "max_score": 0,
                          "output": escape.md_inline(why), "output_format": "md", "visibility": "visible"})
            lines.append(f"- {escape.md_inline(why)}")
        named = board and hw.leaderboard_names != "student"
        pseudonym = (f"Your name on the class's speed leaderboard: "
                     f"{leaderboard.pseudonym(leaderboard.secret_of(out), student)}." if named else "")
        data = gradescope.results_json(tests, "\n".join([f"**{escape.md_inline(hw.title)}**", "", *lines,
                                                         *(["", pseudonym] if pseudonym else [])]))
        if board:
            data["leaderboard"] = leaderboard.gradescope_entries(board)
        (out / student).mkdir(parents=True, exist_ok=True)
        write_atomic(out / student / name, json.dumps(data, indent=2) + "\n")


def write_gradebook(rows: dict[str, dict], hw: Homework, path: Path) -> None:
    text = io.StringIO(newline="")
    writer = csv.DictWriter(text, fieldnames=["student", *hw.tasks, "total", "late"])
    writer.writeheader()
    for student in sorted(rows):  # the student column is a folder's name: no formula (escape.csv_cell)
        writer.writerow({k: escape.csv_cell(v) for k, v in rows[student].items()})
    write_atomic(path, text.getvalue())


def write_summary(rows: dict[str, dict], hw: Homework, out: Path, path: Path, class_notes: list[str] | None = None,
                  told: dict[str, list[str]] | None = None) -> None:
    """Staff summary: score histogram and per-test pass rates over the latest results on disk, then what the grader
    decided that the TA did not say: manifest rows that matched nothing (`class_notes`), files not graded and why
    (`told`, per student), and every counted file whose lateness came from its modification time."""
    max_total = sum(hw.tasks.values())
    lines = [f"# {hw.title}", "", f"{len(rows)} student(s); maximum {max_total:g} points.", "", "## Scores", ""]
    bins = [0] * 10
    for row in rows.values():
        bins[min(9, int(10 * row["total"] / max_total)) if max_total else 0] += 1
    for i, count in enumerate(bins):
        lines.append(f"    {i * 10:3d}-{(i + 1) * 10:3d}%  {'#' * count} {count}")
    lines += ["", "## Pass rate per test", "", "| task | test | visibility | passed |", "| --- | --- | --- | --- |"]
    rates: dict[str, float] = {}
    for task_id in hw.tasks:
        tally: dict[str, list[int]] = {}
        shown: dict[str, str] = {}
        for student in rows:
            result = out / student / f"{task_id}.staff.json"  # the tests' own names (the student file's hide some)
            if not result.is_file():
                result = result.with_name(f"{task_id}.json")
            if not result.is_file():
                continue
            for t in json.loads(result.read_text()).get("tests", []):
                if t.get("outcome") == Outcome.NOT_RUN.label:  # not run on this device (a CPU speed test)
                    continue
                tally.setdefault(t["name"], [0, 0])
                shown[t["name"]] = t.get("visibility", "public")
                tally[t["name"]][0] += t["outcome"] == "passed"
                tally[t["name"]][1] += 1
        for name, (ok, n) in tally.items():
            lines.append(f"| {task_id} | {name} | {shown[name]} | {ok}/{n} |")
            rates[f"{task_id[:2]} {name}"] = ok / n
    decided = [f"- {escape.md_inline(n)}" for n in class_notes or []]
    for student in sorted(told or {}):
        decided += [f"- {escape.md_inline(student)}: {escape.md_inline(n)}" for n in (told or {})[student]]
    for student in sorted(rows):
        for task_id in hw.tasks:
            result = out / student / f"{task_id}.json"
            data = json.loads(result.read_text()) if result.is_file() else {}
            if data.get("late_days") and data.get("time_source", MANIFEST) != MANIFEST:
                decided.append(f"- {escape.md_inline(student)}: {task_id}: {escape.md_inline(data.get('late', ''))}")
    lines += ["", "## Decided by the grader", "",
              *(decided or ["Nothing: every file was graded by its task's name, and every time came from the "
                            "manifest."])]
    caught = []  # for a person to read: the judge's words, and the file, before a grade stands
    for student in sorted(rows):
        for task_id in hw.tasks:
            result = out / student / f"{task_id}.staff.json"
            data = json.loads(result.read_text()) if result.is_file() else {}
            found = data.get("caught") or {}
            if isinstance(found, dict) and found.get("why"):
                case = escape.md_inline(str(found.get("case")))
                caught.append(f"- {escape.md_inline(student)}: {task_id}, case {case}: "
                              f"{escape.md_inline(str(found['why']))}")
    lines += ["", "## Caught doing a task's work outside its kernels", "",
              "Each file below earned no points for the task's cases; read it before the grade stands.", "",
              *(caught or ["Nobody."])]
    png = plot(rows, rates, max_total, out / "summary.png")
    if png:
        lines[4:4] = [f"![scores and pass rates]({png.name})", ""]
    write_atomic(path, "\n".join(lines) + "\n")


def plot(rows: dict[str, dict], rates: dict[str, float], max_total: float, path: Path) -> Path | None:
    """The score histogram and the pass rate of every test, as a PNG; None when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(10, 3 + 0.18 * len(rates)),
                                   gridspec_kw={"height_ratios": [1, max(2, len(rates) / 8)]})
    ax1.hist([r["total"] for r in rows.values()], bins=10, range=(0, max_total or 1), color="#4477aa")
    ax1.set(title="Total scores", xlabel="points", ylabel="students")
    names = list(rates)[::-1]
    ax2.barh(names, [rates[n] for n in names], color="#66aa55")
    ax2.set(title="Pass rate per test", xlim=(0, 1))
    ax2.tick_params(axis="y", labelsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
