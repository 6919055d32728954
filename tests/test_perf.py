"""Speed tests (the `perf` block of task.yaml): configuration, the judge's verdicts (fail closed, both times and
the ratio in the message, correctness first), and end to end on the CPU interpreter."""

import dataclasses

import pytest
import torch
from conftest import check_timer_stopped, write_stream

from grader import judge
from grader.authoring.selftest import expectation
from grader.config import ROOT, ConfigError, PerfTest, load_config, load_task
from grader.isolation.runner import WorkerRun
from grader.judge import speed
from grader.pipeline.grading import Job, grade_jobs
from grader.protocol import Kind
from grader.results import report

TASK23 = ROOT / "tasks" / "23_lowbit_dw_fused"
TASK22 = ROOT / "tasks" / "22_lowbit_relu_mask"


def _task23_copy(tmp_path, edit):
    import shutil

    dest = tmp_path / "tasks" / "23_lowbit_dw_fused"
    shutil.copytree(TASK23, dest)
    (dest / "task.yaml").write_text(edit((dest / "task.yaml").read_text()))
    return dest


def test_perf_block_is_parsed_and_counts_only_where_it_runs():
    task = load_task(TASK23)
    assert [p.id for p in task.perf] == ["speed_k8192", "speed_k100864"]
    assert task.perf[0].threshold == 1.0 and task.perf[0].devices == ("cuda",) and task.perf[0].reps == 50
    assert task.perf[0].clock == "gpu"
    assert task.test_names[-2:] == ["speed_k8192", "speed_k100864"]
    assert task.points == 5.0 and task.points_on("cuda") == 5.0 and task.points_on("cpu") == 3.5
    assert task.not_run_on("cpu") == {"speed_k8192", "speed_k100864"} and not task.not_run_on("cuda")
    # A wrong/ file that declares only speed failures is expected to fail nothing on the CPU.
    assert expectation("wrong", task, "no_split_k.py", "cuda") == {"speed_k8192", "speed_k100864"}
    assert expectation("wrong", task, "no_split_k.py", "cpu") == set()
    assert "speed_k8192" not in expectation("skeleton", task, "skeleton.py", "cpu")


@pytest.mark.parametrize("edit, error", [
    (lambda t: t.replace("  warmup: 10\n", "  warmup: 10\n  repeats: 3\n"), r"unknown key\(s\) \['repeats'\]"),
    (lambda t: t.replace("case: notebook_k8192}", "case: nope}"), "case 'nope' is not one of the task's cases"),
    (lambda t: t.replace("baseline: baseline.py", "baseline: missing.py"), r"perf.baseline: no file 'missing.py'"),
    (lambda t: t.replace("  reps: 50\n", "  reps: 3\n"), "reps >= 5"),
    (lambda t: t.replace("id: speed_k100864", "id: speed_k8192"), "duplicate or reserved test id"),
    (lambda t: t.replace("devices: [cuda]", "devices: [tpu]"), "perf.devices"),
    (lambda t: t.replace("  reps: 50\n", "  reps: 50\n  clock: cpu\n"), r"perf.clock: must be one of gpu / wall"),
])
def test_perf_block_errors_name_the_key(tmp_path, edit, error):
    with pytest.raises(ConfigError, match=error):
        load_task(_task23_copy(tmp_path, edit))


# ------------------------------------------------------------------------------------------ judge, unit level


def _perf_task(reps=5, threshold=1.0, points=1.0):
    task = load_task(TASK22)
    perf = PerfTest(id="speed", points=points, case=task.cases[0].id, baseline="x.py", threshold=threshold,
                    devices=("cpu",), warmup=1, reps=reps)
    return dataclasses.replace(task, perf=[perf])


def _case():
    x = torch.tensor([[1.0, -2.0, 0.0]])
    dy = torch.tensor([[3.0, 4.0, 5.0]])
    expected = (x.clamp_min(0).double(), torch.tensor([1], dtype=torch.int32), dy.double())
    return judge.CaseData("c", [x, dy, torch.tensor([1], dtype=torch.int32)], {}, expected)


STAFF = {"test": "speed", "error": None, "submission": [1e-3] * 5, "baseline": [1e-3] * 5}
"""The staff's run: the reference and the baseline both at 1 ms."""


