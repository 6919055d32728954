"""Intake follows no link, and no student's bytes stop the class (issue "Hostile input, everywhere a student's
bytes go"; grader/gates/intake.py). Grading itself is stubbed: a file earns full marks when its bytes are the
answer key's (what a link to tasks/<task>/solution.py gave on the old code), so each test is about what the
intake hands on, and runs in well under a second. tests/test_hostile_class.py grades a hostile class for real."""

from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path

import nbformat
import pytest

from grader import cli
from grader.config import ROOT, load_config, load_task
from grader.course import batch, gradescope, similarity
from grader.gates import intake
from grader.gates.intake import IntakeError, read_submitted, scan
from grader.gates.notebook import NotebookFolder
from grader.gates.static import check_source
from grader.pipeline import grading
from grader.pipeline.grading import TaskResult

P01 = "puzzle01_constant_add"
KEY = ROOT / "tasks" / P01 / "solution.py"
BOMB = "x = " + "+".join(["1"] * 20000) + "\n"
"""A 20,000-term sum: Python's parser raises RecursionError on it (the issue's notebook that stopped a class)."""


def _notebook(*cells: str) -> str:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    return nbformat.writes(nb)


class KeyGrader:
    """grade_jobs' stand-in: full marks for the answer key's bytes, 0 otherwise; remembers what it was handed."""

    def __init__(self) -> None:
        self.seen: list = []

    def __call__(self, jobs, cfg, device, workers=0, on_result=None, **_):
        out = []
        for job in jobs:
            self.seen.append((job.student, job.task.id))
            score = job.task.points if job.read() == KEY.read_bytes() else 0.0
            out.append(TaskResult(task=job.task.id, student=job.student, submission=str(job.submission), score=score,
                                  max_score=job.task.points, tests=[], checks={}, environment={},
                                  submission_sha256=job.sha256, graded_at="2026-11-01T00:00:00+00:00"))
            if on_result:
                on_result(out[-1])
        return out


@pytest.fixture
def key_grader(monkeypatch) -> KeyGrader:
    fake = KeyGrader()
    monkeypatch.setattr(grading, "grade_jobs", fake)
    monkeypatch.setattr(grading, "grade_jobs", fake)  # gradescope.run imports it from there
    monkeypatch.setattr(batch, "grader_version", lambda *args: "v")
    return fake


def _class(tmp_path: Path) -> Path:
    """ann: an honest copy of the key; bob: his file a link to the key; cat: her folder a link to a folder holding
    a copy of it; dan: a notebook that is a link to a notebook defining the kernel; eve: a folder whose
    sub-folder is a link (a symlinked parent directory)."""
    root = tmp_path / "subs"
    for s in ("ann", "bob", "dan", "eve"):
        (root / s).mkdir(parents=True)
    (root / "ann" / f"{P01}.py").write_bytes(KEY.read_bytes())
    (root / "bob" / f"{P01}.py").symlink_to(KEY)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / f"{P01}.py").write_bytes(KEY.read_bytes())
    (elsewhere / "nb.ipynb").write_text(_notebook(KEY.read_text()))
    (root / "cat").symlink_to(elsewhere, target_is_directory=True)
    (root / "dan" / "nb.ipynb").symlink_to(elsewhere / "nb.ipynb")
    (root / "eve" / "sub").symlink_to(elsewhere, target_is_directory=True)
    return root


