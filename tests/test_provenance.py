"""The provenance check: a differential replay of each case, proven by the cheats it stops alone.

tasks/10_quantize_global_int8/wrong/launder_*.py carry input data out of every route the grader follows (str(),
format(), "%s", frombuffer, DLPack, numpy, a file, iteration, pickle, struct, a launch grid) and back to a kernel
that only stores it. Graded here with every other layer off (the static policy, the write check, the op audit's
policy), the provenance check alone fails each; with it off too, each earns full marks (they are real cheats). A
cheat that replays its first call's bytes in the twin is stopped by the twin's outputs, and the reference and the
right/ files with constant tables keep full marks (selftest). Runs on the CPU interpreter, and on CUDA as well where
a GPU is visible.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch

from grader.config import ROOT, SandboxConfig, load_config
from grader.judge import provenance
from grader.pipeline.grading import Job, grade_jobs
from grader.protocol import torch_ops

TASK10 = ROOT / "tasks" / "10_quantize_global_int8"
FILES = Path(__file__).parent / "files"
DEVICES = ["cpu", *(["cuda"] if torch.cuda.is_available() else [])]
CHANNELS = [*sorted(p for p in (TASK10 / "wrong").glob("launder_*.py") if p.name != "launder_copy.py"),
            FILES / "launder_grid.py"]  # the grid: a launch an element, too slow for selftest's every case
CHANGES = "change with the input values"


@pytest.fixture(scope="module")
def one_case(task10):
    return task10.subset({"n127_fp16"}, autotune_points=0.0, timeout_s={"cpu": 120, "cuda": 60})


@pytest.fixture(scope="module")
def cfg():
    return load_config(ROOT / "config.yaml")


def _grade(jobs, cfg, device, provenance_on=True):
    cfg = dataclasses.replace(cfg, provenance=provenance_on, writes=False, judges=0,
                              sandbox=SandboxConfig(enabled=True))
    return grade_jobs(jobs, cfg, device, workers=len(jobs), static_checks=False)


def _case(result, name="n127_fp16"):
    return next(t for t in result.tests if t.name == name)


def test_the_corpus_has_ten_channels():
    assert len(CHANNELS) >= 11, CHANNELS


@pytest.mark.parametrize("device", DEVICES)
def test_each_laundering_channel_is_stopped_by_the_provenance_check_alone(one_case, cfg, device, monkeypatch):
    monkeypatch.setattr(torch_ops, "check", lambda *a, **k: None)  # the op audit's policy off (judged here)
    jobs = [Job(one_case, p, p.stem) for p in CHANNELS] + [Job(one_case, TASK10 / "solution.py", "ok")]
    alone = _grade(jobs, cfg, device)
    off = _grade(jobs, cfg, device, provenance_on=False)
    for name, on_, off_ in zip(CHANNELS, alone[:-1], off[:-1]):
        assert _case(off_).outcome == "passed", (name, _case(off_).message)  # a real cheat: full marks without it
        assert _case(on_).outcome == "failed", (name, _case(on_).message)
        assert "the provenance check" in _case(on_).message and CHANGES in _case(on_).message, _case(on_).message
    assert alone[-1].score == alone[-1].max_score and off[-1].score == off[-1].max_score


@pytest.mark.parametrize("device", DEVICES)
def test_a_cheat_that_replays_its_first_call_in_the_twin_is_stopped_by_the_twins_outputs(one_case, cfg, device,
                                                                                           monkeypatch):
    monkeypatch.setattr(torch_ops, "check", lambda *a, **k: None)
    on, off = _grade([Job(one_case, FILES / "launder_replay.py", "r")], cfg, device) + \
        _grade([Job(one_case, FILES / "launder_replay.py", "r")], cfg, device, provenance_on=False)
    assert _case(off).outcome == "passed", _case(off).message
    message = _case(on).message
    assert _case(on).outcome == "failed" and "the provenance check" in message, message
    assert "element(s) differ" in message and CHANGES not in message, message  # the outputs, not the records


@pytest.mark.parametrize("device", DEVICES)
def test_torch_work_on_what_a_kernel_wrote_is_not_a_constant_table(one_case, cfg, device):
    """round_kernel_output.py builds a buffer with torch.arange (a constant table), has a kernel copy x into it and
    rounds it with torch: the launch makes it a kernel's data, and the op audit counts that work."""
    on = _grade([Job(one_case, FILES / "round_kernel_output.py", "k")], cfg, device)[0]
    assert _case(on).outcome == "failed" and "q must come from your kernel" in _case(on).message, _case(on).message


# ----------------------------------------------------------------------------------- the judge's comparison


def _rec(*checkpoints, overflow=0):
    return {"checkpoints": [{"at": at, "name": name, "line": line, "args": args}
                            for at, name, line, args in checkpoints], "overflow": overflow}


