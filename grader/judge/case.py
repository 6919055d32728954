"""Judging one case: every problem of each recorded call (`check_run`), the provenance check of its twin
(`twin_problems`), and the case's verdict with its message and picture (`judge_case`)."""

from __future__ import annotations

import torch

from grader.config import TaskSpec
from grader.judge import known_errors, provenance
from grader.judge.data import CaseData, Caught, Verdict
from grader.judge.drawing import draw_run
from grader.judge.messages import describe_bounds, error_problem
from grader.judge.values import replays, resolve_dtype, value_problem
from grader.judge.worker_results import WorkerResults, printed_text
from grader.judge.writes import check_guards, memory_problems, write_problems
from grader.protocol import guards, torch_ops


def check_run(task: TaskSpec, case: CaseData, run: dict, device: str, names: list[str],
              memo: dict | None = None, import_ops: list | None = None,
              twin_of: CaseData | None = None, tritons: known_errors.Tritons | None = None) -> list[str]:
    """Every problem of one call (one case under one config); empty when it is right. `memo` keeps the value
    checks of outputs shared by several runs (one tensor object), so each is judged once. `twin_of`: `case` is
    that case's twin, and an output's values fail only as a replay's would (`replays`). `tritons`: the releases
    a known error's message names."""
    memo = {} if memo is None else memo
    if run.get("error"):
        return [error_problem(run, device, tritons)]
    problems = []
    outputs = run.get("outputs")
    if not isinstance(outputs, list):
        return ["the worker's record of this call has no outputs (garbled result)"]
    # On the interpreter: each launched kernel was also compiled for CUDA targets (grader/worker/gpu_compile.py).
    for msg in dict.fromkeys(launch.get("gpu_compile") for launch in run.get("launches") or []
                             if isinstance(launch, dict)):
        if msg is not None:
            problems.append(msg if isinstance(msg, str) else "the worker's launch record is garbled")
    # On the interpreter: every address each kernel touched, against the tensors of its launch
    # (grader/worker/address_check.py).
    if run.get("bounds_tampered"):
        problems.append("the grader's address check was changed during the call (its interpreter patches were "
                        "replaced): the call's memory accesses cannot be trusted")
    found = run.get("bounds") or []
    if not isinstance(found, list) or not all(isinstance(f, dict) for f in found):
        problems.append("the worker's record of out-of-bounds accesses is garbled")
    else:
        problems.extend(f"out of bounds: {describe_bounds(f)}" for f in found)
    if len(outputs) != len(task.outputs):
        want = ", ".join(o.name for o in task.outputs)
        return [f"returned {len(outputs)} value(s) ({run.get('returned')}); expected {len(task.outputs)}: ({want})"]

    # Out-of-bounds writes and changed inputs.
    inputs = run.get("inputs") or []
    sent = [a for a in case.args[:len(case.args) - n_buffers(task)] if isinstance(a, torch.Tensor)]
    sent += [v for v in case.kwargs.values() if isinstance(v, torch.Tensor)]
    if len(inputs) != len(sent):
        return ["the worker's record of the inputs does not match what was sent (garbled result)"]
    for rec, original, name in zip(inputs, sent, names):
        if list(rec["size"]) != list(original.shape) or rec.get("dtype") != guards.dtype_name(original.dtype):
            return ["the worker's record of the inputs does not match what was sent (garbled result)"]
        msg = check_guards(rec, f"input {name}", input=True)
        if msg:
            problems.append(msg)
        if rec.get("sha256") != case.digest(original):
            problems.append(f"input {name} was modified by the call; inputs must stay unchanged")
    allocs = run.get("allocs") or []
    owners = {o.get("alloc"): task.outputs[k].name for k, o in enumerate(outputs) if o.get("kind") == "tensor"}
    for j, rec in enumerate(allocs):
        label = owners.get(j) or f"a scratch buffer allocated by the wrapper (#{j}, shape {rec.get('size')})"
        msg = check_guards(rec, label)
        if msg:
            problems.append(msg)

    # Provenance: the torch work the submission did itself, during the call and while it was imported.
    kernel_made = [(spec.name, ref.numel()) for spec, ref in zip(task.outputs, case.expected) if spec.from_kernel]
    if kernel_made:
        if not isinstance(run.get("torch_ops"), list):
            return ["the worker's record of this call has no op audit (garbled result)"]
        name, size = min(kernel_made, key=lambda item: item[1])
        msg = torch_ops.check([*(import_ops or []), *run["torch_ops"]], task.torch_ops, size, name,
                              task.python_reads)
        if msg:
            problems.append(Caught(msg))
    # What a kernel or a torch operation read held only what kernels and torch operations wrote.
    problems.extend(memory_problems(run.get("memory")))

    launches = run.get("launches") or []
    for spec, got, ref in zip(task.outputs, outputs, case.expected):
        if got.get("kind") != "tensor":
            problems.append(f"{spec.name}: expected a tensor, got {got.get('kind')} {got.get('repr', '')}")
            continue
        t = got["tensor"]
        want_dtype = resolve_dtype(spec, case.args)
        head = []
        if t.dtype != want_dtype:
            head.append(f"dtype {guards.dtype_name(t.dtype)}, expected {guards.dtype_name(want_dtype)}")
        if not spec.shape_ok(tuple(t.shape), tuple(ref.shape)):
            head.append(f"shape {list(t.shape)}, expected {spec.shape_wanted(tuple(ref.shape))}")
        if str(got.get("device", "")).split(":")[0] != device:
            head.append(f"on device {got.get('device')}, expected {device}")
        if head:
            problems.append(f"{spec.name}: " + "; ".join(head))
            continue
        if spec.from_kernel:
            alloc = got.get("alloc")
            if not launches:
                problems.append(f"{spec.name}: no Triton kernel was launched during the call; the answer must "
                                "come from your kernel, not from torch operations")
            elif alloc is None or not (0 <= alloc < len(allocs)):
                problems.append(f"{spec.name} was not allocated with torch.empty/empty_like/zeros... inside the "
                                "call (the grader surrounds those with guard bands), or was produced by a torch "
                                "operation instead of your kernel")
            else:
                base, size = allocs[alloc].get("base", -1), allocs[alloc].get("nbytes", 0)
                if not any(base <= p < base + size for launch in launches for p in launch.get("ptrs", [])):
                    problems.append(f"{spec.name} was not passed to any Triton kernel launched during the call; "
                                    "it must be written by your kernel")
                problems.extend(write_problems(spec.name, alloc, run.get("writes")))
        key = (id(t), id(ref), spec.name)
        if key not in memo:  # the tensors are kept too, so their ids stay theirs while the memo lives
            memo[key] = (value_problem(spec, t.reshape(ref.shape), ref), t, ref)
        if memo[key][0] and twin_of is not None:
            graded_ref = twin_of.expected[task.outputs.index(spec)]
            if not replays(spec, t.reshape(ref.shape), ref, graded_ref.reshape(ref.shape)):
                continue
        if memo[key][0]:
            problems.append(memo[key][0])
    return problems


