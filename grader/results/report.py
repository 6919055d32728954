"""What people read: a summary per graded task on stdout, and the JSON files."""

from __future__ import annotations

import json
from pathlib import Path

from grader.results import TaskResult, escape
from grader.results.outcome import Outcome


def device_label(env: dict) -> str:
    if env.get("device") == "cuda":
        return f"cuda ({env.get('gpu') or 'GPU'})"
    return "cpu (Triton interpreter, smaller sizes)"


def one_line(result: TaskResult) -> str:
    """A job in one line, for a class's console: who, which task, the score, and the tests that failed."""
    ok = (Outcome.PASSED.label, Outcome.NOT_RUN.label)
    failed = [escape.terminal(t.name) for t in result.tests if t.outcome not in ok and t.visibility == "public"]
    hidden = sum(1 for t in result.tests if t.outcome not in ok and t.visibility != "public")
    what = ", ".join(failed[:4]) + (f" and {len(failed) - 4} more" if len(failed) > 4 else "")
    if hidden:
        what += (", " if what else "") + f"{hidden} hidden"
    # the student is a folder's name: one line, no escape sequence (escape.terminal)
    return (f"{escape.terminal(result.student)}/{result.task}: {result.score:g} / {result.max_score:g}"
            + (f"  failed: {what}" if what else "")
            + (f"  (cases judged; {', '.join(result.pending)} not timed yet)" if result.pending else ""))


PRINTED_LINES = 20
"""The most lines of a failing test's printed output `summary` shows (the JSON keeps up to 2000 characters)."""


def summary(result: TaskResult, staff: bool = False, only: set[str] | None = None) -> str:
    """A graded task for a terminal. What a student controls (the submission's path, the messages that quote
    their exceptions, their worker's log) is escaped (escape.terminal): no escape sequence reaches the screen,
    and a message's lines after the first are indented under the message's column, so a newline in a student's
    text never starts a line where the grader's own lines (a test's PASS/FAIL, the score) start."""
    env = result.environment
    lines = [
        f"{result.task}  {escape.terminal(result.submission)}",
        f"  graded on {device_label(env)}, torch {env.get('torch')}, triton {env.get('triton')}",
    ]
    if env.get("toolchain_note"):  # grader/pipeline/toolchain.py: not the versions the course grades with
        lines.append(f"  {escape.terminal(env['toolchain_note'])}")
    for t in result.tests:
        if only is not None and t.name not in only:
            continue  # (the speed tests, after the first pass showed the rest)
        mark = {"passed": "PASS", "failed": "FAIL", "not_run": "SKIP"}.get(t.outcome, "ERROR")
        if t.name in result.pending:
            mark = "WAIT"
        pts = f"{t.points:g}/{t.max_points:g}"
        first, *rest = escape.terminal_lines(t.message or "")
        name = escape.terminal(t.name if t.visibility == "public" else f"{t.name} [{t.visibility}]")
        head = f"  {mark:5} {name:30} {pts:>10}" if len(name) <= 30 else f"  {mark:5} {name} {pts}"
        timed = (t.message or "").startswith("baseline ")  # a speed test shows its times even when it passes
        lines.append(head if mark == "PASS" and not timed else f"{head}  {first}")
        if mark not in ("PASS", "SKIP"):
            lines += [f"{'':50}{r}" for r in rest[:20]]
        if t.picture:
            lines.append(f"{'':50}picture: {escape.terminal(t.picture)}")
        if t.note:
            lines += [f"{'':50}note: {r}" for r in escape.terminal_lines(t.note)[:5]]
        if t.printed and mark not in ("PASS", "SKIP") and (t.visibility == "public" or staff):
            # the student's own output: marked as theirs on every line, escaped, bounded (PRINTED_LINES)
            said = escape.terminal_lines(t.printed)
            lines.append(f"{'':50}your code printed during this call (its output, not the grader's):")
            lines += [f"{'':50}> {r}" for r in said[:PRINTED_LINES]]
            if len(said) > PRINTED_LINES:
                lines.append(f"{'':50}> [... {len(said) - PRINTED_LINES} more lines]")
        if staff and t.staff:  # a traceback or log quotes the submission too
            lines += [f"{'':8}| {r}" for r in escape.terminal_lines(t.staff)[-30:]]
    shrunk = env.get("smaller_on_cpu") or {}
    if shrunk:
        lines.append("  smaller on the CPU than on CUDA: " + "; ".join(
            f"{case} ({', '.join(f'{k}={v}' for k, v in params.items())})" for case, params in shrunk.items()))
    if result.diagnosis:
        lines.append(f"  diagnosis: {result.diagnosis}")
    lines.append(f"  score: {result.score:g} / {result.max_score:g}"
                 + (f" so far: {', '.join(result.pending)} not timed yet" if result.pending else ""))
    if result.withheld:
        lines.append(f"  {result.withheld['message']}")
    if staff:
        lines.append(f"  worker: {result.staff.get('worker_exit', 'not started')}, "
                     f"{result.staff.get('worker_seconds', 0)} s")
    return "\n".join(lines)


def picture_file(folder: Path, ref: str) -> Path | None:
    """The picture a result names (`save_pictures`: a path in the staff JSON, its name in the student's), found in
    `folder` only, or None."""
    name = Path(ref).name
    path = folder / name
    return path if name.endswith(".png") and path.is_file() and not path.is_symlink() else None


def save_pictures(result: TaskResult, folder: Path) -> None:
    """Write each failing test's picture as `folder/<task>.<test>.png` and name it in the test's result."""
    for test in result.tests:
        png = result.pictures.get(test.name)
        if png:
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / f"{result.task}.{test.name}.png"
            path.write_bytes(png)
            test.picture = str(path)


def write_json(result: TaskResult, path: Path, staff_path: Path | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result.student_json(), indent=2) + "\n")
    if staff_path is not None:
        staff_path.write_text(json.dumps(result.staff_json(), indent=2) + "\n")