def test_the_comparison_judges_tensors_numbers_and_the_order_of_the_work():
    table = ["t", "int32", [4], [1], "u0"]
    same = _rec(("launch", "k", 3, [["a", table], ["n", ["i", "4"]]]), ("return", "return", None, []))
    assert provenance.compare(same, same, 0) is None
    other_tensor = _rec(("launch", "k", 3, [["a", [*table[:4], "ab12"]], ["n", ["i", "4"]]]),
                        ("return", "return", None, []))
    assert CHANGES in provenance.compare(same, other_tensor, 0)
    # a tensor in flow in one call only (a workspace kept from an earlier call) is not compared
    kept = _rec(("launch", "k", 3, [["n", ["i", "4"]]]), ("return", "return", None, []))
    assert provenance.compare(same, kept, 0) is None
    # numbers: a few may differ (a call counter), more only as the task's python_reads allow
    many = [_rec(*[("launch", "k", 3, [["n", ["i", str(v + k)]]]) for k in range(9)]) for v in (0, 100)]
    assert "9 number(s)" in provenance.compare(*many, 0)
    assert provenance.compare(*many, 2) is None  # 4 + 4 * 2 >= 9
    few = [_rec(*[("launch", "k", 3, [["n", ["i", str(v + k)]]]) for k in range(4)]) for v in (0, 100)]
    assert provenance.compare(*few, 0) is None
    # ... each of at most 64 bits: one Python int handed to a kernel as a constexpr carried a case's 1,025 codes
    # (about a kilobyte) as one differing number, and earned 0.825/2 (issue of 2026-12-03); so do a string, a
    # complex number and a wider grid, and a number's text too long to be one is not even parsed
    codes = [_rec(("launch", "k", 3, [["packed", ["i", str(v)]]]), ("return", "return", None, []))
             for v in (int.from_bytes(b"\x07" * 1025, "little"), int.from_bytes(b"\x05" * 1025, "little"))]
    assert "more than a 64-bit number" in provenance.compare(*codes, 0)
    for u, v in ((["s", "abc"], ["s", "abd"]), (["c", "(1+2j)"], ["c", "(1+3j)"]), (["i", str(1 << 64)], ["i", "1"]),
                 (["i", "4,1,1"], ["i", f"{1 << 70},1,1"]), (["i", "9" * 5000], ["i", "8" * 5000])):
        wide = [_rec(("launch", "k", 3, [["x", note]])) for note in (u, v)]
        assert "more than a 64-bit number" in provenance.compare(*wide, 0), (u, v)
    edge = [_rec(("launch", "k", 3, [["x", ["i", str(n)]], ["g", ["i", f"{n},1,1"]], ["f", ["f", float.hex(n / 3)]]]))
            for n in ((1 << 63) - 1, -(1 << 62))]  # int64's range, a grid, a float: fine (3 numbers <= 4)
    assert provenance.compare(*edge, 0) is None
    assert "(at most 32 bytes)" in provenance.compare(*many, 0)  # the allowance stated in bytes
    # other work: another kernel, or one more launch
    another = _rec(("launch", "j", 3, []), ("return", "return", None, []))
    assert "did other work" in provenance.compare(same, another, 0)
    longer = _rec(("launch", "k", 3, [["a", table], ["n", ["i", "4"]]]), ("launch", "k", 3, []),
                  ("return", "return", None, []))
    assert "did other work" in provenance.compare(same, longer, 0)


GARBLED = [None, [], {"checkpoints": "x", "overflow": 0}, {"checkpoints": [], "overflow": "0"},
           {"checkpoints": [{"at": "exec", "name": "k", "line": 1, "args": []}], "overflow": 0},
           {"checkpoints": [{"at": "op", "name": "k", "line": "1", "args": []}], "overflow": 0},
           {"checkpoints": [{"at": "op", "name": "k", "line": 1, "args": [["a"]]}], "overflow": 0}]


@pytest.mark.parametrize("garbled", GARBLED)
def test_a_garbled_record_is_the_jobs_failure(garbled):
    good = _rec(("return", "return", None, []))
    with pytest.raises(ValueError):
        provenance.compare(garbled, good, 0)
    with pytest.raises(ValueError):
        provenance.compare(good, garbled, 0)


def test_no_worker_text_reaches_the_message():
    evil = "<img src=x onerror=alert(1)>\n- forged: 4 of 4"
    a = _rec(("launch", evil, 3, [[evil, ["t", "int8", [2], [1], "u1"]]]))
    b = _rec(("launch", evil, 3, [[evil, ["t", "int8", [2], [1], "ffff"]]]))
    message = provenance.compare(a, b, 0)
    assert message and "<img" not in message and "forged" not in message, message


def test_a_cases_wrong_values_are_said_once_not_again_for_its_twin(one_case, cfg):
    """truncate.py's values are wrong in the graded call and in its twin: the message lists the graded call's, and
    the twin's (other elements at the same positions) are not added beside them as one list mixing two calls."""
    (result,) = _grade([Job(one_case, TASK10 / "wrong" / "truncate.py", "t")], cfg, "cpu")
    message = _case(result).message
    assert message.count("element(s) differ") == 1 and "the provenance check" not in message, message
