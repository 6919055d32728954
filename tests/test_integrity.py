"""Every layer of integrity, proven by a cheat it stops: the static policy, the op audit and the sandbox.

The known cheats live in tasks/10_quantize_global_int8/wrong/ and tasks/12_matmul_int8_fused_dequant/wrong/
(selftest proves their verdicts). Here they are graded again with the layer in front switched off, to show that
the layer behind it stops them too, and with the sandbox off, to show that they are real cheats. Runs on the CPU
interpreter, and on CUDA as well where a GPU is visible (the H100 box).
"""

from __future__ import annotations

import dataclasses
import os
import signal
import sys
import tempfile
from pathlib import Path

import pytest
import torch

from grader.config import ROOT, SandboxConfig, load_config
from grader.pipeline.grading import Job, grade_jobs
from grader.protocol import torch_ops
from grader.worker import sandbox

TASK10 = ROOT / "tasks" / "10_quantize_global_int8"
WRONG = TASK10 / "wrong"
DEVICES = ["cpu", *(["cuda"] if torch.cuda.is_available() else [])]


@pytest.fixture(scope="module")
def small10(task10):
    cases = [c for c in task10.cases if c.id in ("n1_fp32", "n127_fp16")]
    return task10.subset({c.id for c in cases}, autotune_points=0.0, timeout_s={"cpu": 60, "cuda": 60})


@pytest.fixture(scope="module")
def cfg():
    return load_config(ROOT / "config.yaml")


def _messages(result) -> dict[str, str]:
    return {t.name: t.message for t in result.tests}


def _grade(jobs, cfg, device, static_checks=True, sandbox_on=True, writes=True, provenance=True):
    """`provenance`: the provenance check (tests/test_provenance.py proves it alone); off where a test shows
    another layer alone, or every layer off."""
    cfg = dataclasses.replace(cfg, sandbox=SandboxConfig(enabled=sandbox_on), writes=writes, provenance=provenance)
    return grade_jobs(jobs, cfg, device, workers=len(jobs), static_checks=static_checks)


@pytest.mark.parametrize("device", DEVICES)
def test_the_sandbox_and_the_op_audit_stop_the_cheats_behind_the_static_policy(small10, cfg, device):
    """launder_copy.py passes the static policy; the others it refuses (selftest proves it), so they are graded
    here with it off, to show that the sandbox stops them too."""
    names = ["launder_copy.py", "shell_command.py", "fork_bomb.py", "network.py"]
    jobs = [Job(small10, WRONG / n, n) for n in names] + [Job(small10, TASK10 / "solution.py", "good")]
    launder, shell, bomb, network, good = _grade(jobs, cfg, device, static_checks=False)
    # a fork bomb (and everything else here) costs only its own tests
    assert good.score == good.max_score
    for result in (launder, shell, bomb, network):
        assert result.score == 0
    msg = _messages(launder)
    for case in ("n1_fp32", "n127_fp16"):
        assert "must come from your kernel" in msg[case] and "at line 27" in msg[case], msg[case]
    assert "torch.round" in msg["n127_fp16"] or "torch.mul" in msg["n127_fp16"]
    assert "running /bin/sh was refused by the grader's sandbox" in _messages(shell)["n1_fp32"]
    assert "starting a process was refused" in _messages(bomb)["n1_fp32"]
    assert "a network connection was refused" in _messages(network)["n1_fp32"]
    # staff see which layers were on
    layers = good.staff["sandbox"]
    assert all(layers[k].startswith("on") for k in ("network", "user", "tmp", "limits", "files")), layers


