"""The memory check, deeper provenance notes, and "caught means 0", each proven by the cheat it stops alone.

* A workspace written behind torch's back (tasks/10_quantize_global_int8/wrong/workspace_numpy_write.py, and task
  11's): made at import, written through its `.numpy()` view each call, copied out by the kernel. At 03993fa both
  earned full marks on the CPU (2/2 and 3/3, hidden cases included); the memory check alone now fails them.
* Codes nested past the provenance walk's depth in a kernel argument (tests/files/launder_nested_tuple.py): noted
  as one digest now, where they were dropped.
* A file caught in one case loses every case: `launder_str.py` kept its one-element case (0.125) before.
"""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from grader.config import ROOT, SandboxConfig, load_config, load_task
from grader.judge import case as judge_case
from grader.judge import provenance
from grader.pipeline.grading import Job, grade_jobs
from grader.protocol import torch_ops
from grader.worker import memory_check
from grader.worker import provenance as worker_provenance

TASK10 = ROOT / "tasks" / "10_quantize_global_int8"
TASK11 = ROOT / "tasks" / "11_quantize_rowwise_int8"
MEMORY = "that no kernel and no torch operation wrote"


@pytest.fixture(scope="module")
def cfg():
    return load_config(ROOT / "config.yaml")


def _grade(jobs, cfg, static_checks=False):
    cfg = dataclasses.replace(cfg, writes=False, judges=0, sandbox=SandboxConfig(enabled=True))
    return grade_jobs(jobs, cfg, "cpu", workers=len(jobs), static_checks=static_checks)


def _tests(result) -> dict:
    return {t.name: t for t in result.tests}


def test_a_workspace_written_behind_torch_is_stopped_by_the_memory_check_alone(task10, cfg, monkeypatch):
    """Every other layer off: the static policy, the write check, the op audit's policy and the provenance
    comparison. With the memory check on, every case fails naming the buffer and the launch; with it off too, the
    cheats earn every case (they are real)."""
    monkeypatch.setattr(torch_ops, "check", lambda *a, **k: None)
    monkeypatch.setattr(provenance, "compare", lambda *a, **k: None)
    small10 = task10.subset({"n127_fp16", "n1025_fp32"}, autotune_points=0.0)
    small11 = load_task(TASK11).subset({"r3_c129_fp16", "r257_c127_fp32"}, autotune_points=0.0)
    jobs = [Job(small10, TASK10 / "wrong" / "workspace_numpy_write.py", "w10"),
            Job(small11, TASK11 / "wrong" / "workspace_numpy_write.py", "w11"),
            Job(small10, TASK10 / "right" / "workspace_and_tuple.py", "ok10")]
    on = _grade(jobs, cfg)
    for result in on[:2]:
        for t in result.tests:
            if t.name not in ("imports", "signatures"):
                assert t.outcome == "failed", (result.task, t.name, t.message)
        first = next(t for t in result.tests if MEMORY in t.message)
        assert "the buffer passed as" in first.message and "at line" in first.message, first.message
        assert result.caught and MEMORY in result.caught["why"]
    assert on[2].score == on[2].max_score, [t.message for t in on[2].tests if t.outcome != "passed"]

    monkeypatch.setattr(judge_case, "memory_problems", lambda events: [])
    off = _grade(jobs[:2], cfg)
    for result in off:
        assert result.score == result.max_score, [t.message for t in result.tests if t.outcome != "passed"]


def test_the_ledger_keeps_what_tracked_writers_leave_and_sees_any_other_change():
    ledger = memory_check.Ledger()
    ws = torch.zeros(64, dtype=torch.float32)
    ledger.wrote([ws])
    ledger.start(set())
    ledger.check([("ws", ws[:8])], "launch", "k", 3)
    assert ledger.events == []
    ws.numpy()[5] = 7.0  # a numpy view: no torch operation runs
    ledger.check([("ws", ws[4:])], "launch", "k", lambda: 9)  # another view of the same storage
    (event,) = ledger.events
    assert event == {"at": "launch", "name": "k", "line": 9, "arg": "ws", "bytes": 2}  # 7.0 is 0x40e00000
    ledger.check([("ws", ws)], "launch", "k", 9)
    assert len(ledger.events) == 1  # reported once
    ws.add_(1.0)  # a torch operation that writes: the ledger is told, as the dispatch mode tells it
    ledger.wrote(memory_check.written_args(torch.ops.aten.add_.Tensor, (ws, torch.tensor(1.0)), {}))
    ledger.check([("ws", ws)], "op", "mul", 4)
    assert len(ledger.events) == 1
    inputs = torch.ones(4)
    ledger.start({inputs.untyped_storage().data_ptr()})
    inputs.numpy()[0] = 3.0
    ledger.check([("x", inputs)], "launch", "k", 1)
    assert ledger.take() == []  # the call's inputs are left out: the judge checks them against what was sent
    ptr = ws.untyped_storage().data_ptr()
    del ws
    assert ptr not in ledger.saved  # the copy goes with the storage