def test_batch_follows_no_link(tmp_path, key_grader):
    """Old code (be93a1e): bob 1/1 through the link to the answer key, cat 1/1 through her linked folder, dan 1/1
    through the linked notebook; exit 0. Now: only ann is graded; bob's result says his file is a link; cat and
    dan are told why nothing was graded; exit 3 (some students failed)."""
    root = _class(tmp_path)
    out = tmp_path / "results"
    code = cli.main(["batch", str(root), "--homework", "puzzles", "--out", str(out), "--device", "cpu"])
    assert key_grader.seen == [("ann", P01)]
    gradebook = {r.split(",")[0]: r.split(",")[1] for r in (out / "gradebook.csv").read_text().splitlines()[1:]}
    assert gradebook == {"ann": "1.0", "bob": "0.0", "cat": "", "dan": "", "eve": ""}
    bob = json.loads((out / "bob" / f"{P01}.json").read_text())
    assert bob["score"] == 0 and all(f"{P01}.py is a symbolic link: submissions are graded only as regular files"
                                     in t["message"] for t in bob["tests"])
    assert "your folder cat is a symbolic link" in json.loads((out / "cat" / "intake.json").read_text())[0]
    assert "nb.ipynb is a symbolic link" in json.loads((out / "dan" / "intake.json").read_text())[0]
    outputs = [t["output"] for t in json.loads((out / "dan" / "results.json").read_text())["tests"]]
    assert any("nb.ipynb is a symbolic link" in o.replace("\\", "") for o in outputs)  # Markdown, escaped
    assert code == cli.SOME_FAILED == 3
    # a rerun grades nothing new and says the same: the refusal is not forgotten once resumed
    key_grader.seen.clear()
    assert cli.main(["batch", str(root), "--homework", "puzzles", "--out", str(out), "--device", "cpu"]) == 3
    assert key_grader.seen == []


def test_grade_dir_follows_no_link(tmp_path, key_grader):
    """Old code: grade-dir graded bob's link 1/1 and exited 0. Now: 0 points with the reason, exit 3."""
    root = _class(tmp_path)
    out = tmp_path / "checks"
    code = cli.main(["grade-dir", str(root / "ann"), str(root / "bob"), str(root / "dan"), "--out", str(out),
                     "--device", "cpu"])
    assert key_grader.seen == [("ann", P01)]
    bob = json.loads((out / "bob" / f"{P01}.json").read_text())
    assert bob["score"] == 0 and "is a symbolic link" in bob["tests"][0]["message"]
    assert code == 3


def test_grade_follows_no_link_into_the_grader(tmp_path, key_grader, capsys):
    """`grade` on a student's own link is theirs to make, but never into the grader's tasks/ (old code: 1/1,
    exit 0, by grading the answer key)."""
    link = tmp_path / f"{P01}.py"
    link.symlink_to(KEY)
    assert cli.main(["grade", "--task", P01, str(link), "--device", "cpu", "--json",
                     str(tmp_path / "r" / "x.json")]) == 2
    assert key_grader.seen == [] and "symbolic link into the grader's own files" in capsys.readouterr().err
    own = tmp_path / "mine.py"
    own.write_text("# mine\n")
    mine = tmp_path / "link_to_mine.py"
    mine.symlink_to(own)
    assert cli.main(["grade", "--task", P01, str(mine), "--device", "cpu", "--json",
                     str(tmp_path / "r" / "y.json")]) == 1  # graded (0 points: not the key)
    assert len(key_grader.seen) == 1


def test_gradescope_run_follows_no_link(tmp_path, key_grader):
    """Old code: a link at any depth of submission/ (`unzip` keeps them) earned 1/1. Now its task's entry is 0
    with the reason; a linked folder is not walked; other links are listed as ignored."""
    sub = tmp_path / "submission"
    (sub / "deep" / "er").mkdir(parents=True)
    (sub / "deep" / "er" / f"{P01}.py").symlink_to(KEY)
    (sub / "tasks").symlink_to(ROOT / "tasks", target_is_directory=True)
    (sub / "passwd").symlink_to("/etc/passwd")
    results = tmp_path / "results" / "results.json"
    assert gradescope.run("puzzles", sub, results, device="cpu") == 0
    assert key_grader.seen == []
    data = json.loads(results.read_text())
    entry = next(t for t in data["tests"] if t["name"] == f"{P01} / file")
    assert entry["score"] == 0 and "deep/er/puzzle01_constant_add.py is a symbolic link" in entry["output"]
    assert "passwd is a symbolic link" in data["output"] and data["score"] == 0