@pytest.mark.parametrize("device", DEVICES)
def test_each_layer_behind_the_static_policy_stops_what_it_refuses(small10, cfg, device, answer_reader):
    forged, read = WRONG / "forged_launch.py", answer_reader

    static = _grade([Job(small10, forged, "f"), Job(small10, read, "r")], cfg, device)
    assert "use of triton.runtime.jit is not allowed" in _messages(static[0])["imports"]
    assert ".__file__ is not allowed" in _messages(static[1])["imports"]

    forged_r, read_r = _grade([Job(small10, forged, "f"), Job(small10, read, "r")], cfg, device,
                              static_checks=False)
    assert forged_r.score == 0 and read_r.score == 0
    assert "must come from your kernel" in _messages(forged_r)["n127_fp16"]  # the op audit, despite the forgery
    message = _messages(read_r)["n1_fp32"]
    assert "opening tasks/10_quantize_global_int8/solution.py was refused by the grader's sandbox" in message
    assert "Reference solution" not in message

    # with the sandbox off too, the cheat works: the answer key lands in the student's message
    (leak,) = _grade([Job(small10, read, "r")], cfg, device, static_checks=False, sandbox_on=False)
    assert "Reference solution for task 10" in _messages(leak)["n1_fp32"]
    assert leak.staff["sandbox"] == {"sandbox": "off: grading.sandbox is false"}


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the speed tier runs on CUDA only")
def test_the_staff_timing_run_stops_a_submission_that_slows_the_baseline(task10, cfg):
    """compile_stance.py makes torch.compile's baseline run eagerly in its process. The static policy refuses it;
    with that layer off, the staff's run of the reference (which no submission touched) shows the baseline's real
    time, and the speed test fails. The case itself passes: the answer is right."""
    task = task10.subset({"large_fp16"}, autotune_points=0.0)
    cheat = WRONG / "compile_stance.py"
    (refused,) = _grade([Job(task, cheat, "stance")], cfg, "cuda")
    assert "use of torch.compiler is not allowed" in _messages(refused)["imports"]
    stance, good = _grade([Job(task, cheat, "stance"), Job(task, TASK10 / "solution.py", "good")], cfg, "cuda",
                          static_checks=False)
    tests = {t.name: t for t in stance.tests}
    assert tests["large_fp16"].outcome == "passed"
    assert tests["speed_vs_compile"].outcome == "failed"
    message = tests["speed_vs_compile"].message
    assert "not judged: the baseline's GPU busy time was" in message, message
    good_speed = next(t for t in good.tests if t.name == "speed_vs_compile")
    assert good_speed.outcome == "passed" and "informational (0 points)" in good_speed.message, good_speed.message


def test_what_a_submission_raises_reaches_students_bounded(small10, cfg, tmp_path):
    loud = tmp_path / "loud.py"
    loud.write_text((TASK10 / "solution.py").read_text().replace(
        "    n_elements = x.numel()\n", "    raise RuntimeError('x' * 100000)\n", 1))
    (result,) = _grade([Job(small10, loud, "loud")], cfg, "cpu")
    message = _messages(result)["n1_fp32"]
    assert "more characters" in message and len(message) < 1500


def test_the_worker_environment_holds_nothing_of_the_graders(small10, cfg, tmp_path, monkeypatch):
    monkeypatch.setenv("GRADER_TEST_SECRET", "s3cr3t-token")
    spy = tmp_path / "spy.py"
    spy.write_text((TASK10 / "solution.py").read_text().replace(
        "    n_elements = x.numel()\n", "    raise RuntimeError(repr(sorted(torch.os.environ.items())))\n", 1))
    (result,) = _grade([Job(small10, spy, "spy")], cfg, "cpu", static_checks=False)
    message = _messages(result)["n1_fp32"]
    assert "RuntimeError" in message and "s3cr3t-token" not in message and "GRADER_TEST_SECRET" not in message


# ----------------------------------------------------------------------------------------- the judge's side