def _results(tmp_path, record=None, staff=STAFF):
    frames = [(Kind.LOAD, 0, {"ok": True, "kernels": {}})]
    if record is not None:
        frames.append((Kind.PERF, 0, record))
    staff_path = None
    if staff is not None:
        staff_path = write_stream(tmp_path / "staff.bin", (Kind.PERF, 0, {
            "clock": record.get("clock", "wall") if isinstance(record, dict) else "wall", **staff}))
    run = WorkerRun(records=write_stream(tmp_path / "records.bin", *frames), returncode=-9, timed_out=False,
                    seconds=1.0, log="", run_id="0-0", cases=[])
    return judge.WorkerResults.read([run], staff_path)


def _record(sub, base, outputs=None):
    case = _case()
    outs = outputs if outputs is not None else [
        {"kind": "tensor", "tensor": t.to(d), "device": "cpu"}
        for t, d in zip(case.expected, (torch.float32, torch.int32, torch.float32))]
    return {"test": "speed", "error": None, "method": "m", "submission": sub, "baseline": base, "outputs": outs}


OK = judge.Verdict(True, "passed")


def test_missing_timings_fail_closed(tmp_path):
    v = speed.judge_perf(_perf_task(), 0, _case(), OK, _results(tmp_path))
    assert not v.ok and v.message.startswith("not timed:") and "SIGKILL" in v.message


@pytest.mark.parametrize("sub, base, why", [
    ([1e-3] * 4, [1e-3] * 5, "expected 5 times, got 4"),
    ([1e-3] * 4 + [-1.0], [1e-3] * 5, "not a positive number"),
    ([1e-3] * 4 + [float("nan")], [1e-3] * 5, "not a positive number"),
    ([1e-3] * 5, "fast", "expected 5 times"),
])
def test_garbled_timings_fail_closed(tmp_path, sub, base, why):
    v = speed.judge_perf(_perf_task(), 0, _case(), OK, _results(tmp_path, _record(sub, base)))
    assert not v.ok and "garbled" in v.message and why in v.message


def test_unreadable_or_foreign_record_fails_closed(tmp_path):
    v = speed.judge_perf(_perf_task(), 0, _case(), OK, _results(tmp_path, b"not a torch file"))
    assert not v.ok and "unreadable" in v.message
    (tmp_path / "again").mkdir()
    foreign = {**_record([1e-3] * 5, [1e-3] * 5), "test": "other"}
    assert "unreadable" in speed.judge_perf(_perf_task(), 0, _case(), OK, _results(tmp_path / "again", foreign)).message


def test_ratio_below_threshold_fails_with_both_times(tmp_path):
    rec = _record([2e-3, 2e-3, 2.1e-3, 1.9e-3, 9.0], [1e-3] * 5)  # one outlier: the median ignores it
    v = speed.judge_perf(_perf_task(), 0, _case(), OK, _results(tmp_path, rec))
    assert not v.ok
    assert v.message == ("baseline 1.0000 ms, yours 2.0000 ms (host time from the call to the end of its GPU work, "
                         "medians of 5 interleaved runs): speedup 0.50x (half of the side-by-side pairs between "
                         "0.48x and 0.50x); the reference's speedup in the staff's run: 1.00x, so yours is 0.50x "
                         "the reference's; need >= 1x")
    v = speed.judge_perf(_perf_task(), 0, _case(), OK, _results(tmp_path, {**rec, "clock": "gpu"}))
    assert "(GPU time from the first kernel's start to the last one's end, medians" in v.message
    assert "host clock" not in v.staff  # no host-clock times in the record: nothing to show staff
    walls = {"wall_submission": [3e-3] * 5, "wall_baseline": [1.5e-3] * 5}
    v = speed.judge_perf(_perf_task(), 0, _case(), OK, _results(tmp_path, {**rec, "clock": "gpu", **walls}))
    assert v.staff.endswith("host clock, medians: yours 3.0000 ms, baseline 1.5000 ms")
    v = speed.judge_perf(_perf_task(), 0, _case(), OK, _results(tmp_path, {**rec, "clock": "sundial"}))
    assert not v.ok and "garbled" in v.message