def n_buffers(task: TaskSpec) -> int:
    """Output buffers at the end of a case's arguments: the harness makes them when it launches the kernel."""
    return len(task.outputs) if task.launch else 0


def input_names(task: TaskSpec, case: CaseData) -> list[str]:
    if task.launch:
        params = task.kernels[task.launch.kernel].params
    else:
        params = [p for p in task.functions[task.entry] if not p.startswith("*")]
    names = [params[i] if i < len(params) else f"#{i}" for i, a in enumerate(case.args) if isinstance(a, torch.Tensor)]
    names += [k for k, v in case.kwargs.items() if isinstance(v, torch.Tensor)]
    return names


def judge_case(task: TaskSpec, index: int, case: CaseData, results: WorkerResults, device: str,
               tritons: known_errors.Tritons | None = None) -> Verdict:
    runs, why = results.case_runs(index, case.id)
    if runs is None:
        return Verdict(False, why, staff=results.log[-4000:])
    if not runs:
        return Verdict(False, "the worker recorded no run of this case (garbled result)")
    names = input_names(task, case)
    failing, staff = [], []
    memo: dict = {}
    twins = [r for r in runs if isinstance(r, dict) and r.get("twin") is True]
    runs = [r for r in runs if not (isinstance(r, dict) and r.get("twin") is True)]
    if not runs:
        return Verdict(False, "the worker recorded no run of this case (garbled result)")
    twin_failed = None
    if case.twin is not None:
        problems = twin_problems(task, case, runs, twins, device, names, (results.load or {}).get("torch_ops"),
                                 tritons)
        if problems:
            twin_failed = ("the twin", problems, twins[0] if twins else runs[0])
            if twins and twins[0].get("traceback"):
                staff.append(twins[0]["traceback"])
    for run in runs:
        try:
            problems = check_run(task, case, run, device, names, memo, (results.load or {}).get("torch_ops"),
                                 tritons=tritons)
        except (KeyError, TypeError, ValueError, RuntimeError, IndexError) as exc:
            problems = [f"the worker's record of this call is garbled ({type(exc).__name__}: {exc})"]
        if run.get("fatal"):
            problems.append(run["fatal"])
        if problems:
            configs = run.get("configs") or {}
            label = "; ".join(f"{k} [{v}]" for k, v in configs.items()) or "the only configuration"
            failing.append((label, problems, run))
            if run.get("traceback"):
                staff.append(run["traceback"])
    if twin_failed is not None:  # what the graded calls show already is not said again: the same problem, or
        # wrong values of an output whose values are wrong there too (the twin's own elements beside the graded
        # call's read as one got/expected list mixing two calls: dx[0, 0] twice, with two values)
        said = {p for _, problems, _ in failing for p in problems}
        wrong = {p.split(":", 1)[0] for p in said if " element(s) differ " in p}
        twin_failed = (*twin_failed[:1], [p for p in twin_failed[1] if p not in said and not (
            " element(s) differ " in p and p.split(":", 1)[0] in wrong)], twin_failed[2])
    if twin_failed is not None and twin_failed[1]:
        failing.insert(0, twin_failed)
    caught = str(next((p for _, problems, _ in failing for p in problems if isinstance(p, Caught)), ""))
    if not failing:
        n = len(runs)
        return Verdict(True, f"passed under {n} autotune config{'s' if n > 1 else ''}")
    lines = []
    if failing[0][0] == "the twin":
        label, problems, _ = failing.pop(0)
        lines.append("called again with the same shapes and the inputs' elements in another order (the provenance "
                     "check):")
        lines += [f"  - {p}" for p in problems]
        if not failing:
            n = len(runs)
            lines.append(f"(the graded call passed under {n} autotune config{'s' if n > 1 else ''})")
            return Verdict(False, "\n".join(lines), staff="\n\n".join(staff)[-20000:], caught=caught)
    first_problems = failing[0][1]
    if len(failing) > 1 and all(p == first_problems for _, p, _ in failing):
        lines.append(f"under all {len(failing)} configs:")
        lines += [f"  - {p}" for p in first_problems]
    else:
        for label, problems, _ in failing[:3]:
            lines.append(f"under config {label}:")
            lines += [f"  - {p}" for p in problems]
        if len(failing) > 3:
            lines.append(f"... and {len(failing) - 3} more failing config(s)")
    if len(failing) < len(runs):
        lines.append(f"({len(runs) - len(failing)} of {len(runs)} configs passed)")
    picture = None
    if task.pictures:
        try:
            drawn = draw_run(task, case, failing[0][2])
        except (KeyError, TypeError, ValueError, RuntimeError, IndexError) as exc:
            drawn, staff = None, [*staff, f"no picture: {type(exc).__name__}: {exc}"]
        if drawn:
            picture, pid_line = drawn
            if pid_line:
                lines.append(pid_line)
    return Verdict(False, "\n".join(lines), staff="\n\n".join(staff)[-20000:], picture=picture,
                   printed=printed_text(failing[0][2]), caught=caught)


