"""The tests pytest runs for one (submission, task): two gates, the autotune rule, one test per case, one per
speed test.

They run in the judge process with the worker's results already on disk (see grader/pipeline/grading.py), and every
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
    if verdict.metric:
        json_metadata["metric"] = verdict.metric
    if verdict.printed:
        json_metadata["printed"] = verdict.printed
    if verdict.note:
        json_metadata["note"] = verdict.note
    if not verdict.ok:
        pytest.fail(verdict.message, pytrace=False)


def test_gate(grading, gate, json_metadata):
    problems = grading.static.imports if gate == "imports" else grading.static.signatures
    verdict = judge.Verdict(not problems, "\n".join(problems) if problems else "ok")
    _finish(json_metadata, 0.0, verdict)


def test_autotune(grading, json_metadata):
    if not grading.task.has_autotune_test:  # no kernel to autotune, no points for it: no such test in the result
        json_metadata["max_points"] = 0.0
        json_metadata["message"] = json_metadata["staff"] = ""
        pytest.skip("this task grades no autotuning")
    _finish(json_metadata, grading.task.autotune_points, grading.autotune_verdict())


def test_case(grading, case_index, json_metadata):
    case = grading.task.cases[case_index]
    _finish(json_metadata, case.points, grading.case_verdict(case_index))


def test_perf(grading, perf_index, json_metadata):
    test = grading.task.perf[perf_index]
    if grading.device not in test.devices:
        json_metadata["max_points"] = 0.0
        json_metadata["message"] = (f"not run on {grading.device}: this speed test runs on "
                                    f"{', '.join(test.devices)} only (0 of 0 points here)")
        json_metadata["staff"] = ""
        pytest.skip(json_metadata["message"])
    _finish(json_metadata, test.points, grading.perf_verdict(perf_index))