def test_written_args_follow_the_schema():
    x, out = torch.ones(3), torch.empty(3)
    assert memory_check.written_args(torch.ops.aten.add.out, (x, x), {"out": out})[0] is out
    assert memory_check.written_args(torch.ops.aten.add.Tensor, (x, x), {}) == []
    assert memory_check.written_args(torch.ops.aten.copy_.default, (out, x), {})[0] is out


def test_values_nested_past_the_walks_depth_or_length_are_noted():
    deep = lambda v: ((((((v,),),),),),)  # noqa: E731 - five tuples deep
    rec = worker_provenance.Provenance()
    rec.start([])
    rec.launch("k", 1, ["a", "b"], (deep(17), tuple(range(300))), {})
    rec.launch("k", 1, ["a", "b"], (deep(18), tuple(range(299)) + (5,)), {})
    first, second = rec.stop()["checkpoints"]
    notes = lambda cp: dict((p, n) for p, n in cp["args"])  # noqa: E731
    a, b = notes(first), notes(second)
    deep_paths = [p for p in a if p.startswith("a")]
    assert deep_paths and a[deep_paths[0]] != b[deep_paths[0]]  # noted, and the two values differ
    assert a["b.rest"] != b["b.rest"] and a["b[0]"] == b["b[0]"]  # past the 256th item: one digest
    graded = {"checkpoints": [first], "overflow": 0}
    twin = {"checkpoints": [{**second, "args": [[p, n] for p, n in first["args"] if p != deep_paths[0]]
                             + [[deep_paths[0], b[deep_paths[0]]]]}], "overflow": 0}
    assert "more than a 64-bit number" in provenance.compare(graded, twin, 0)


def test_a_file_caught_in_one_case_earns_no_points_for_the_tasks_cases(task10, cfg, tmp_path):
    """launder_str.py's one-element case cannot tell (one order only), and it kept that case's points; the case
    the twin catches now takes them. The caught case is named to the student only when it is public, and the staff
    summary lists the file."""
    two = task10.subset({"n1_fp32", "n127_fp16"}, autotune_points=0.0)
    (result,) = _grade([Job(two, TASK10 / "wrong" / "launder_str.py", "s")], cfg, static_checks=True)
    tests = _tests(result)
    assert tests["n127_fp16"].outcome == "failed" and "the provenance check" in tests["n127_fp16"].message
    assert tests["n1_fp32"].outcome == "failed" and tests["n1_fp32"].points == 0
    assert "points withheld: in case n127_fp16" in tests["n1_fp32"].message
    assert result.score == 0 and result.caught["case"] == "n127_fp16"
    assert "change with the input values" in result.caught["why"]

    hidden = dataclasses.replace(two, cases=[dataclasses.replace(c, visibility="hidden") if c.id == "n127_fp16"
                                             else c for c in two.cases])
    (secret,) = _grade([Job(hidden, TASK10 / "wrong" / "launder_str.py", "s")], cfg, static_checks=True)
    student = secret.student_json()
    assert "n127_fp16" not in json.dumps(student), student
    assert student["caught"]["case"] == "hidden"
    assert "points withheld: in a hidden case" in _tests(secret)["n1_fp32"].message

    from grader.config import Homework
    from grader.course.batch import write_summary

    out = tmp_path / "results"
    (out / "ann").mkdir(parents=True)
    (out / "ann" / f"{two.id}.staff.json").write_text(json.dumps(result.staff_json()))
    (out / "ann" / f"{two.id}.json").write_text(json.dumps(result.student_json()))
    hw = Homework(id="hw", title="HW", tasks={two.id: 2.0})
    write_summary({"ann": {"total": 0.0}}, hw, out, out / "summary.md")
    summary = (out / "summary.md").read_text()
    assert "## Caught doing a task's work outside its kernels" in summary
    listed = summary.split("## Caught doing a task's work outside its kernels")[1]
    assert "- ann: " in listed and "n127" in listed and "change with the input values" in listed, listed


