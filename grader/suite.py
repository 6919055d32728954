"""The tests pytest runs for one (submission, task): two gates, the autotune rule, one test per case.

They run in the judge process with the worker's results already on disk (see grader/grading.py), and every
check here reads data, never the submission. Points and the student-facing message of each test go into the
JSON report through pytest-json-report's `json_metadata` fixture.
"""

from __future__ import annotations

import pytest

from grader import judge


def _finish(json_metadata, points: float, verdict: judge.Verdict) -> None:
    json_metadata["max_points"] = points
    json_metadata["message"] = verdict.message
    json_metadata["staff"] = verdict.staff
    if not verdict.ok:
        pytest.fail(verdict.message, pytrace=False)


def test_gate(grading, gate, json_metadata):
    problems = grading.static.imports if gate == "imports" else grading.static.signatures
    verdict = judge.Verdict(not problems, "\n".join(problems) if problems else "ok")
    _finish(json_metadata, 0.0, verdict)


def test_autotune(grading, json_metadata):
    _finish(json_metadata, grading.task.autotune_points, grading.autotune_verdict())


def test_case(grading, case_index, json_metadata):
    case = grading.task.cases[case_index]
    _finish(json_metadata, case.points, grading.case_verdict(case_index))
