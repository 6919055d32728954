"""The course's toolchain (config.yaml `toolchain`, grader/pipeline/toolchain.py): a result graded with other torch
or triton releases says so, and a failure that a known API difference between supported triton versions causes
names the versions (grader/protocol/known_errors.py). Proven by a block-pointer kernel
(tests/files/puzzle02_block_ptr.py), right under triton 3.6 and refused by triton 3.9's NotImplementedError."""

from __future__ import annotations

from pathlib import Path

import pytest
import triton
import yaml

from grader.config import ROOT, ConfigError, load_config, load_task
from grader.pipeline import toolchain
from grader.pipeline.grading import Job, grade_jobs
from grader.results import report

BLOCK_PTR = Path(__file__).parent / "files" / "puzzle02_block_ptr.py"


def test_releases_compare_by_what_the_course_names():
    assert toolchain.release("2.11.0+cu130") == (2, 11, 0)
    assert toolchain.same_release("3.6.0", "3.6") and toolchain.same_release("3.6.2", "3.6")
    assert not toolchain.same_release("3.9.0", "3.6") and not toolchain.same_release("3.6.1", "3.6.0")
    assert not toolchain.same_release(None, "3.6")
    course = {"torch": "2.11.0", "triton": "3.6.0"}
    assert toolchain.note({"torch": "2.11.0+cu130", "triton": "3.6.0"}, course) == ""
    line = toolchain.note({"torch": "2.13.0+cpu", "triton": "3.9.0"}, course)
    assert "graded with torch 2.13.0+cpu, triton 3.9.0" in line
    assert "course grades with torch 2.11.0, triton 3.6.0" in line
    assert toolchain.note({"torch": "2.13.0", "triton": "3.9.0"}, {}) == ""  # a course that names none


def test_the_course_toolchain_is_validated(tmp_path):
    raw = yaml.safe_load((ROOT / "config.yaml").read_text())
    assert load_config().toolchain == {k: str(v) for k, v in raw["toolchain"].items()}
    for bad in ({"torch": "latest", "triton": "3.6"}, {"torch": "2.11"}, {"torch": "2.11", "triton": "3.6",
                                                                         "cuda": "13"}):
        (tmp_path / "config.yaml").write_text(yaml.safe_dump({**raw, "toolchain": bad}))
        with pytest.raises(ConfigError, match="toolchain"):
            load_config(tmp_path / "config.yaml")


def test_a_block_pointer_kernel_is_graded_with_the_version_named():
    """Right under triton 3.6 (the H100 box's, and a kit's); under 3.9 every case fails, and each message and the
    result's environment say which triton graded it and which the course grades with."""
    task = load_task(ROOT / "tasks" / "puzzle02_constant_add_block")
    cfg = load_config()
    (result,) = grade_jobs([Job(task, BLOCK_PTR, "s")], cfg, "cpu", workers=1)
    cases = [t for t in result.tests if t.name in {c.id for c in task.cases}]
    if toolchain.same_release(triton.__version__, "3.6"):
        assert result.score == result.max_score, report.summary(result)
        assert not any("cannot grade it here" in t.message for t in result.tests)
    else:
        assert result.score == 0 and cases and all(t.outcome == "failed" for t in cases)
        for t in cases:  # the words are grader/judge/known_errors.py's (tests/test_known_errors.py)
            assert f"tl.make_block_ptr is not in triton {triton.__version__} (installed here)" in t.message, t.message
    assert result.environment["course_toolchain"] == cfg.toolchain
    differs = not toolchain.same_release(triton.__version__, cfg.toolchain["triton"])
    assert ("course grades with" in result.environment.get("toolchain_note", "")) == (
        differs or not toolchain.same_release(result.environment["torch"], cfg.toolchain["torch"]))
    if result.environment.get("toolchain_note"):
        assert result.environment["toolchain_note"] in report.summary(result)
        assert result.student_json()["environment"]["toolchain_note"] == result.environment["toolchain_note"]


def test_the_toolchains_warnings_are_the_graders_not_the_students_output(task10):
    """tests/files/prints_and_warns.py prints a line and makes torch warn during its call (triton 3.9 warns too:
    TRITON_DEFAULT_FP_FUSION is unset, with the grading machine's paths). The student's line is shown under the
    failing test as theirs; a warning, whatever line it is attributed to, goes to the worker's log (staff)."""
    one = task10.subset({"n127_fp16"}, autotune_points=0.0)
    cfg = load_config(ROOT / "config.yaml")
    (result,) = grade_jobs([Job(one, Path(__file__).parent / "files" / "prints_and_warns.py", "w")], cfg, "cpu")
    case = next(t for t in result.tests if t.name == "n127_fp16")
    assert case.outcome == "failed" and "hello from the student" in case.printed, case.printed
    assert "Warning" not in case.printed and "Warning" not in report.summary(result.student_view())
    assert "UserWarning: To copy construct from a tensor" in result.staff["worker_log"]