def test_marker_spans_run_from_a_calls_first_activity_to_its_last():
    """A GPU-only trace: each call is [input copies][flush][marker][its activities...][marker]. An activity that
    starts inside a call and ends late (a side stream it did not wait for) is still its work; copies and flushes
    count for nobody; a call with no activity is left out (the caller fails it)."""
    from grader.worker import timing

    m, flush, copy = timing.MARKER, "vectorized_elementwise_kernel<FillFunctor<signed char>>", "Memcpy DtoD"
    activity = [(0.0, 5.0, flush), (6.0, 7.0, m), (10.0, 20.0, "k1"), (15.0, 60.0, "side"), (55.0, 80.0, "k2"),
                (81.0, 82.0, m), (90.0, 95.0, copy),
                (100.0, 105.0, flush), (106.0, 107.0, m), (110.0, 150.0, "fill_own"), (151.0, 152.0, m),
                (200.0, 205.0, flush), (206.0, 207.0, m), (208.0, 209.0, m)]  # call 2: no GPU work
    calls = timing.marked_calls(list(reversed(activity)))
    assert [timing.span(own) for own in calls if own] == [70.0, 40.0] and not calls[2]
    assert [timing.busy_time(own) for own in calls if own] == [70.0, 40.0]  # no gap in either call
    # busy time: idle gaps do not count, overlapping work counts once
    assert timing.busy_time([(0.0, 10.0, "a"), (25.0, 40.0, "c"), (20.0, 30.0, "b")]) == 30.0


def test_ratio_at_threshold_passes(tmp_path):
    v = speed.judge_perf(_perf_task(threshold=1.5), 0, _case(), OK,
                         _results(tmp_path, _record([1e-3] * 5, [1.5e-3] * 5), {**STAFF, "baseline": [1.5e-3] * 5}))
    assert v.ok and "speedup 1.50x" in v.message and v.message.endswith("need >= 1.5x")


def test_a_test_of_0_points_is_informational(tmp_path):
    v = speed.judge_perf(_perf_task(points=0), 0, _case(), OK, _results(tmp_path, _record([2e-3] * 5, [1e-3] * 5)))
    assert v.ok and v.message.endswith("speedup 0.50x (half of the side-by-side pairs between 0.50x and 0.50x); the "
                                       "reference's speedup in the staff's run: 1.00x, so yours is 0.50x the "
                                       "reference's; informational (0 points), the target is >= 1x")


def test_the_reference_ratio_comes_from_the_staff_run(tmp_path):
    staff = {**STAFF, "submission": [0.5e-3] * 5, "baseline": [1.1e-3] * 5}  # the reference 2.2x its baseline
    v = speed.judge_perf(_perf_task(), 0, _case(), OK, _results(tmp_path, _record([1e-3] * 5, [1.1e-3] * 5), staff))
    assert v.ok and "speedup 1.10x" in v.message
    assert "staff's run: 2.20x, so yours is 0.50x the reference's" in v.message
    assert v.metric == {"speedup": 1.1, "vs_reference": 0.5, "ms": 1.0}  # what the leaderboard ranks


def test_a_baseline_slowed_beside_the_submission_fails(tmp_path):
    """The cheat: the submission's process makes torch.compile's baseline run eagerly (or shares the GPU with it),
    so its own ratio looks large. The staff's run, which no submission touched, shows the baseline's real time."""
    slowed = _record([1e-3] * 5, [4e-3] * 5)  # a 4x "speedup", with the baseline at 4 ms instead of the staff's 1 ms
    v = speed.judge_perf(_perf_task(points=0), 0, _case(), OK, _results(tmp_path, slowed))
    assert not v.ok and "not judged: the baseline's time was 4.00x as long beside your code as in the staff's run " \
                        "(4.0000 ms against 1.0000 ms)" in v.message
    assert v.metric is None  # not judged: nothing to rank
    near = _record([1e-3] * 5, [1.4e-3] * 5)  # within the slack: noise, judged
    assert speed.judge_perf(_perf_task(), 0, _case(), OK, _results(tmp_path, near)).ok


