import json

import pytest
import torch

from grader import judge
from grader.config import OutputSpec
from grader.runner import WorkerRun

ROUNDED = OutputSpec(name="q", dtype="int8", compare="rounded", window=1e-3)


def test_rounded_accepts_either_side_of_a_tie_but_not_truncation():
    real = torch.tensor([2.5, -2.5, 2.4996, 3.7, -3.7], dtype=torch.float64)
    assert judge.compare_values(ROUNDED, torch.tensor([2, -3, 3, 4, -4], dtype=torch.int8), real) is None
    assert judge.compare_values(ROUNDED, torch.tensor([3, -2, 2, 4, -4], dtype=torch.int8), real) is None
    msg = judge.compare_values(ROUNDED, torch.tensor([2, -2, 2, 3, -3], dtype=torch.int8), real)
    assert msg.startswith("q: 2 of 5 element(s) differ")
    assert "q[3] got 3 expected 4 (exact 3.7000)" in msg


def test_a_value_equal_to_the_poison_is_shown_with_what_was_expected():
    """-128 is int8's poison and also what a kernel that rounds down computes for -127.00001: the message says
    both readings and gives the expected values, not only "never written"."""
    got = torch.tensor([[5, -128], [-128, 7]], dtype=torch.int8)
    ref = torch.tensor([[5.0, -127.0], [-126.9, 7.0]], dtype=torch.float64)
    msg = judge.value_problem(ROUNDED, got, ref)
    assert msg.startswith("q: 2 element(s) hold -128, the poison the buffer was filled with: never written")
    assert "or computed as -128; first: q[0, 1] (expected -127), q[1, 0] (expected -126.9)" in msg


def test_close_and_exact_rules():
    close = OutputSpec(name="y", dtype="float16", compare="close", rtol=1e-2, atol=1e-3)
    ref = torch.tensor([[1.0, 100.0], [0.0, -5.0]], dtype=torch.float64)
    assert judge.compare_values(close, ref.half(), ref) is None
    bad = ref.clone()
    bad[1, 1] = -5.2
    msg = judge.compare_values(close, bad.half(), ref)
    assert "1 of 4" in msg and "y[1, 1] got -5.19922 expected -5" in msg
    nan = ref.clone()
    nan[0, 0] = float("nan")
    assert judge.compare_values(close, nan, ref) is not None
    exact = OutputSpec(name="a", dtype="float16", compare="exact")
    assert judge.compare_values(exact, torch.tensor(1.5).half(), torch.tensor(1.5).half()) is None
    assert judge.compare_values(exact, torch.tensor(1.5).half(), torch.tensor(1.25).half()) is not None


def _results(tmp_path, **files):
    for name, content in files.items():
        (tmp_path / name).write_bytes(content)
    run = WorkerRun(jobdir=tmp_path, returncode=-9, timed_out=False, seconds=1.0, log="", run_id="0-0",
                    cases=[0, 1, 2])
    return judge.WorkerResults.read(tmp_path, [run])


def test_missing_results_fail_closed(tmp_path):
    res = _results(tmp_path)
    assert res.problem and "SIGKILL" in res.problem
    runs, why = res.case_runs(0, "c0")
    assert runs is None and "before any case started" in why


def test_a_crash_is_placed_in_its_case(tmp_path):
    res = _results(tmp_path, **{"load.json": b'{"ok": true, "kernels": {}}', "status-0-0.json": b'{"case": "c1"}'})
    assert res.case_runs(1, "c1")[1] == "the worker was killed by SIGKILL while running this case"
    assert "while running case c1" in res.case_runs(2, "c2")[1]


def test_garbled_results_fail_closed(tmp_path):
    res = _results(tmp_path, **{"load.json": b"[1, 2]", "case-0.pt": b"not a torch file"})
    assert res.problem and "unexpected shape" in res.problem
    runs, why = res.case_runs(0, "c0")
    assert runs is None and "unreadable" in why
    torch.save({"id": "other", "runs": []}, tmp_path / "case-0.pt")
    assert "unreadable" in res.case_runs(0, "c0")[1]


def test_pickled_code_is_not_executed(tmp_path):
    class Evil:
        def __reduce__(self):
            return (exec, ("open('%s', 'w').write('pwned')" % (tmp_path / "pwned"),))

    torch.save({"id": "c0", "runs": [Evil()]}, tmp_path / "case-0.pt")
    (tmp_path / "load.json").write_text(json.dumps({"ok": True, "kernels": {}}))
    runs, why = judge.WorkerResults.read(tmp_path, [WorkerRun(tmp_path, 0, False, 1.0, "")]).case_runs(0, "c0")
    assert runs is None and "unreadable" in why
    assert not (tmp_path / "pwned").exists()


def test_a_restarted_worker_leaves_the_crash_on_its_case(tmp_path):
    res = _results(tmp_path, **{"load.json": b'{"ok": true, "kernels": {}}',
                                "crash-1.json": b'{"message": "the worker was killed by SIGSEGV"}'})
    assert res.case_runs(1, "c1")[1].startswith("the worker was killed by SIGSEGV while running this case")


def test_shards_keep_specializations_together_and_follow_their_count():
    from grader.grading import plan_shards

    def case(n, m, flag):
        return judge.CaseData(f"c{n}x{m}", [torch.zeros(n, m)], {"flag": flag}, ())

    heavy = [case(16, 16, True), case(32, 48, True), case(17, 16, True), case(1, 16, True), case(17, 17, False)]
    light = [case(16, 16, True), case(32, 32, True)]
    plan = plan_shards({0: heavy, 1: light}, workers=5)
    assert sorted(i for b in plan[0] for i in b) == [0, 1, 2, 3, 4]
    assert [0, 1] in plan[0]  # 16x16 and 32x48 share a specialization
    assert len(plan[0]) == 4 and plan[1] == [[0, 1]]
    assert plan_shards({0: heavy}, workers=1) == {0: [[0, 1, 2, 3, 4]]}


def test_outputs_shared_by_runs_are_sent_once_and_judged_once():
    from grader import worker

    same = torch.arange(6, dtype=torch.int8).reshape(2, 3)
    runs = [{"outputs": [{"kind": "tensor", "tensor": same.clone()}]},
            {"outputs": [{"kind": "tensor", "tensor": same.clone()}]},
            {"outputs": [{"kind": "tensor", "tensor": same.clone().t().contiguous().t()}]},  # other strides
            {"outputs": [{"kind": "tensor", "tensor": same + 1}]}]
    worker.share_outputs(runs)
    assert "tensor" not in runs[1]["outputs"][0] and runs[1]["outputs"][0]["same_as"] == [0, 0]
    assert "same_as" not in runs[2]["outputs"][0] and "same_as" not in runs[3]["outputs"][0]
    judge.resolve_shared(runs)
    assert runs[1]["outputs"][0]["tensor"] is runs[0]["outputs"][0]["tensor"]


@pytest.mark.parametrize("ref", [[1, 0], [0, 1], [-1, 0], "0,0", [0.0, 0]])
def test_an_output_that_refers_to_no_earlier_tensor_is_garbled(ref):
    runs = [{"outputs": [{"kind": "tensor", "tensor": torch.zeros(2)}]},
            {"outputs": [{"kind": "tensor", "same_as": ref}]}]
    if ref == [1, 0]:  # itself
        runs = [runs[0], runs[1]]
    with pytest.raises(ValueError):
        judge.resolve_shared(runs)
