"""A class of 20 of which 5 are hostile, graded for real (`python -m grader batch` on the CPU, then `similarity`):
the 15 others are graded in full, each hostile one gets a result naming what failed, every report is written, and
the exit code is 3 ("some students' files could not be read or graded"). Cheap: one puzzle, the honest students
hand in copies of the reference (identical files are graded once), so about three workers run in all."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
import time
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
P01 = "puzzle01_constant_add"
KEY = ROOT / "tasks" / P01 / "solution.py"
BOMB = "x = " + "+".join(["1"] * 20000)
ESCAPES = "\x1b]0;title\x07\x1b[2K\x1b[1A PASS 2/2"
ODD_NAME = '<img src=x onerror=alert(1)>\n=HYPERLINK("http:evil.example","x")'
"""Markup, a spreadsheet formula and a newline in one folder name (a folder name cannot hold a `/`)."""


def _hostile_class(root: Path) -> dict[str, str]:
    """15 honest students and 5 hostile ones; returns each hostile folder's name by what it does."""
    key = KEY.read_text()
    for k in range(15):
        (root / f"honest{k:02d}").mkdir(parents=True)
        (root / f"honest{k:02d}" / f"{P01}.py").write_text(key)
    hostile = {"notebook_bomb": "nbbomb", "py_bomb": "pybomb", "link": "linker", "name": ODD_NAME,
               "escapes": "escaper"}
    for name in hostile.values():
        (root / name).mkdir()
    nb = nbformat.v4.new_notebook()  # the kernel and the bomb in one cell: that cell is needed, and cannot parse
    nb.cells = [nbformat.v4.new_markdown_cell("# puzzles"), nbformat.v4.new_code_cell(key + "\n" + BOMB)]
    (root / "nbbomb" / "puzzles.ipynb").write_text(nbformat.writes(nb))
    (root / "pybomb" / f"{P01}.py").write_text(key + "\n" + BOMB + "\n")
    (root / "linker" / f"{P01}.py").symlink_to(KEY)
    (root / ODD_NAME / f"{P01}.py").write_text(key)
    (root / "escaper" / f"{P01}.py").write_text(key + f"\nraise RuntimeError({ESCAPES!r})\n")
    return hostile


def _grader(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "grader", *args], cwd=ROOT, capture_output=True, text=True,
                          errors="replace", timeout=timeout)


def test_a_class_with_five_hostile_students(tmp_path):
    root = tmp_path / "subs"
    hostile = _hostile_class(root)
    out = tmp_path / "results"
    start = time.monotonic()
    run = _grader("batch", str(root), "--homework", "puzzles", "--out", str(out), "--device", "cpu")
    graded_s = time.monotonic() - start
    assert run.returncode == 3, run.stdout[-3000:] + run.stderr[-3000:]

    book = {r["student"]: r for r in csv.DictReader(io.StringIO((out / "gradebook.csv").read_text()))}
    odd_id = ascii(ODD_NAME)[1:-1]  # the printable id of the odd folder (grader/gates/intake.py student_id)
    assert len(book) == 20 and odd_id in book
    for k in range(15):
        assert float(book[f"honest{k:02d}"][P01]) == 1.0, book[f"honest{k:02d}"]
    assert float(book[odd_id][P01]) == 1.0  # an odd name is no reason to lose points

    def result(student: str) -> dict:
        return json.loads((out / student / f"{P01}.json").read_text())

    def says(student: str, text: str) -> bool:
        return any(text in (t.get("message") or "") for t in result(student)["tests"])

    assert result("nbbomb")["score"] == 0 and says("nbbomb", "nested too deep")
    assert "code cell 1" in json.loads((out / "nbbomb" / "intake.json").read_text())[0]
    assert result("pybomb")["score"] == 0 and says("pybomb", "nested too deep")
    assert result("linker")["score"] == 0 and says("linker", "is a symbolic link")
    assert result("escaper")["score"] == 0 and says("escaper", "RuntimeError")
    for student in [*(f"honest{k:02d}" for k in range(15)), "nbbomb", "pybomb", "linker", "escaper", odd_id]:
        assert (out / student / "results.json").is_file(), student
    assert (out / "summary.md").is_file() and (out / "ledger.sqlite").is_file()
    assert not any("\n" in p.name or "\x1b" in p.name for p in out.rglob("*"))  # no raw name reached a path
    assert set(hostile) == {"notebook_bomb", "py_bomb", "link", "name", "escapes"}

    start = time.monotonic()
    sim = _grader("similarity", str(root), "--homework", "puzzles", "--out", str(tmp_path / "sim"))
    similarity_s = time.monotonic() - start
    assert sim.returncode == 3, sim.stderr[-3000:]  # the link and the notebook were not compared, and said
    rows = list(csv.DictReader(io.StringIO((tmp_path / "sim" / "similarity_puzzles.csv").read_text())))
    compared = {r["student_a"] for r in rows} | {r["student_b"] for r in rows}
    assert {"pybomb", "escaper", odd_id, "honest00"} <= compared and "linker" not in compared
    html = (tmp_path / "sim" / "similarity_puzzles.html").read_text()
    assert "Not compared" in html and "linker" in html
    print(f"batch {graded_s:.1f} s, similarity {similarity_s:.1f} s")
    assert graded_s < 120  # ~15 s on the 2-core machine: the honest copies are graded once