def test_the_op_audit_counts_only_what_the_task_does_not_allow():
    rec = lambda op, n, scalar=False, line=7: {"op": op, "line": line, "scalar": scalar, "calls": 1,  # noqa: E731
                                               "elements": n, "shape": [n]}
    allow = ("alloc", "view", "cast", "scalar", "abs", "max")
    assert torch_ops.check([rec("abs", 1000), rec("max", 1), rec("empty", 1000), rec("reciprocal", 1, True)],
                           allow, 1000, "q") is None
    # a computation split in slices adds up
    msg = torch_ops.check([rec("round", 400, line=9), rec("round", 400, line=9), rec("mul", 300, line=8)],
                          allow, 1000, "q")
    assert msg.startswith("torch.round on 400 element(s) at line 9 (and 2 other torch operation(s), 1100 elements")
    assert "q must come from your kernel" in msg
    # below the output's size: a little torch work is allowed
    assert torch_ops.check([rec("round", 10)], allow, 1000, "q") is None
    # scalar arithmetic only when the task allows it
    assert torch_ops.check([rec("div", 1, True)], ("alloc",), 1, "q").startswith("torch.div on 1 element")
    # data handed to Python, and import-time work, say so
    assert "with .tolist()" in torch_ops.check([rec("tolist", 1000)], allow, 1000, "q")
    # input data handed to Python counts against the task's budget, however small beside the output, and even as
    # "scalar" work (one element of a value computed from an input: `x[i:i+1].max().item()`)
    read = {**rec("item", 3, True, line=12), "reads_input": True}
    msg = torch_ops.check([read], allow, 1000, "q")
    assert msg.startswith("a tensor's value read into Python (.item(), float(t), int(t), bool(t)) on 3 element(s) "
                          "at line 12: 3 element(s) of input data"), msg
    assert "where this task allows 0" in msg
    assert torch_ops.check([read], allow, 1000, "q", python_reads=3) is None
    assert torch_ops.check([rec("item", 1, True)], allow, 1000, "q") is None  # scalar work on no input data
    assert "while the file was imported" in torch_ops.check([{**rec("round", 1000), "phase": "import"}], allow,
                                                            1000, "q")
    # a garbled record fails closed
    for garbled in ([{"op": "round"}], [{"op": "round", "elements": -1}], "round", [rec("round", 5) | {"op": 3}]):
        with pytest.raises(ValueError):
            torch_ops.check(garbled, allow, 1000, "q")


def test_sandbox_messages_name_what_was_refused():
    assert sandbox.explain(PermissionError(13, "Permission denied", str(ROOT / "tasks" / "x.py")), ROOT) == \
        "opening tasks/x.py was refused by the grader's sandbox"
    assert "network" in sandbox.explain(OSError(101, "Network is unreachable"), ROOT)
    assert "process" in sandbox.explain(BlockingIOError(11, "Resource temporarily unavailable"), ROOT)
    assert sandbox.explain(ValueError("bad value"), ROOT) is None


def test_the_sandbox_rules_keep_the_project_out(tmp_path: Path, monkeypatch):
    # The read list comes from a fixed list, never sys.path: a working directory on sys.path (python -m or -c
    # puts it first) opened the whole of /tmp, other jobs' folders and the oracle's answers with it.
    monkeypatch.setattr(sys, "path", ["", "/tmp", str(tmp_path.parent), *sys.path])
    plan = sandbox.plan([tmp_path], ROOT, "cpu", 60, sandbox.Limits())
    rules = {Path(p): r for p, r in plan.rules.items()}
    root = ROOT.resolve()
    temp = Path(tempfile.gettempdir()).resolve()
    for path in rules:
        assert path != root and not root.is_relative_to(path), f"{path} would expose the whole project"
        assert not temp.is_relative_to(path), f"{path} would expose the temp folder"
        # inside the temp folder: only the worker's own folder, or the project's (a clone in /tmp, its .venv)
        assert path == tmp_path.resolve() or not path.is_relative_to(temp) or path.is_relative_to(root), path
        if path.is_relative_to(root):
            assert path.relative_to(root).parts[0] not in sandbox.PROJECT_SECRETS, path
    assert tmp_path.parent.resolve() not in rules  # on sys.path above, as the fork server's /tmp was
    assert rules[tmp_path.resolve()] & sandbox.FS_WRITE_FILE
    assert all(not (r & sandbox.FS_WRITE_FILE) for p, r in rules.items()
               if p not in (tmp_path.resolve(), Path("/proc/self").resolve()) and not str(p).startswith("/dev/"))


