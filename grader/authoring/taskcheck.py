"""`python -m grader tasks --check`: what a task author gets wrong, found before any grading.

Loading a task.yaml already checks its keys, types, case ids and the files in wrong/ (grader/config). This goes
further, task by task: the reference module imports and has `generate_input` and `ref_kernel`; every output's dtype
is a torch dtype (or `like:<i>` of an argument that exists); every case's parameters make inputs (at the CPU's
sizes); every `fails:` and `fails_on:` pattern of a wrong file matches at least one of the task's tests (a typo
would otherwise declare nothing, and the file's mistake would go unproven).
"""

from __future__ import annotations

import traceback

import torch

from grader.config import TaskSpec
from grader.pipeline.oracle import Prepared


def task_problems(task: TaskSpec, staff: bool = False) -> list[str]:
    """What is wrong with one loaded task; [] when nothing is. With `staff`, a failure carries its traceback."""
    problems: list[str] = []

    def failed(what: str, exc: BaseException) -> None:
        text = f"{what}: {type(exc).__name__}: {exc}"
        problems.append(text + ("\n" + traceback.format_exc() if staff else ""))

    module = None
    try:
        module = Prepared._oracle(task)  # as the grading imports it
    except Exception as exc:  # noqa: BLE001 - any import failure is the author's to see
        failed(f"reference '{task.reference}' does not import", exc)
    for name in ("generate_input", "ref_kernel"):
        if module is not None and not callable(getattr(module, name, None)):
            problems.append(f"reference '{task.reference}' has no function {name}")
    for out in task.outputs:
        if out.dtype.startswith("like:"):
            continue  # checked against each case's arguments below
        if not isinstance(getattr(torch, out.dtype, None), torch.dtype):
            problems.append(f"output {out.name}: dtype '{out.dtype}' is not a torch dtype")
    if module is not None and callable(getattr(module, "generate_input", None)):
        for case in task.cases:
            try:
                args, _ = module.generate_input(**case.params_for("cpu"))
            except Exception as exc:  # noqa: BLE001
                failed(f"case {case.id}: its parameters make no inputs", exc)
                continue
            for out in task.outputs:
                if out.dtype.startswith("like:") and not (
                        out.dtype[5:].isdigit() and int(out.dtype[5:]) < len(args)
                        and isinstance(args[int(out.dtype[5:])], torch.Tensor)):
                    problems.append(f"case {case.id}: output {out.name}'s dtype '{out.dtype}' names no tensor "
                                    f"argument ({len(args)} arguments)")
    for name, wrong in sorted(task.wrong.items()):
        problems += [f"wrong/{name}: pattern '{pattern}' matches none of the task's tests"
                     for pattern in wrong.unmatched(task.test_names)]
    return problems


def check_tasks(tasks: dict[str, TaskSpec], broken: dict[str, str], staff: bool = False) -> int:
    """Print a line per task (ok, or each problem) and return 1 when any task is broken or has a problem."""
    bad = 0
    for name, err in sorted(broken.items()):
        print(f"FAIL {name}: {err}")
        bad += 1
    for task in tasks.values():
        problems = task_problems(task, staff)
        print(f"{'ok  ' if not problems else 'FAIL'} {task.id}", flush=True)
        for problem in problems:
            print(f"     {problem}", flush=True)
        bad += bool(problems)
    print(f"tasks --check: {len(tasks) + len(broken) - bad} ok, {bad} with problems")
    return 1 if bad else 0
