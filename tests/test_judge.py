import os

import pytest
import torch
from conftest import write_stream

from grader import judge
from grader.config import OutputSpec
from grader.isolation.runner import WorkerRun
from grader.protocol import HEADER, MAGIC, Kind

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


LOADED = (Kind.LOAD, 0, {"ok": True, "kernels": {}})


def _results(tmp_path, *frames, crashed=None):
    run = WorkerRun(records=write_stream(tmp_path / "records-0-0.bin", *frames), returncode=-9, timed_out=False,
                    seconds=1.0, log="", run_id="0-0", cases=[0, 1, 2], crashed=crashed or {})
    return judge.WorkerResults.read([run], case_ids=["c0", "c1", "c2"])


def test_missing_results_fail_closed(tmp_path):
    res = _results(tmp_path)
    assert res.problem and "SIGKILL" in res.problem
    runs, why = res.case_runs(0, "c0")
    assert runs is None and "before any case started" in why


def test_a_crash_is_placed_in_its_case(tmp_path):
    res = _results(tmp_path, LOADED, (Kind.STATUS, 0, {"case": "c1", "index": 1}))
    assert res.case_runs(1, "c1")[1] == "the worker was killed by SIGKILL while running this case"
    assert "while running case c1" in res.case_runs(2, "c2")[1]


def test_a_progress_report_names_no_case_in_its_own_words(tmp_path):
    """A status frame's case name is the worker's text: the judge names the case by its index, from the task."""
    res = _results(tmp_path, LOADED, (Kind.STATUS, 0, {"case": "LEAK 0.25 -1.5", "index": 1, "fatal": "LEAK 7"}))
    assert "LEAK" not in res.case_runs(2, "c2")[1] and "after case c1" in res.case_runs(2, "c2")[1]
    (tmp_path / "b").mkdir()
    res = _results(tmp_path / "b", LOADED, (Kind.STATUS, 0, {"case": "LEAK", "index": 9}))
    assert "LEAK" not in res.case_runs(2, "c2")[1] and "before any case started" in res.case_runs(2, "c2")[1]


def test_garbled_results_fail_closed(tmp_path):
    res = _results(tmp_path, (Kind.LOAD, 0, [1, 2]), (Kind.CASE, 0, "not a dict"))
    assert res.problem and "unexpected shape" in res.problem
    runs, why = res.case_runs(0, "c0")
    assert runs is None and "unreadable" in why
    (tmp_path / "other").mkdir()
    res = _results(tmp_path / "other", LOADED, (Kind.CASE, 0, {"id": "other", "runs": []}))
    assert "unreadable" in res.case_runs(0, "c0")[1]


@pytest.mark.parametrize("load", [{"ok": True, "kernels": {}, "environment": 5, "where": "x"},
                                  {"ok": True, "kernels": {"k": {"kind": 5, "configs": []}}},
                                  {"ok": "yes", "kernels": {}}])
def test_a_load_report_of_another_shape_is_garbled(tmp_path, load):
    res = _results(tmp_path, (Kind.LOAD, 0, load))
    assert res.load is None and "unexpected shape" in res.problem


def test_a_stream_that_breaks_keeps_what_came_before(tmp_path):
    """A frame cut short (a worker killed while writing) or bytes that are no frame end the stream there."""
    case = {"id": "c0", "runs": [{"outputs": []}]}
    for tail in (b"GRR1\x03", b"x" * 100, HEADER.pack(MAGIC, int(Kind.CASE), 1, 1 << 40)):
        folder = tmp_path / str(len(tail))
        folder.mkdir()
        res = _results(folder, LOADED, (Kind.CASE, 0, case), tail)
        assert res.case_runs(0, "c0")[0] is not None
        assert res.streams[0].problem
        assert "not run" in res.case_runs(1, "c1")[1]


def test_the_judge_follows_no_link(tmp_path):
    """A record stream that is a link (to anything) is not read: no path the worker could plant is followed."""
    target = write_stream(tmp_path / "elsewhere.bin", LOADED)
    os.symlink(target, tmp_path / "records-0-0.bin")
    run = WorkerRun(records=tmp_path / "records-0-0.bin", returncode=0, timed_out=False, seconds=1.0, log="")
    res = judge.WorkerResults.read([run])
    assert res.load is None and "no record stream" in res.problem


def test_pickled_code_is_not_executed(tmp_path):
    class Evil:
        def __reduce__(self):
            return (exec, ("open('%s', 'w').write('pwned')" % (tmp_path / "pwned"),))

    res = _results(tmp_path, LOADED, (Kind.CASE, 0, {"id": "c0", "runs": [Evil()]}))
    runs, why = res.case_runs(0, "c0")
    assert runs is None and "unreadable" in why
    assert not (tmp_path / "pwned").exists()