ORPHAN = '''
import os, time
import torch, triton, triton.language as tl

@triton.jit
def _quantize_global(x_ptr, absmax_inv_ptr, output_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pass

def quantize_global(x):
    if os.fork() == 0:
        os.setsid()  # out of the worker's process group: the runner's killpg misses it
        try:
            os.execv("/bin/sleep", ["/bin/sleep", "97.531"])
        except OSError:  # the sandbox refuses running programs: the child sleeps as it is, named for the test
            try:
                import ctypes
                ctypes.CDLL(None).prctl(15, b"orphan-97.531", 0, 0, 0)  # PR_SET_NAME: its /proc/<pid>/comm
            except Exception:
                pass
            time.sleep(97.531)
        os._exit(0)
    raise RuntimeError("left a child behind")
'''


def _left_behind() -> list[int]:
    """The orphan's processes still alive: running its sleep, or named for it (where the sandbox refused the
    program). Not every process of a sandboxed user id: other gradings may run beside the tests (`make test` runs
    the selftest at the same time), and their workers are no orphans."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes()
            comm = (entry / "comm").read_text()
        except OSError:
            continue
        if b"97.531" in cmd or "97.531" in comm:
            found.append(int(entry.name))
    return found


@pytest.mark.parametrize("device", ["cpu"])
def test_the_cheats_that_the_static_policy_refuses_are_stopped_behind_it(small10, cfg, device, tmp_path):
    """thread_launder.py: the op audit follows the thread. A child in a session of its own: the PID namespace
    ends it with the worker (with the sandbox off, it outlives the grading, which is what it would do). On the
    CPU only: the PID namespace is off on CUDA (grader/worker/sandbox.py PID_NAMESPACE_CUDA)."""
    orphan = tmp_path / "orphan.py"
    orphan.write_text(ORPHAN)
    thread, escaped = _grade([Job(small10, WRONG / "thread_launder.py", "t"), Job(small10, orphan, "o")], cfg,
                             device, static_checks=False)
    assert thread.score == 0 and "must come from your kernel" in _messages(thread)["n127_fp16"]
    assert escaped.staff["sandbox"]["processes"].startswith("on"), escaped.staff["sandbox"]
    assert _left_behind() == []
    _grade([Job(small10, orphan, "o")], cfg, device, static_checks=False, sandbox_on=False)
    survivors = _left_behind()
    for pid in survivors:
        os.kill(pid, signal.SIGKILL)
    assert survivors, "with the sandbox off, the orphan outlives the worker"


WRITTEN_OUTSIDE = "held values before the first kernel launch that received it"


def _stopped_by_static_policy_and_write_check(cheat: Path, task, cfg, device: str = "cpu") -> str:
    """Grade `cheat` on the CPU with the static policy and the write check off (every case must pass: nothing else
    stops it), with the write check alone (every case fails: values placed before the launch), and with the
    static policy alone (it earns nothing); returns the imports test's message."""
    cases = {c.id for c in task.cases}
    behind, alone = _grade([Job(task, cheat, "c")], cfg, device, static_checks=False, writes=False,
                           provenance=False) + \
        _grade([Job(task, cheat, "c")], cfg, device, static_checks=False, provenance=False)
    assert all(t.outcome == "passed" for t in behind.tests if t.name in cases), _messages(behind)
    assert all(WRITTEN_OUTSIDE in m for n, m in _messages(alone).items() if n in cases), _messages(alone)
    (checked,) = _grade([Job(task, cheat, "c")], cfg, device, writes=False, provenance=False)
    assert checked.score == 0
    return _messages(checked)["imports"]


@pytest.mark.parametrize("device", DEVICES)
def test_a_reach_through_a_re_exported_module_is_stopped_by_the_allowlist_and_by_the_write_check(small10, cfg,
                                                                                               device):
    """operator_reach.py reaches torch's internals by a string through torch.functional.operator and switches the
    op audit off: with the static policy and the write check off, every case passes (on the CPU, where a Gradescope
    autograder grades too). The allowlist of modules refuses torch.functional; the write check sees q hold the
    codes before the kernel that does nothing is launched."""
    imports = _stopped_by_static_policy_and_write_check(WRONG / "operator_reach.py", small10, cfg, device)
    assert "use of torch.functional is not allowed" in imports