def twin_problems(task: TaskSpec, case: CaseData, runs: list[dict], twins: list[dict], device: str,
                  names: list[str], import_ops: list | None, tritons: known_errors.Tritons | None = None) -> list[str]:
    """The provenance check of one case: its twin's call judged as any call (against the oracle's answer for the
    twin's inputs), and the two recorded calls compared (grader/judge/provenance.py)."""
    if len(twins) != 1:
        return ["the worker's record of this case holds no call of its twin (garbled result)"]
    twin = twins[0]
    try:
        problems = check_run(task, case.twin, twin, device, names, {}, import_ops, twin_of=case, tritons=tritons)
        index = twin.get("config_index")
        graded = next((r for r in runs if r.get("config_index") == index and "provenance" in r), None)
        if graded is None or "provenance" not in twin:
            if not problems:
                problems.append("the worker's record of this case holds no provenance record (garbled result)")
        elif not graded.get("error") and not twin.get("error"):
            msg = provenance.compare(graded["provenance"], twin["provenance"], task.python_reads)
            if msg:
                problems.append(Caught(msg))
    except (KeyError, TypeError, ValueError, RuntimeError, IndexError) as exc:
        problems = [f"the worker's record of this call is garbled ({type(exc).__name__}: {exc})"]
    if twin.get("fatal"):
        problems.append(twin["fatal"])
    return problems
