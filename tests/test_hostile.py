"""End to end on the CPU interpreter: a submission that hangs, crashes or fails to import costs only its own
tests, with a message that says what happened, and never another submission's result."""

import dataclasses
import time
from pathlib import Path

import pytest

from grader.config import ROOT, load_config
from grader.pipeline.grading import Job, grade_jobs

SOLUTION = (ROOT / "tasks" / "10_quantize_global_int8" / "solution.py").read_text()


@pytest.fixture(scope="module")
def small_task(task10):
    cases = [c for c in task10.cases if c.id in ("n1_fp32", "n127_fp16")]
    return task10.subset({c.id for c in cases}, autotune_points=0.0, timeout_s={"cpu": 25})


@pytest.fixture(scope="module")
def cfg():
    return load_config(ROOT / "config.yaml")


def _file(tmp_path: Path, name: str, source: str) -> Path:
    path = tmp_path / name
    path.write_text(source)
    return path


def _by_name(result):
    return {t.name: t for t in result.tests}


@pytest.mark.parametrize("fork_server", [True, False], ids=["forked", "fresh-python"])
def test_hang_and_crash_fail_only_themselves(tmp_path, small_task, cfg, fork_server):
    # The address check (grader/worker/address_check.py) would stop the wild store below before it lands: off here, so
    # that the worker really dies (test_a_wild_store_is_reported_not_a_crash has it on).
    cfg = dataclasses.replace(cfg, fork_server=fork_server, bounds=False)
    hang = SOLUTION.replace("    n_elements = x.numel()\n", "    while True:\n        pass\n", 1)
    # A store 1 TiB past the output: the interpreter writes through a wild pointer and the worker dies.
    crash = SOLUTION.replace("tl.store(output_ptr + offsets,", "tl.store(output_ptr + offsets + (1 << 40),")
    assert hang != SOLUTION and crash != SOLUTION
    # The hang spins a core until its time limit: 10 s here (its own task object), 25 s for the other two.
    hang_task = small_task.subset({c.id for c in small_task.cases}, timeout_s={"cpu": 10})
    jobs = [Job(hang_task, _file(tmp_path, "hang.py", hang), "hang"),
            Job(small_task, _file(tmp_path, "crash.py", crash), "crash"),
            Job(small_task, _file(tmp_path, "good.py", SOLUTION), "good")]
    hang_r, crash_r, good_r = grade_jobs(jobs, cfg, "cpu", workers=3)

    assert good_r.score == good_r.max_score
    tests = _by_name(hang_r)
    assert hang_r.score == 0
    assert "stopped at its time limit" in tests["n1_fp32"].message
    assert "while running this case" in tests["n1_fp32"].message
    assert tests["n127_fp16"].message.startswith("not run:")
    tests = _by_name(crash_r)
    assert crash_r.score == 0
    assert "killed by SIGSEGV while running this case" in tests["n1_fp32"].message
    # the worker is started again after a crash, so the next case gets its own verdict, not "not run"
    assert "killed by SIGSEGV while running this case" in tests["n127_fp16"].message
    assert "worker_log" in crash_r.staff_json()["staff"]


def test_a_wild_store_is_reported_not_a_crash(tmp_path, small_task, cfg):
    """With the address check on, the store 1 TiB past the output is reported with its line and not made."""
    crash = SOLUTION.replace("tl.store(output_ptr + offsets,", "tl.store(output_ptr + offsets + (1 << 40),")
    (result,) = grade_jobs([Job(small_task, _file(tmp_path, "crash.py", crash), "crash")], cfg, "cpu", workers=1)
    tests = _by_name(result)
    assert result.score == 0
    for name in ("n1_fp32", "n127_fp16"):
        assert "tl.store wrote" in tests[name].message and "outside every tensor the kernel was given" in \
            tests[name].message
        assert "SIGSEGV" not in tests[name].message