def test_a_buffer_filled_from_input_data_holds_input_data(monkeypatch):
    """The op audit follows input data through fills: `.item()` of a scratch tensor filled from an input element
    is not "scalar" work (wrong/fill_item_launder.py read every input value out that way, 2/2 on the CPU). Without
    fills among the followed operations, the same record says scalar."""
    from grader.worker import op_audit as audit_module

    def reads(audit):
        x = torch.randn(5)
        tmp = torch.empty(())
        with audit.window({x.untyped_storage().data_ptr()}):
            tmp.fill_(x[3])
            tmp.item()
            one = torch.ones(())  # not input data: scalar work stays scalar
            (one * 2).item()
        return {r["op"] + ("/scalar" if r["scalar"] else "") for r in audit.result()}

    here = __file__
    assert "item" in reads(audit_module.OpAudit(here)) and "item/scalar" in reads(audit_module.OpAudit(here))
    monkeypatch.setattr(audit_module, "COPIES", audit_module.COPIES - {"fill_", "fill"})
    assert "item" not in reads(audit_module.OpAudit(here))


@pytest.mark.parametrize("device", ["cpu"])  # on CUDA, numpy cannot read device memory: the cheat only crashes
def test_numpy_writing_through_a_tensors_memory_is_stopped_by_the_static_policy_and_by_the_write_check(small10, cfg,
                                                                                                      device):
    """numpy_view.py: numpy (torch.storage.np) reads x and writes q through `__array_interface__`, with no torch
    operation dispatched, so the op audit sees nothing: every case passes on the CPU with the static policy and the
    write check off. The static policy refuses the module and the special method; the write check sees q written
    before the launch."""
    imports = _stopped_by_static_policy_and_write_check(WRONG / "numpy_view.py", small10, cfg, device)
    assert "use of torch.storage is not allowed" in imports
    assert "defining __array_interface__ is not allowed" in imports


@pytest.mark.parametrize("device", DEVICES)
def test_scalar_laundering_is_stopped_by_the_op_audit_and_by_the_write_check(small10, cfg, device):
    """fill_item_launder.py reads each input value with `.item()` and writes each code with `fill_` before a
    kernel that does nothing. The op audit alone (write check off) counts the reads of input data; the write check
    alone (a task copy whose policy allows every op it runs and any number of reads) sees q written before the
    launch; with both off, every case passes."""
    cheat, cases = WRONG / "fill_item_launder.py", {c.id for c in small10.cases}
    lax = dataclasses.replace(small10, torch_ops=(*small10.torch_ops, "item"), python_reads=1 << 30)
    audit_alone, write_alone, neither = \
        _grade([Job(small10, cheat, "a")], cfg, device, writes=False, provenance=False) + \
        _grade([Job(lax, cheat, "w")], cfg, device, provenance=False) + \
        _grade([Job(lax, cheat, "n")], cfg, device, writes=False, provenance=False)
    assert all(t.outcome == "passed" for t in neither.tests if t.name in cases), _messages(neither)
    assert audit_alone.score == 0 and write_alone.score == 0
    for name in cases:
        assert "read into Python (.item()" in _messages(audit_alone)[name], _messages(audit_alone)[name]
        assert WRITTEN_OUTSIDE in _messages(write_alone)[name], _messages(write_alone)[name]


@pytest.mark.parametrize("device", DEVICES)
def test_values_read_into_python_and_stored_by_a_kernel_count_against_the_tasks_budget(small10, cfg, device):
    """slice_max_launder.py reads each input value as a one-element reduction the task allows, rounds in Python
    and launches the kernel once per element to store the code: every value of q comes from a launch (the write
    check passes it) and no torch work reaches the output's size. With the task's python_reads lifted, every case
    passes; with it (1: the absmax), none."""
    cheat, cases = WRONG / "slice_max_launder.py", {c.id for c in small10.cases}
    lax = dataclasses.replace(small10, python_reads=1 << 30)
    lifted, held = _grade([Job(lax, cheat, "l")], cfg, device) + _grade([Job(small10, cheat, "h")], cfg, device)
    assert all(t.outcome == "passed" for t in lifted.tests if t.name in cases), _messages(lifted)
    assert held.score == 0
    for name in cases:
        assert "where this task allows 1" in _messages(held)[name], _messages(held)[name]