def test_a_restarted_worker_leaves_the_crash_on_its_case(tmp_path):
    res = _results(tmp_path, LOADED, crashed={1: "the worker was killed by SIGSEGV"})
    assert res.case_runs(1, "c1")[1].startswith("the worker was killed by SIGSEGV while running this case")


def test_the_load_report_comes_from_a_shard_that_saw_no_hidden_input(tmp_path):
    """Two shards: the hidden one's LOAD report says something else; the public one's is used."""
    hidden = WorkerRun(records=write_stream(tmp_path / "h.bin", (Kind.LOAD, 0, {"ok": False, "kernels": {},
                                                                          "error": "LEAK 1 2 3"})),
                       returncode=0, timed_out=False, seconds=1.0, log="", run_id="0-0", cases=[1], sees_hidden=True)
    public = WorkerRun(records=write_stream(tmp_path / "p.bin", LOADED), returncode=0, timed_out=False, seconds=1.0,
                       log="", run_id="1-0", cases=[0])
    assert judge.WorkerResults.read([hidden, public]).load == {"ok": True, "kernels": {}}


def test_shards_keep_specializations_together_and_follow_their_count():
    from grader.pipeline.grading import plan_shards

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
    from grader.worker import main as worker

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


@pytest.mark.parametrize("dtype", [torch.int8, torch.int32, torch.float16, torch.bfloat16, torch.float32])
@pytest.mark.parametrize("rule", [ROUNDED, OutputSpec(name="y", dtype="x", compare="close", rtol=1e-2, atol=1e-3),
                                  OutputSpec(name="y", dtype="x", compare="close", rtol=1e-4, atol=0.0)])
def test_the_fast_value_check_agrees_with_the_float64_rule_element_by_element(dtype, rule):
    """`accepted_range` judges an output in its own dtype; on values placed at, just inside and just outside every
    bound (and NaN, inf, out-of-range answers), it accepts exactly what the float64 rule accepts."""
    gen = torch.Generator().manual_seed(0)
    ref = torch.randn(4000, generator=gen, dtype=torch.float64) * (50 if not dtype.is_floating_point else 3)
    ref[:8] = torch.tensor([0.0, 0.5, -0.5, 126.9995, -127.5, 1e-7, 300.0, -300.0], dtype=torch.float64)
    if rule.compare == "rounded":
        lo, hi = torch.ceil(ref - rule.window - 0.5), torch.floor(ref + rule.window + 0.5)
    else:
        tol = rule.atol + rule.rtol * ref.abs()
        lo, hi = ref - tol, ref + tol
    candidates = [ref, lo, hi, lo - 1e-3, hi + 1e-3, lo - 1, hi + 1, ref.round()]
    got = torch.cat(candidates)
    refs = ref.repeat(len(candidates))
    if dtype.is_floating_point:
        got = got.to(dtype)
        step = torch.nextafter(got, torch.tensor(float("inf"), dtype=dtype))
        back = torch.nextafter(got, torch.tensor(float("-inf"), dtype=dtype))
        got = torch.cat([got, step, back, torch.tensor([float("nan"), float("inf")], dtype=dtype)])
        refs = torch.cat([refs, refs, refs, refs[:2]])
    else:
        info = torch.iinfo(dtype)
        got = got.round().clamp(info.min, info.max).to(dtype)
        got = torch.cat([got, got + (got < info.max).to(dtype), got - (got > info.min).to(dtype)])
        refs = refs.repeat(3)
    want, _ = judge.bad_values(rule, got, refs)
    bounds = judge.accepted_range(rule, refs, got.dtype)
    if bounds is None:  # no such range (a bound no value of the dtype meets): the float64 rule decides alone
        assert not judge.passes_fast(rule, got, refs)
        return
    lo_t, hi_t = bounds
    fast_bad = ~((got >= lo_t) & (got <= hi_t))
    assert not (want & ~fast_bad).any()  # never accepts what the float64 rule rejects
    if rule.compare == "rounded":
        assert torch.equal(fast_bad, want)
    else:  # it may leave to the float64 rule an element within a few float64 units of a bound, nothing else
        edge = ((got.double() - refs).abs() - judge.close_tolerance(rule, refs)).abs() <= 1e-12 * (refs.abs() + 1)
        assert not (fast_bad & ~want & ~edge).any()
    assert want.any() and not judge.passes_fast(rule, got, refs)
    assert judge.passes_fast(rule, got[~want], refs[~want])


