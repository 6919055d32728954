"""canvas.csv (grader/course/canvas.py): the gradebook's totals as Canvas's gradebook import reads them, and its
config.yaml key. That batch and the server write it: tests/test_batch.py, tests/test_server.py."""

import csv
import io
from pathlib import Path

import pytest

from grader.config import ConfigError, Homework, load_config
from grader.course import canvas

ROOT = Path(__file__).resolve().parent.parent
HW = Homework(id="hw", title="HW4: INT8", tasks={"a": 2.0, "b": 3.5})


def _read(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text, newline="")))


def _row(student: str, total: float) -> dict:
    return {"student": student, "a": "", "b": "", "total": total, "late": "no"}


def test_header_points_possible_and_totals_as_plain_numbers():
    rows = {s: _row(s, t) for s, t in (("bob", 5.5), ("ann", 2.0), ("cid", 1 / 3), ("dan", 0.0))}
    text = canvas.text(rows, HW)
    assert text.splitlines()[:2] == ["Student,ID,SIS User ID,SIS Login ID,Section,HW4: INT8",
                                     "Points Possible,,,,,5.5"]
    assert "\r\n" in text  # csv's line ends, as Canvas's own export
    assert _read(text)[2:] == [["ann", "", "", "ann", "", "2"], ["bob", "", "", "bob", "", "5.5"],
                               ["cid", "", "", "cid", "", "0.333333"], ["dan", "", "", "dan", "", "0"]]
    with_id = Homework(id="hw", title="HW4: INT8", tasks={"a": 2.0}, canvas_assignment_id=12345)
    assert _read(canvas.text({}, with_id)) == [[*canvas.HEADER, "HW4: INT8 (12345)"],
                                               ["Points Possible", "", "", "", "", "2"]]


@pytest.mark.parametrize("student", ["=1+2", "+SUM(A1)", "-2+3", "@cmd", "\tx", "\rx", '=HYPERLINK("x","y")'])
def test_a_student_id_that_reads_as_a_formula_is_text(student):
    (row,) = _read(canvas.text({student: _row(student, 1.0)}, HW))[2:]
    assert row == ["'" + student, "", "", "'" + student, "", "1"]


@pytest.mark.parametrize("student", ["Points Possible", "x Points  Possible y", "points possible"])
def test_no_student_row_reads_as_the_points_possible_row(student):
    """Canvas takes any row whose first cell holds `Points Possible` for the points row: a student named so would
    set the assignment's points and lose their own grade. Their Student cell gets a no-break space; SIS Login ID,
    which Canvas matches them by, keeps their id."""
    (row,) = _read(canvas.text({student: _row(student, 4.0)}, HW))[2:]
    assert "Points Possible" not in row[0] and "points possible" not in row[0].lower()
    assert row[0].replace("\u00a0", " ").split() == student.split()
    assert row[3:] == [student, "", "4"]


def test_config_yaml_names_the_canvas_assignment(tmp_path):
    base = (ROOT / "config.yaml").read_text()
    assert "    #   canvas: {assignment_id: 12345}\n" in base  # documented, and off
    cfg = load_config(ROOT / "config.yaml")
    assert all(hw.canvas_assignment_id is None for hw in cfg.homeworks.values())
    path = tmp_path / "config.yaml"
    path.write_text(base.replace("    #   canvas: {assignment_id: 12345}\n", "    canvas: {assignment_id: 12345}\n"))
    cfg = load_config(path)
    assert cfg.homeworks["hw4_int8"].canvas_assignment_id == 12345
    assert cfg.homeworks["puzzles"].canvas_assignment_id is None
    assert canvas.column(cfg.homeworks["hw4_int8"]) == "HW4: Triton INT8 (quantization and matmul) (12345)"
    path.write_text(base.replace("    #   canvas: {assignment_id: 12345}\n", "    canvas: {assignment_id: null}\n"))
    assert load_config(path).homeworks["hw4_int8"].canvas_assignment_id is None
    for value, said in (('{assignment_id: "12345"}', "canvas.assignment_id: Input should be a valid integer"),
                        ("{assignment_id: 0}", "canvas.assignment_id: Input should be greater than or equal to 1"),
                        ("{assignmentid: 1}", "canvas.assignmentid: unknown key; known: assignment_id")):
        path.write_text(base.replace("    #   canvas: {assignment_id: 12345}\n", f"    canvas: {value}\n"))
        with pytest.raises(ConfigError) as err:
            load_config(path)
        assert f"homeworks.hw4_int8.{said}" in str(err.value), err.value