def test_on_the_gpu_clock_the_check_compares_the_baselines_busy_time(tmp_path):
    """With the GPU clock both records carry each call's busy time (kernels, no host gaps): a baseline whose span
    grew with the host's gaps is judged; one whose kernels took longer is not."""
    staff = {**STAFF, "clock": "gpu", "busy_submission": [0.5e-3] * 5, "busy_baseline": [0.8e-3] * 5}
    gaps = {**_record([1e-3] * 5, [2e-3] * 5), "clock": "gpu", "busy_submission": [0.9e-3] * 5,
            "busy_baseline": [0.85e-3] * 5}  # span 2x the staff's, kernels the same
    v = speed.judge_perf(_perf_task(points=0), 0, _case(), OK, _results(tmp_path, gaps, staff))
    assert v.ok, v.message
    eager = {**gaps, "busy_baseline": [3.2e-3] * 5}
    v = speed.judge_perf(_perf_task(points=0), 0, _case(), OK, _results(tmp_path, eager, staff))
    assert not v.ok and "the baseline's GPU busy time was 4.00x as long" in v.message
    # like is compared with like: a record without busy times is checked on both records' times
    no_busy = {k: v for k, v in gaps.items() if not k.startswith("busy_")}
    v = speed.judge_perf(_perf_task(points=0), 0, _case(), OK, _results(tmp_path, no_busy, staff))
    assert not v.ok and "the baseline's time was 2.00x as long" in v.message
    garbled = {**gaps, "busy_baseline": [1e-3] * 4}
    v = speed.judge_perf(_perf_task(points=0), 0, _case(), OK, _results(tmp_path, garbled, staff))
    assert not v.ok and "not judged: a timing record is garbled (busy_baseline: expected 5 times" in v.message


@pytest.mark.parametrize("staff, why", [
    (None, "the staff's timing run of the reference left no record"),
    ({**STAFF, "error": "your function raised X"}, "the staff's timing run failed: your function raised X"),
    ({**STAFF, "baseline": [1e-3] * 4}, "the staff's timing record is garbled (baseline: expected 5 times, got 4)"),
    ({**STAFF, "test": "other"}, "the staff's timing record is unreadable"),
])
def test_a_missing_or_bad_staff_run_fails_closed(tmp_path, staff, why):
    v = speed.judge_perf(_perf_task(points=0), 0, _case(), OK, _results(tmp_path, _record([1e-3] * 5, [1e-3] * 5),
                                                                        staff))
    assert not v.ok and f"not judged: {why}" in v.message


def test_speed_counts_only_for_a_correct_result(tmp_path):
    fast = _record([1e-4] * 5, [1e-3] * 5)
    v = speed.judge_perf(_perf_task(), 0, _case(), judge.Verdict(False, "wrong"), _results(tmp_path, fast))
    assert not v.ok and "speed counts only for a correct result" in v.message
    wrong_out = _record([1e-4] * 5, [1e-3] * 5)
    wrong_out["outputs"][2]["tensor"] = torch.zeros(1, 3)  # the timed call's dx differs from the checked one's
    v = speed.judge_perf(_perf_task(), 0, _case(), OK, _results(tmp_path, wrong_out))
    assert not v.ok and "the last timed call's result is wrong: dx" in v.message


def test_an_error_while_timing_fails(tmp_path):
    rec = {**_record([], []), "error": "your function raised RuntimeError: boom"}
    v = speed.judge_perf(_perf_task(), 0, _case(), OK, _results(tmp_path, rec))
    assert not v.ok and v.message == "not timed: your function raised RuntimeError: boom"


# ---------------------------------------------------------------------------------- end to end on the CPU


@pytest.fixture(scope="module")
def cfg():
    return load_config(ROOT / "config.yaml")


