"""How much of each output's tolerance a task's reference solution uses, case by case: the numbers behind the
tolerance comments in task.yaml and the "Tolerances" table of docs/task-authors.md.

    python scripts/tolerance_use.py [--task ID ...] [--device cpu|cuda]

For each task whose outputs are compared with `close`, runs tasks/<id>/solution.py on every case's inputs (the
device's sizes; on the CPU through Triton's interpreter) and prints, per output, the largest relative error (over
elements whose expected value is above 1e-6), the largest absolute error, and the largest fraction of the
tolerance `atol + rtol * |expected|` any element uses. A tolerance is right when a correct kernel uses a small
fraction of it and every known mistake many times it. Trusted code only: it imports the staff's solutions.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", action="append", help="only these tasks (repeatable)")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    args = parser.parse_args()
    if args.device == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"
    import torch

    from grader.config import discover_tasks
    from grader.worker.main import Launcher, find_autotuners

    if args.device == "cpu":  # as the worker does: libdevice's rounding functions work in the interpreter
        from grader.worker.interpreter import patch_interpreter

        patch_interpreter()

    tasks, _ = discover_tasks()
    for task_id, task in sorted(tasks.items()):
        if args.task and task_id not in args.task:
            continue
        close = [(k, o) for k, o in enumerate(task.outputs) if o.compare == "close"]
        solution = task.folder / "solution.py"
        if not close or not solution.is_file():
            continue
        os.environ.update(task.launch.env if task.launch else {})
        spec = importlib.util.spec_from_file_location(f"solution_{task_id}", solution)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        oracle = importlib.import_module(f"reference.{task.reference}")
        for tuner in find_autotuners(module):  # one config, as the worker forces each in turn (no benchmarking)
            tuner.configs = tuner.configs[:1]
        if task.launch:
            launch = {"kernel": task.launch.kernel, "grid": [list(a) for a in task.launch.grid],
                      "outputs": len(task.outputs)}
            entry = Launcher(getattr(module, task.launch.kernel), launch)
        else:
            entry = getattr(module, task.entry)
        worst = {k: [0.0, 0.0, 0.0] for k, _ in close}
        for case in task.cases:
            inputs, kwargs = oracle.generate_input(**case.params_for(args.device))
            expected = oracle.ref_kernel(inputs, kwargs)
            placed = [a.to(args.device) if isinstance(a, torch.Tensor) else a for a in inputs]
            got = entry(*placed, **{k: v.to(args.device) if isinstance(v, torch.Tensor) else v
                                    for k, v in kwargs.items()})
            got = got if isinstance(got, (tuple, list)) else (got,)
            for k, out in close:
                ref = expected[k].double().cpu()
                err = (got[k].double().cpu().reshape(ref.shape) - ref).abs()
                big = ref.abs() > 1e-6
                rel = float((err[big] / ref.abs()[big]).max()) if big.any() else 0.0
                use = float((err / (out.atol + out.rtol * ref.abs())).max())
                worst[k] = [max(worst[k][0], rel), max(worst[k][1], float(err.max())), max(worst[k][2], use)]
        for k, out in close:
            rel, ab, use = worst[k]
            print(f"{task_id:48s} {out.name:6s} rtol {out.rtol:g} atol {out.atol:g}: max relative error {rel:.2e}, "
                  f"max absolute error {ab:.2e}, tolerance used {use:.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