def test_a_workspace_made_in_the_graded_call_and_kept_does_not_set_the_twin_apart():
    """A workspace allocated lazily in the first call (on CUDA, right/workspace_and_tuple.py makes its workspace
    so) is in flow in the twin, which comes later: a guarded allocation is in flow from its start, so an operation
    on it alone is a checkpoint in both calls. Before, the graded call had no checkpoint there and the twin had
    one ("did other work": every case of that file failed on the H200). A table made from constants in the first
    call only (task 20's right/shift_table.py) still sets nothing apart."""
    kept: dict = {}

    def call(x, rec):
        if "ws" not in kept:
            kept["ws"] = torch.zeros(16)
            worker_provenance.register([kept["ws"]])  # a guarded allocation, as the worker's allocator does
            rec.hold(kept["ws"])
            table = torch.arange(4)
            worker_provenance.register([table])  # an operation's result
            kept["table"] = table * 2
            rec.op("mul", 2, (table, 2), {}, kept["table"])
        part = kept["ws"][:4]
        rec.op("slice", 3, (kept["ws"], 0, 0, 4), {}, part)
        rec.op("copy_", 3, (part, x), {}, part)
        rec.launch("k", 4, ["a", "b", "c"], (part, x, kept["table"]), {})

    records = []
    for values in ([1.0, 2.0, 3.0, 4.0], [4.0, 3.0, 2.0, 1.0]):
        x = torch.tensor(values)
        worker_provenance.new_call()
        rec = worker_provenance.Provenance()
        rec.start([x])
        call(x, rec)
        records.append(rec.stop())
    assert [cp["name"] for cp in records[0]["checkpoints"]] == ["slice", "copy_", "k"]
    assert provenance.compare(*records, 0) is None


def test_codes_packed_into_one_int_are_stopped_by_the_provenance_check_alone(task10, cfg, monkeypatch):
    """wrong/constexpr_int_codes.py packs a case's codes into one Python int handed as a tl.constexpr: one
    differing number, within the allowance of four, but of 8 bits per element. Every other layer off (the static
    policy, the write check, the op audit's policy), the provenance check fails the 127-element case by the
    number's bits; at 03993fa the file earned 0.45 of task 10's 2 points (its cases of 1 and 127 elements and the
    autotune test)."""
    monkeypatch.setattr(torch_ops, "check", lambda *a, **k: None)
    one = task10.subset({"n127_fp16"}, autotune_points=0.0)
    (result,) = _grade([Job(one, TASK10 / "wrong" / "constexpr_int_codes.py", "c")], cfg)
    case = _tests(result)["n127_fp16"]
    assert case.outcome == "failed" and "more than a 64-bit number" in case.message, case.message


@pytest.mark.parametrize("events", [
    "not a list", [1], [{"at": "launch"}], [{"at": "elsewhere", "name": "k", "arg": "a", "bytes": 1, "line": 1}],
    [{"at": "op", "name": "k", "arg": "a", "bytes": "8 GB", "line": 1}],
    [{"at": "op", "name": "k", "arg": "a", "bytes": 1, "line": "1; rm -rf"}],
])
def test_a_garbled_memory_record_is_that_calls_failure(events):
    from grader.judge.writes import memory_problems

    assert memory_problems(events) == ["the worker's record of the memory check is garbled"]


def test_no_worker_text_reaches_the_memory_checks_message():
    from grader.judge.writes import memory_problems

    (message,) = memory_problems([{"at": "launch", "name": "<b>k</b>\x1b[31m", "arg": "=HYPERLINK(\"x\")",
                                   "bytes": 3, "line": 7}])
    assert "<b>" not in message and "\x1b" not in message and "HYPERLINK" not in message
    assert message.startswith("a buffer it received to the launch of a kernel at line 7 held 3 byte(s)")
    assert memory_problems(None) == []  # the check was off