def test_timed_end_to_end_on_the_cpu_and_not_run_elsewhere(tmp_path, cfg):
    task = load_task(TASK22)
    solution = (TASK22 / "solution.py").read_text()
    slow = tmp_path / "slow_baseline.py"  # the same kernels, 20 ms slower per call
    slow.write_text(solution.replace("def relu_mask(", "import time\n\n\ndef _relu_mask(")
                    + "\n\ndef relu_mask(x, dy, mask):\n    time.sleep(0.02)\n    return _relu_mask(x, dy, mask)\n")
    perf = [PerfTest(id="speed_pass", points=1.0, case="r1_c7", baseline=str(slow), threshold=1.0, devices=("cpu",),
                     warmup=1, reps=5),
            PerfTest(id="speed_fail", points=1.0, case="r1_c7", baseline=str(slow), threshold=1e6, devices=("cpu",),
                     warmup=1, reps=5),
            PerfTest(id="speed_cuda", points=1.0, case="r1_c7", baseline=str(slow), threshold=1.0,
                     devices=("cuda",), warmup=1, reps=5)]
    task = dataclasses.replace(task, cases=[task.cases[0]], perf=perf)
    given = []
    (result,) = grade_jobs([Job(task, TASK22 / "solution.py", "s")], cfg, "cpu", workers=1, on_result=given.append)
    # Two results: the first as soon as the case is judged (one thread: the timing worker starts after the
    # case shard), its speed tests not timed yet, then the full one, which is the one returned.
    first, full = given
    assert full is result and not result.pending
    assert first.pending == ["speed_pass", "speed_fail"] and first.max_score == result.max_score
    early = {t.name: t for t in first.tests}
    assert early["speed_pass"].outcome == "not_run" and early["speed_pass"].max_points == 1.0
    assert early["speed_pass"].message.startswith("not timed yet") and early["r1_c7"].outcome == "passed"
    assert first.score == task.cases[0].points and early["speed_cuda"].outcome == "not_run"
    # what `grade` prints: the first result with its speed tests waiting, then only what it left out
    shown = report.summary(first)
    assert "WAIT  speed_pass" in shown and "so far: speed_pass, speed_fail not timed yet" in shown
    later = report.summary(result, only=set(first.pending))
    assert "PASS  speed_pass" in later and "PASS  r1_c7" not in later and "so far" not in later
    tests = {t.name: t for t in result.tests}
    assert tests["speed_pass"].outcome == "passed" and tests["speed_pass"].points == 1.0
    assert tests["speed_pass"].message.startswith("baseline ") and "yours" in tests["speed_pass"].message
    # the staff's run of the reference (task 22's solution.py, against the same slow baseline) reached the judge
    assert "the reference's speedup in the staff's run: " in tests["speed_pass"].message
    assert tests["speed_fail"].outcome == "failed" and "need >= 1e+06x" in tests["speed_fail"].message
    assert tests["speed_cuda"].outcome == "not_run" and tests["speed_cuda"].max_points == 0.0
    assert "not run on cpu" in tests["speed_cuda"].message
    assert result.failed == ["speed_fail"] and result.not_run == ["speed_cuda"]
    case_points = task.cases[0].points
    assert result.max_score == task.points_on("cpu") == case_points + 2 and result.score == case_points + 1


# ------------------------------------------------------------------------ a compiled baseline in the sandbox


_COMPILE_IN_SANDBOX = """
import importlib.util, sys
from pathlib import Path
import torch
from grader.worker import sandbox, timing
from grader.config import ROOT
path = ROOT / "tasks" / "10_quantize_global_int8" / "baseline.py"
if sys.argv[1] == "memory":
    module = timing.load_baseline("b10", str(path))
else:  # as a module is usually imported: from its file
    spec = importlib.util.spec_from_file_location("b10", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
jobdir = Path(sys.argv[2])
report = sandbox.apply(sandbox.plan([jobdir], ROOT, "cpu", 60, sandbox.Limits()), jobdir)
if not report.get("files", "").startswith("on"):
    print("NO-LANDLOCK")
    sys.exit(0)
try:
    q, absmax = torch.compile(module.torch_math, backend="eager")(torch.tensor([0.5, -2.0]))
    print("OK", q.tolist(), float(absmax))
except Exception as exc:
    print("FAILED", type(exc).__name__, exc)
"""