def test_gradescope_run_bounds_what_an_unpacked_upload_holds(tmp_path, key_grader):
    """Old code: no bound. Now: a file over the size limit is refused unread; an upload of more entries than
    MAX_ENTRIES, or deeper than MAX_DEPTH, is cut with a note; a FIFO is refused without blocking."""
    sub = tmp_path / "submission"
    sub.mkdir()
    (sub / f"{P01}.py").write_bytes(b"#" * (intake.MAX_SOURCE_BYTES + 1))
    many = sub / "many"
    many.mkdir()
    for k in range(intake.MAX_ENTRIES + 5):
        (many / f"f{k}.txt").touch()
    deep = sub
    for _ in range(intake.MAX_DEPTH + 2):
        deep = deep / "d"
    deep.mkdir(parents=True)
    os.mkfifo(sub / "puzzle02_constant_add_block.py")
    results = tmp_path / "results" / "results.json"
    assert gradescope.run("puzzles", sub, results, device="cpu") == 0
    data = json.loads(results.read_text())
    outputs = {t["name"]: t["output"] for t in data["tests"]}
    assert "over the grader's limit" in outputs[f"{P01} / file"]
    assert "not a regular file" in outputs["puzzle02_constant_add_block / file"]
    assert f"more than {intake.MAX_ENTRIES} files and folders" in data["output"]
    assert key_grader.seen == []


def test_read_submitted_refuses_links_anywhere_and_escapes(tmp_path):
    """The reader itself: a link as the file, as a folder above it, as the student's folder; `..` and absolute
    names; and it reads a regular file."""
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "a.py").write_text("x = 1\n")
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "dir").symlink_to(tmp_path / "real", target_is_directory=True)
    (tmp_path / "s" / "a.py").symlink_to(tmp_path / "real" / "a.py")
    (tmp_path / "s" / "ok.py").write_text("y = 2\n")
    (tmp_path / "linked").symlink_to(tmp_path / "real", target_is_directory=True)
    assert read_submitted(tmp_path / "s", "ok.py") == b"y = 2\n"
    for rel, why in [("a.py", "a.py is a symbolic link"), ("dir/a.py", "dir is a symbolic link"),
                     ("../real/a.py", "not a path inside your folder"), ("/etc/passwd", "not a path inside")]:
        with pytest.raises(IntakeError, match=why):
            read_submitted(tmp_path / "s", rel)
    with pytest.raises(IntakeError, match="your folder linked is a symbolic link"):
        read_submitted(tmp_path / "linked", "a.py")
    listed = scan(tmp_path / "s", deep=True)
    assert listed.files == [Path("ok.py")] and sorted(map(str, listed.links)) == ["a.py", "dir"]


def test_notebook_folder_follows_no_link(tmp_path):
    """Old code: the linked notebook was read and graded. Now: not read, and said."""
    (tmp_path / "elsewhere.ipynb").write_text(_notebook(KEY.read_text()))
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "nb.ipynb").symlink_to(tmp_path / "elsewhere.ipynb")
    folder = NotebookFolder(tmp_path / "s")
    assert folder.for_task(load_task(ROOT / "tasks" / P01)) is None
    assert folder.problems and "nb.ipynb is a symbolic link" in folder.problems[0]


# ------------------------------------------------------------------------------- no student's bytes stop the class


def test_a_recursion_bomb_in_a_notebook_fails_its_student_only(tmp_path, key_grader):
    """Old code: RecursionError out of `batch` (exit 1, no gradebook, no result for anyone, on every rerun) and out
    of `grade-dir`. Now: ann is graded, the bomber's result says what failed, exit 3."""
    root = tmp_path / "subs"
    (root / "ann").mkdir(parents=True)
    (root / "ann" / f"{P01}.py").write_bytes(KEY.read_bytes())
    (root / "zed").mkdir()
    (root / "zed" / "nb.ipynb").write_text(_notebook(BOMB))
    out = tmp_path / "results"
    assert cli.main(["batch", str(root), "--homework", "puzzles", "--out", str(out), "--device", "cpu"]) == 3
    assert key_grader.seen == [("ann", P01)]
    assert (out / "gradebook.csv").is_file() and (out / "summary.md").is_file()
    why = json.loads((out / "zed" / "intake.json").read_text())
    assert "code cell 1" in why[0] and "nested too deep" in why[0]
    assert cli.main(["grade-dir", str(root / "ann"), str(root / "zed"), "--out", str(tmp_path / "c"),
                     "--device", "cpu"]) == 3