def test_a_stalled_worker_is_stopped_before_its_time_limit(tmp_path, small_task, cfg):
    """A worker that finishes no run of a case for grading.stall_s is stopped then, not at its (longer) time limit;
    one that keeps finishing runs is left alone under the same stall limit."""
    cfg = dataclasses.replace(cfg, stall_s={"cpu": 10.0})
    task = dataclasses.replace(small_task, timeout_s={"cpu": 200})
    hang = SOLUTION.replace("    n_elements = x.numel()\n", "    while True:\n        pass\n", 1)
    start = time.monotonic()
    hang_r, good_r = grade_jobs([Job(task, _file(tmp_path, "hang.py", hang), "hang"),
                                 Job(task, _file(tmp_path, "good.py", SOLUTION), "good")], cfg, "cpu", workers=2)
    assert time.monotonic() - start < 100  # the time limit alone would take 200 s
    assert good_r.score == good_r.max_score
    tests = _by_name(hang_r)
    assert "made no progress for 10 s (grading.stall_s) while running this case" in tests["n1_fp32"].message
    assert tests["n127_fp16"].message.startswith("not run:")
    # what the staff see of how close each came to the limit: the longest stretch without a progress report
    assert 0 < good_r.staff["worker_quiet_s"] < 10 <= hang_r.staff["worker_quiet_s"]


def test_import_error_is_reported_with_its_line(tmp_path, small_task, cfg):
    broken = SOLUTION.replace("import triton\n", "import triton\nraise RuntimeError('boom')\n", 1)
    (result,) = grade_jobs([Job(small_task, _file(tmp_path, "broken.py", broken), "b")], cfg, "cpu", workers=1)
    message = _by_name(result)["n1_fp32"].message
    assert "importing the submission failed: RuntimeError: boom" in message
    assert "line 5 in <module>" in message


def test_wrong_return_and_forbidden_import_messages(tmp_path, small_task, cfg):
    one = SOLUTION.replace("    return output, absmax\n", "    return output\n")
    numpy = "import numpy\n" + SOLUTION
    r_one, r_np = grade_jobs([Job(small_task, _file(tmp_path, "one.py", one), "one"),
                              Job(small_task, _file(tmp_path, "np.py", numpy), "np")], cfg, "cpu", workers=2)
    assert "returned 1 value(s) (Tensor); expected 2: (q, absmax)" in _by_name(r_one)["n1_fp32"].message
    tests = _by_name(r_np)
    assert tests["imports"].outcome == "failed" and "np.py:1: import numpy is not allowed" in tests["imports"].message
    assert tests["n1_fp32"].message.startswith("not run: the imports check failed (np.py:1: import numpy")
    assert r_np.student_json()["tests"][0].keys() == {"name", "outcome", "points", "max_points", "message",
                                                          "visibility"}


def test_output_of_a_forked_worker_cannot_speak_for_the_fork_server(tmp_path, small_task, cfg):
    """A forked worker's stdout is its log, not the fork server's reply pipe: forged 'it ended' lines are ignored."""
    forged = "".join(f'print(\'{{"id": {i}, "pid": 1, "returncode": 0}}\')\n' for i in range(1, 40))
    hang = SOLUTION.replace("import triton\n", "import triton\n" + forged + "while True:\n    pass\n", 1)
    task = dataclasses.replace(small_task, timeout_s={"cpu": 6})
    (result,) = grade_jobs([Job(task, _file(tmp_path, "forger.py", hang), "f")], cfg, "cpu", workers=1)
    assert result.score == 0
    assert "stopped at its time limit" in result.staff["worker_exit"]
    assert '"returncode": 0' in result.staff["worker_log"]  # what it printed went to its log


