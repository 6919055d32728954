"""The compile floor of a class: each file's kernels compiled, and nothing else the grader does.

    python scripts/bench_floor.py CLASS_FOLDER [--device cuda] [--workers N]

For every `<task_id>.py` of every student folder, one plain process (no sandbox, no worker protocol, no checks)
imports the file and calls its entry once per autotune config and per specialization the grader would compile
(grader/pipeline/plan.py `specialization_key`, config.yaml's grading.specialize), on that case's inputs: one call
per compilation, so that what is measured is Triton compiling the file's kernels (and the few calls that make it
compile). `workers` such processes run at once, from a cold Triton cache. scripts/bench_class.py `--compare` prints
this floor beside the bare pipeline (every check off) and the full one, from the same run.

Tasks whose kernel the grader launches itself (task.yaml `launch`: the puzzles) are left out and counted.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from grader.config import ROOT, CourseConfig, TaskSpec, discover_tasks, load_config  # noqa: E402
from grader.pipeline.plan import specialization_key  # noqa: E402

CHILD = r"""
import importlib.util, sys, torch
from grader.worker.main import config_at, find_autotuners, unspecialize
path, entry_name, cases_path, device, specialize = sys.argv[1:6]
spec = importlib.util.spec_from_file_location("submission", path)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
entry = getattr(module, entry_name)
tuners = [(t, list(t.configs)) for t in find_autotuners(module)]
if specialize != "1":
    unspecialize(module)
cases = torch.load(cases_path, weights_only=True)
for c in range(max([len(configs) for _, configs in tuners] + [1])):
    for tuner, configs in tuners:
        tuner.configs = [config_at(configs, c)]
    for case in cases:
        args = [a.to(device) if isinstance(a, torch.Tensor) else a for a in case["args"]]
        kwargs = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in case["kwargs"].items()}
        try:
            entry(*args, **kwargs)
            if device == "cuda":
                torch.cuda.synchronize()
        except Exception as exc:
            print(f"{path}: config {c}: {type(exc).__name__}", file=sys.stderr)
"""


def compile_cases(task: TaskSpec, device: str, specialize: bool, folder: Path) -> Path:
    """One case per specialization the grader compiles for `task`, saved for the floor's processes."""
    import importlib

    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    oracle = importlib.import_module(f"reference.{task.reference}")
    chosen, seen = [], set()
    for case in task.cases:
        args, kwargs = oracle.generate_input(**case.params_for(device))
        from grader import judge

        key = specialization_key(judge.CaseData(case.id, list(args), dict(kwargs), ()), specialize)
        if key not in seen:
            seen.add(key)
            chosen.append({"args": list(args), "kwargs": dict(kwargs)})
    path = folder / f"{task.id}.pt"
    torch.save(chosen, path)
    return path


def cpu_times() -> tuple[float, float] | None:
    """(busy, total) core-seconds of the whole machine since boot, from /proc/stat (None elsewhere)."""
    try:
        fields = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    except (OSError, ValueError, IndexError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    tick = os.sysconf("SC_CLK_TCK")
    return (sum(fields) - idle) / tick, sum(fields) / tick


def floor(root: Path, tasks: dict[str, TaskSpec], cfg: CourseConfig, device: str,
          workers: int = 0, timeout_s: float = 60.0) -> dict[str, float]:
    """Compile every file of the class at `root` as described above; returns wall and core-seconds."""
    work = Path(tempfile.mkdtemp(prefix="bench-floor-"))
    env = {**os.environ, "TRITON_CACHE_DIR": str(work / "triton-cache"), "PYTHONPATH": str(ROOT)}
    cases: dict[str, Path] = {}
    files, skipped = [], 0
    for student in sorted(p for p in root.iterdir() if p.is_dir()):
        for task_id, task in tasks.items():
            path = student / f"{task_id}.py"
            if not path.is_file():
                continue
            if task.launch is not None:
                skipped += 1
                continue
            specialize = cfg.specialize if task.specialize is None else task.specialize
            if task_id not in cases:
                cases[task_id] = compile_cases(task, device, specialize, work)
            files.append([sys.executable, "-c", CHILD, str(path), task.entry, str(cases[task_id]), device,
                          "1" if specialize else "0"])
    workers = workers or len(os.sched_getaffinity(0))
    start = time.perf_counter()

    def run(cmd: list[str]) -> tuple[str, float, float]:
        """(problem or "", this process's core-seconds with its compilers', when it ended)."""
        with tempfile.TemporaryFile() as err:
            child = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
            timer = threading.Timer(timeout_s, child.kill)  # a file that hangs (the demo class has one)
            timer.start()
            _, status, usage = os.wait4(child.pid, 0)
            timer.cancel()
            child.returncode = os.waitstatus_to_exitcode(status)
            err.seek(0)
            said = err.read().decode(errors="replace")[-300:]
        if child.returncode:
            return f"{cmd[3]}: exit {child.returncode}: {said}", 0.0, 0.0
        return "", usage.ru_utime + usage.ru_stime, time.perf_counter() - start

    with ThreadPoolExecutor(workers) as pool:
        ran = list(pool.map(run, files))
    shutil.rmtree(work, ignore_errors=True)
    # A file whose process was stopped or failed compiled nothing the floor can count: its time is left out.
    wall = max((end for problem, _, end in ran if not problem), default=0.0)
    busy = sum(seconds for _, seconds, _ in ran)
    problems = [problem for problem, _, _ in ran if problem]
    for problem in problems[:5]:
        print(f"floor   : left out: {problem}", flush=True)
    print(f"floor   : {len(files) - len(problems)} files' kernels compiled in {wall:.1f} s, {busy:.0f} core-seconds "
          f"({busy / max(1, len(files) - len(problems)):.2f} a file), {workers} processes at once"
          + (f"; {skipped} files of launched tasks left out" if skipped else ""), flush=True)
    return {"wall": wall, "busy": busy, "files": len(files) - len(problems)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--workers", type=int, default=0)
    args = parser.parse_args()
    tasks, _ = discover_tasks()
    cfg = load_config(tasks=tasks)
    print(json.dumps(floor(args.root, tasks, cfg, args.device, args.workers)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
