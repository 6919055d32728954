"""The diagnosis across cases (grader/judge/diagnosis.py): one line naming the case parameter that separates the
failing public cases from the passing ones, or nothing."""

from __future__ import annotations

from grader.judge.diagnosis import diagnose


def _cases(rows, keys=("n", "dtype")):
    return [({**dict(zip(keys, row[:-1])), "seed": i}, row[-1]) for i, row in enumerate(rows)]


def test_a_missing_tail_mask_reads_as_a_block_size():
    rows = [(1, "float32", False), (127, "float16", False), (1023, "float32", False), (1024, "float16", True),
            (1025, "float32", False), (2048, "float32", True), (4096, "float16", True)]
    assert diagnose(_cases(rows)) == ("the failing public cases are exactly those where n is not a multiple of "
                                      "1024 (4 failing, 3 passing)")  # the largest power of two that splits


def test_a_value_comes_before_divisibility_and_thresholds():
    rows = [(1, "float32", True), (127, "float16", False), (1023, "float32", True), (1024, "float16", False),
            (1025, "float32", True)]
    assert diagnose(_cases(rows)) == "the failing public cases are exactly those where dtype is float16 (2 failing, " \
                                     "3 passing)"


def test_a_threshold_when_nothing_else_splits():
    rows = [(3, True), (70000, False), (5, True), (90001, False), (7, True)]
    assert diagnose(_cases(rows, keys=("n",))) == ("the failing public cases are exactly those where n >= 70000 "
                                                   "(2 failing, 3 passing)")


def test_no_diagnosis_without_an_exact_rule_or_enough_cases():
    assert diagnose(_cases([(1, "float32", False), (2, "float32", True), (4, "float32", True)])) is None  # one fails
    assert diagnose(_cases([(1, "a", False), (2, "a", True), (3, "a", True), (4, "a", False)])) is None  # nothing
    # the seed differs in every case: it would split any table, and explains nothing
    assert diagnose([({"seed": 1}, False), ({"seed": 2}, False), ({"seed": 3}, True), ({"seed": 4}, True)]) is None


def test_a_result_carries_its_diagnosis_to_students():
    """Graded end to end (puzzle 2's first_block_only.py writes only the first block): the result, the report and
    the student JSON carry the line its task.yaml declares; the reference gets none."""
    from grader.config import ROOT, load_config, load_task
    from grader.pipeline.grading import Job, grade_jobs
    from grader.results import report

    task = load_task(ROOT / "tasks" / "puzzle02_constant_add_block")
    wrong, right = grade_jobs([Job(task, task.folder / "wrong" / "first_block_only.py", "w"),
                               Job(task, task.folder / "solution.py", "r")], load_config(), "cpu", workers=2)
    declared = task.wrong["first_block_only.py"].diagnosis
    assert declared and declared in wrong.diagnosis, wrong.diagnosis
    assert f"diagnosis: {wrong.diagnosis}" in report.summary(wrong)
    assert wrong.student_json()["diagnosis"] == wrong.diagnosis
    assert right.diagnosis == "" and "diagnosis" not in report.summary(right)