def test_messages_give_the_relative_error_and_say_what_an_arange_error_means():
    close = OutputSpec(name="y", dtype="float32", compare="close", rtol=1e-4, atol=1e-6)
    msg = judge.compare_values(close, torch.tensor([1.0, 2.2]), torch.tensor([1.0, 2.0], dtype=torch.float64))
    assert "max abs error 0.2" in msg and "max relative error 0.1" in msg
    nan = judge.value_problem(close, torch.tensor([float("nan"), 1.0]), torch.tensor([0.5, 1.0], dtype=torch.float64))
    assert "NaN" in nan and "inf / inf" in nan and "subtract the maximum" in nan
    error = "ValueError: arange's range must be a power of 2\n  File ..."
    assert "hint: tl.arange(start, end) needs end - start to be a power of 2" in judge._error_text(error)
    assert "hint:" not in judge._error_text("ValueError: something else")


def test_an_address_finding_names_only_what_has_the_form_of_a_name():
    """describe_bounds turns a worker's finding into the student's message; a kernel, a buffer, an op or a dtype
    that is not of the form the worker makes is replaced, so no other worker text reaches a result."""
    from grader.judge import describe_bounds

    finding = {"kernel": "add_kernel", "line": 13, "op": "tl.load", "count": 11, "buffer": "x_ptr", "side": "after",
               "numel": 5, "dtype": "float32", "offsets": list(range(5, 16))}
    assert describe_bounds(finding).startswith("add_kernel (line 13): tl.load read 11 element(s) past the end of "
                                               "x_ptr (5 float32 elements, offsets 0..4): offsets 5..15")
    assert "ptrs[1] (" in describe_bounds({**finding, "buffer": "ptrs[1]"})
    forged = describe_bounds({**finding, "kernel": "see /etc/passwd: root", "buffer": "answer is 42",
                              "op": "x = 1", "dtype": "secret", "line": "7"})
    assert forged.startswith("a kernel: an access touched 11 element(s) past the end of a tensor (5 ? elements"), \
        forged


def test_accepted_ranges_are_computed_once_and_travel_with_the_answers(tmp_path, monkeypatch):
    """The trusted side computes each answer's accepted range once (`ranges_of`) and saves it with the answers; a
    judge process that loads them (`keep_ranges`) judges with them without computing them again, and with the
    same verdicts (the file is read as the judge reads it: weights_only)."""
    from types import SimpleNamespace

    rounded = OutputSpec("q", "int8", compare="rounded", window=1e-3)
    close = OutputSpec("y", "float16", compare="close", rtol=1e-2, atol=1e-3)
    exact = OutputSpec("n", "int32")
    x = torch.randn(1000, dtype=torch.float64) * 50
    case = judge.CaseData("c", [x.half()], {}, (x.clamp(-127, 127), x, torch.arange(3, dtype=torch.int32)))
    task = SimpleNamespace(outputs=[rounded, close, exact])
    ranges = judge.ranges_of(task, case)
    assert [len(r) for r in ranges] == [1, 1, 0]  # one range per rule and dtype; exact has none
    torch.save({"expected": [list(case.expected)], "ranges": [ranges]}, tmp_path / "answers.pt")
    saved = torch.load(tmp_path / "answers.pt", weights_only=True)
    expected = tuple(saved["expected"][0])
    judge.keep_ranges(expected, saved["ranges"][0])

    def computed_again(*_args):
        raise AssertionError("computed again")

    # accepted_range lives in grader/judge/values.py and looks them up there
    monkeypatch.setattr(judge.values, "rounded_bounds", computed_again)
    monkeypatch.setattr(judge.values, "close_tolerance", computed_again)
    right_q = torch.round(x.clamp(-127, 127)).to(torch.int8)
    assert judge.passes_fast(rounded, right_q, expected[0])
    assert not judge.passes_fast(rounded, right_q + 2, expected[0])
    assert judge.passes_fast(close, x.half(), expected[1])
    assert not judge.passes_fast(close, (x * 1.1).half(), expected[1])
    for fresh, kept in zip(ranges, saved["ranges"][0]):
        for (key, value), (key2, value2) in zip(fresh, kept):
            assert key == tuple(key2) and all(torch.equal(a, b) for a, b in zip(value, value2))


def test_a_garbled_printed_record_is_read_as_nothing():
    """A worker's `printed` of the wrong shape or size (its record is the student's to forge) decides nothing and
    shows at most PRINTED_CHARS: judge.printed_text reads only {"text": str, "dropped": int}."""
    from grader import judge

    for garbled in (None, "text", 5, {"text": b"x"}, {"text": ["a"]}, {"dropped": 3}, []):
        assert judge.printed_text({"printed": garbled}) == ""
    assert judge.printed_text("not a run") == ""
    big = judge.printed_text({"printed": {"text": "y" * 10**6, "dropped": "many"}})
    assert big.startswith("y" * judge.PRINTED_CHARS) and len(big) < judge.PRINTED_CHARS + 60
