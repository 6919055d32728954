"""Canvas: the gradebook as a CSV that Canvas's gradebook import takes (Grades > Import), `results/canvas.csv`.

A thin adapter over the gradebook's rows (grader/course/batch.py `gradebook`): the columns of a Canvas gradebook
export, then one for the homework, with the total the gradebook counts (points, late factors applied)::

    Student,ID,SIS User ID,SIS Login ID,Section,HW4: Triton INT8 (12345)
    Points Possible,,,,,14.5
    ann,,,ann,,12.25

Canvas matches a row to a student by `ID` (Canvas's own user id), `SIS User ID` or `SIS Login ID`; the grader
knows only the student's id (their folder's name, or the token roster's), so it goes into `SIS Login ID` (and
`Student`, which Canvas shows), and `ID`, `SIS User ID` and `Section` are left empty. The homework's column is its
title, followed by ` (ID)` when config.yaml gives the Canvas assignment's id (`canvas: {assignment_id: ID}`):
Canvas then fills that assignment; with the bare title it offers to create one, or to pick one. (Canvas reads any
header ending in a space and a number in parentheses as `Title (ID)`: a title ending like that needs the id.)

A student's id is hostile text: every cell goes through escape.csv_cell (no formula), and a `Student` cell that
Canvas would read as its "Points Possible" row (Canvas looks for those words anywhere in the first cell) has their
space replaced by a no-break space (Canvas matches the row by `SIS Login ID`, which keeps the id as it is).
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

from grader.config import Homework
from grader.results import escape
from grader.results.atomic import write_atomic

HEADER = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
"""The identity columns of a Canvas gradebook export, in Canvas's order; the homework's column follows."""

POINTS_POSSIBLE = "Points Possible"

_POINTS_POSSIBLE = re.compile(r"(points)\s+(possible)", re.IGNORECASE)


def column(hw: Homework) -> str:
    """The homework's column header: its title, and ` (ID)` with the Canvas assignment's id when configured."""
    return f"{hw.title} ({hw.canvas_assignment_id})" if hw.canvas_assignment_id is not None else hw.title


def number(value: float) -> str:
    """Points as a plain number: `12.25`, `2` (not `2.0`), at most 6 decimals, as the gradebook rounds them."""
    text = f"{float(value):.6f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def student_cell(student: str) -> str:
    """The `Student` cell: the id, no formula, and never one Canvas would take for its Points Possible row."""
    return escape.csv_cell(_POINTS_POSSIBLE.sub("\\1\u00a0\\2", student))


def table(rows: dict[str, dict], hw: Homework) -> list[list[str]]:
    """The CSV's rows: header, Points Possible, then one per student (sorted, as gradebook.csv)."""
    out = [[*HEADER, escape.csv_cell(column(hw))],
           [POINTS_POSSIBLE, "", "", "", "", number(sum(hw.tasks.values()))]]
    for student in sorted(rows):
        out.append([student_cell(student), "", "", escape.csv_cell(student), "", number(rows[student]["total"])])
    return out


def text(rows: dict[str, dict], hw: Homework) -> str:
    """canvas.csv's text (CRLF line ends, as csv writes them and Canvas exports them)."""
    buffer = io.StringIO(newline="")
    csv.writer(buffer).writerows(table(rows, hw))
    return buffer.getvalue()


def write(rows: dict[str, dict], hw: Homework, path: Path) -> None:
    """Write canvas.csv whole, beside gradebook.csv."""

    write_atomic(path, text(rows, hw))