@pytest.mark.parametrize("how, expected", [("memory", "OK [32, -127] 2.0"), ("file", "FAILED")])
def test_a_compiled_baseline_runs_in_the_sandbox_only_when_loaded_from_memory(tmp_path, how, expected):
    """torch.compile (Dynamo) opens the source file of what it compiles, and the sandbox refuses the task folder:
    a baseline imported from its file fails there; `timing.load_baseline` (the worker's way) compiles."""
    import os
    import subprocess
    import sys

    # No GPU for it: with a CUDA build of torch and a GPU in view, Dynamo opens the device, which a CPU sandbox
    # refuses ("CUDA-capable device(s) is/are busy or unavailable", torch 2.11 on the H100 box)
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    out = subprocess.run([sys.executable, "-c", _COMPILE_IN_SANDBOX, how, str(tmp_path)], capture_output=True,
                         text=True, timeout=300, cwd=ROOT, env=env).stdout
    if "NO-LANDLOCK" in out:
        pytest.skip("Landlock is not available here")
    assert expected in out, out
    if how == "file":
        assert "Permission denied" in out and "baseline.py" in out, out


def _tree(path):
    from grader.protocol import GradingTree

    path.mkdir()
    return GradingTree(path)


def test_a_staff_timing_run_is_kept_and_reused_only_while_its_files_are_the_same(task10, tmp_path, monkeypatch):
    """staff.staff_timing: the first grading run times the reference and keeps its record (outside the shared
    Triton cache, which workers may read); the next one reuses it without starting a worker; a changed solution
    (or a run that failed, or timed without the GPU alone) is timed again."""
    from grader.isolation.runner import JobSpec
    from grader.pipeline import staff
    from grader.protocol import PerfItem

    monkeypatch.setenv("GRADER_STAFF_TIMING", str(tmp_path / "kept"))
    perf = [PerfItem(index=0, test="speed", case=0, baseline="tasks/x/baseline.py", warmup=1, reps=2,
                             clock="gpu")]
    # a student's timing spec, carrying the student's bytes (JobSpec.source): the staff run must not time them
    spec = JobSpec(tmp_path / "student.py", task10.entry, [], "cuda", {}, 60.0, perf=perf, source=b"# a student\n")
    started = []

    def runner(gate):
        def run(folders, shard, spec, cases):
            started.append(spec.submission)
            assert spec.submission.name == "solution.py"  # the task's solution, its own bytes, not the student's
            assert spec.source_bytes() == spec.submission.read_bytes() != b"# a student\n"
            records = folders.records(f"{shard}-0")
            write_stream(records, (Kind.PERF, 0, {"test": "speed", "submission": [1.0, 1.0], "gate": gate}),
                         (Kind.STATUS, 0, {"done": True}))
            return [WorkerRun(records=records, returncode=0, timed_out=False, seconds=1.0, log="", run_id="0-0")]
        return run

    first, _ = staff.staff_timing(task10, spec, _tree(tmp_path / "t1"), runner("shared: busy"))
    assert len(started) == 1 and first.is_file()  # timed beside others: not kept
    first, _ = staff.staff_timing(task10, spec, _tree(tmp_path / "t2"), runner("alone"))
    assert len(started) == 2
    again, inductor = staff.staff_timing(task10, spec, _tree(tmp_path / "t3"), runner("alone"))
    assert len(started) == 2 and again.read_bytes() == first.read_bytes() and inductor is None
    assert str(tmp_path / "kept") in str(staff.staff_cache_dir())
    task = dataclasses.replace(task10, folder=tmp_path / "task")
    (tmp_path / "task").mkdir()
    (tmp_path / "task" / "task.yaml").write_text((task10.folder / "task.yaml").read_text())
    (tmp_path / "task" / "solution.py").write_text((task10.folder / "solution.py").read_text() + "\n# changed\n")
    assert staff.staff_key(task, spec) != staff.staff_key(task10, spec)
    staff.staff_timing(task, spec, _tree(tmp_path / "t4"), runner("alone"))
    assert len(started) == 3


def test_a_timing_worker_stops_once_every_speed_tests_case_has_failed(slow_wrong_timed, cfg):
    """A job whose speed tests' case fails needs nothing from its timing worker (speed counts only for a correct
    result): once the cases are judged, the worker is stopped, and the job's result comes then, not when the
    worker would have finished (conftest.py `slow_wrong_timed`)."""
    task, wrong = slow_wrong_timed
    (result,) = grade_jobs([Job(task, wrong, "s")], cfg, "cpu", workers=2)
    check_timer_stopped(result)