def test_a_recursion_bomb_in_a_py_does_not_stop_the_similarity_report(tmp_path):
    """Old code: RecursionError out of `similarity` (exit 1, no report for the class). Now: the report is written,
    the bomb's file compared like any other."""
    root = tmp_path / "subs"
    for s, text in (("ann", KEY.read_text()), ("bob", KEY.read_text()), ("zed", BOMB)):
        (root / s).mkdir(parents=True)
        (root / s / f"{P01}.py").write_text(text)
    cfg = load_config()
    tasks = {P01: load_task(ROOT / "tasks" / P01)}
    csv_path, html_path = similarity.similarity_report(root, cfg.homeworks["puzzles"], tasks, tmp_path / "sim")
    rows = csv_path.read_text().splitlines()
    assert len(rows) == 4 and html_path.is_file()


@pytest.mark.parametrize("source, why", [
    (BOMB, "nested too deep"),
    ("x = 1\0\n", "null bytes"),
    ("x = " + "(" * 5000 + ")" * 5000 + "\n", "too many nested parentheses"),
    ("x = " + "-" * 200000 + "1\n", "cannot be checked"),
    ("def f():\n" + "".join("    " * (k + 1) + "if x:\n" for k in range(120)) + "    " * 121 + "pass\n",
     "too many levels of indentation"),
])
def test_the_static_check_reports_what_it_cannot_read(source, why):
    """Old code: RecursionError (and MemoryError) out of check_source for the first and fourth; now every one is a
    failed gate whose message says why."""
    report = check_source(source, load_task(ROOT / "tasks" / P01), [], "s.py")
    assert not report.ok and why in report.imports[0] and len(report.imports[0]) < 600


def test_odd_folder_names_get_printable_ids_and_every_report(tmp_path, key_grader):
    """A folder named with a newline, a terminal escape, markup, a formula, or a byte that is not UTF-8: graded
    under a printable id (old code: the gradebook was written with the raw name, a newline splitting its row)."""
    root = tmp_path / "subs"
    names = ["new\nline", "esc\x1b]0;t\x07", "<img src=x onerror=alert(1)>", '=HYPERLINK("http:x","y")']
    for n in names:
        (root / n).mkdir(parents=True)
        (root / n / f"{P01}.py").write_bytes(KEY.read_bytes())
    raw = os.fsencode(root) + b"/bad\xffname"
    os.mkdir(raw)
    with open(raw + f"/{P01}.py".encode(), "wb") as fh:
        fh.write(KEY.read_bytes())
    out = tmp_path / "results"
    assert cli.main(["batch", str(root), "--homework", "puzzles", "--out", str(out), "--device", "cpu"]) == 0
    text = (out / "gradebook.csv").read_text()
    assert len(text.splitlines()) == 6  # a header and one line per student: no name split a row
    ids = sorted(r["student"] for r in csv.DictReader(io.StringIO(text)))
    assert "new\\nline" in ids and "bad\\udcffname" in ids and "esc\\x1b]0;t\\x07" in ids
    assert all(json.loads((out / i / f"{P01}.json").read_text())["score"] == 1 for i in
               ("new\\nline", "bad\\udcffname", "<img src=x onerror=alert(1)>"))
    assert len(key_grader.seen) == 5


def test_the_notes_on_files_not_graded_quote_hostile_names(tmp_path):
    """What intake.task_files says about a file it does not grade names the student's file: a name with a newline,
    a terminal escape or Markdown is quoted (`shown`), so it neither starts a line nor moves a TA's cursor."""
    from grader.gates.intake import task_files

    folder = tmp_path / "s"
    folder.mkdir()
    for name in ("evil\n- 10_quantize_global_int8: 2 of 2.py", "\x1b]0;title\x07link.zip", "![img](x).txt"):
        (folder / name).write_text("x")
    notes = task_files(folder, ["10_quantize_global_int8"]).notes
    assert len(notes) == 3 and not any("\n" in n or "\x1b" in n or "\x07" in n for n in notes), notes
    assert any(n.startswith("'evil\\n- 10_quantize_global_int8: 2 of 2.py': not graded") for n in notes), notes