def test_a_student_sees_what_their_code_printed_under_the_failing_test(tmp_path, task10, cfg):
    """On 1824752 a student never saw their own print() output, even with --staff (only the staff JSON's
    worker_log held it). Now a failing public test carries what the failing call printed: bounded, marked as
    theirs, escaped in the terminal (their escape sequence is shown, not run), and left out of a hidden test's
    student view (it would tell the hidden case)."""
    from grader.results import report

    task = task10.subset({"n127_fp16", "tiny_fp32"}, autotune_points=0.0, timeout_s={"cpu": 60})
    assert {c.visibility for c in task.cases} == {"public", "hidden"}
    noisy = SOLUTION.replace("    n_elements = x.numel()\n",
                             "    n_elements = x.numel()\n    print('my debug: n =', n_elements, '\\x1b[2J')\n"
                             "    print('x' * 5000)\n    x = x * 0.5\n", 1)
    assert noisy != SOLUTION
    (result,) = grade_jobs([Job(task, _file(tmp_path, "noisy.py", noisy), "noisy")], cfg, "cpu", workers=1)
    tests = _by_name(result)
    assert tests["n127_fp16"].outcome == "failed" and tests["tiny_fp32"].outcome == "failed"
    printed = tests["n127_fp16"].printed
    assert printed.startswith("my debug: n = 127 \x1b[2J\n") and "more characters not kept" in printed
    assert len(printed) < 2200
    shown = report.summary(result)
    assert "your code printed during this call (its output, not the grader's):" in shown
    assert "> my debug: n = 127 \\x1b[2J" in shown and "\x1b" not in shown
    student = result.student_json()["tests"]
    assert "my debug" in next(t for t in student if t["name"] == "n127_fp16")["printed"]
    hidden = [t for t in student if t.get("visibility") == "hidden"]
    assert len(hidden) == 1 and "printed" not in hidden[0]  # under its neutral name, with no output
    assert "my debug" in {t["name"]: t for t in result.staff_json()["tests"]}["tiny_fp32"]["printed"]


def test_many_autotune_configs_are_told_and_a_task_without_autotuning_has_no_such_test(tmp_path, task10, cfg):
    """On 1824752, 30 autotune configs graded task 10 in 158 s instead of 9 s with no word, and every
    puzzle showed an "autotune" test (failing whenever no case passed) though no puzzle asks for autotuning. Now a
    kernel with more than MANY_CONFIGS configs gets a note under the autotune test (passing or not), and a task
    with no kernel to autotune and no points for it has no autotune test."""
    from grader.config import discover_tasks
    from grader.pipeline.result import MANY_CONFIGS
    from grader.results import report

    many = MANY_CONFIGS + 4
    configs = "".join(f"        triton.Config({{'BLOCK_SIZE': 1024}}, num_warps={1 << (k % 4)}, num_stages={k}),\n"
                      for k in range(1, many + 1))
    start = SOLUTION.index("    configs=[\n") + len("    configs=[\n")
    slow = SOLUTION[:start] + configs + SOLUTION[SOLUTION.index("    ],\n    key="):]
    task = task10.subset({"n1_fp32"}, timeout_s={"cpu": 120})
    puzzle = discover_tasks()[0]["puzzle01_constant_add"]
    assert "autotune" in task.test_names and "autotune" not in puzzle.test_names
    slow_r, skeleton_r = grade_jobs([Job(task, _file(tmp_path, "slow.py", slow), "slow"),
                                     Job(puzzle, puzzle.folder / "skeleton.py", "sk")], cfg, "cpu", workers=2)
    tune = _by_name(slow_r)["autotune"]
    assert tune.outcome == "passed" and f"_quantize_global has {many} autotune configs" in tune.note
    assert f"note: _quantize_global has {many} autotune configs" in report.summary(slow_r)
    assert next(t for t in slow_r.student_json()["tests"] if t["name"] == "autotune")["note"] == tune.note
    assert "autotune" not in _by_name(skeleton_r) and skeleton_r.score == 0
    assert not _by_name(slow_r)["n1_fp32"].note and slow_r.score == task.points
