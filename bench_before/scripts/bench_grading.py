"""How long grading the reference solutions takes, from a cold Triton cache, next to a naive grader.

    python scripts/bench_grading.py [--device cuda] [--task ID ...] [--workers N]

Ours: each worker forces one autotune config at a time (no benchmarking) and compiles it once for every shape
(config.yaml's grading.specialize; `--specialize` turns Triton's specializations back on), every (submission,
task) in parallel.
Naive, in the same run: the stock autotuner benchmarks every config on each new shape first, then every config
is re-checked, one task after another. Each mode gets a fresh TRITON_CACHE_DIR. Prints seconds and the ratio.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from grader.config import discover_tasks, load_config  # noqa: E402
from grader.pipeline.grading import Job, grade_jobs, resolve_device  # noqa: E402


def timed(jobs, cfg, device, workers, naive) -> tuple[float, list]:
    os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="triton-cold-")
    start = time.perf_counter()
    results = grade_jobs(jobs, cfg, device, workers, benchmark_autotune=naive)
    return time.perf_counter() - start, results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto")
    parser.add_argument("--task", action="append")
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--skip-naive", action="store_true")
    parser.add_argument("--specialize", action="store_true", help="ours with Triton's specializations on")
    parser.add_argument("--logs", action="store_true", help="print each worker's log (start-up, per-case seconds)")
    args = parser.parse_args()
    tasks, _ = discover_tasks()
    cfg = load_config(tasks=tasks)
    tasks = cfg.course_tasks(tasks)
    if args.specialize:
        cfg = dataclasses.replace(cfg, specialize=True)
    device = resolve_device(args.device)
    chosen = [t for t in tasks.values() if not args.task or t.id in args.task]
    jobs = [Job(t, t.folder / "solution.py", "solution") for t in chosen]
    ours, results = timed(jobs, cfg, device, args.workers, naive=False)  # 0: the default (per core)
    for r in results:
        print(f"  {r.task:40} {r.score:g}/{r.max_score:g}  {r.staff.get('workers')} worker(s), the slowest "
              f"{r.staff.get('worker_seconds')} s, judged in {r.staff.get('judge_seconds')} s")
        for t in r.tests:
            if t.outcome != "passed":
                print(f"    {t.outcome} {t.name}: {t.message}\n{t.staff[-3000:]}")
        if args.logs:
            print(r.staff.get("worker_log", ""))
    print(f"ours : {len(jobs)} solutions graded in {ours:.1f} s on {device} (cold cache, parallel)")
    if not args.skip_naive:
        # the stock autotuner on the stock compiler: Triton's specializations on, as a naive grader leaves them
        naive, _ = timed(jobs, dataclasses.replace(cfg, specialize=True), device, 1, naive=True)
        print(f"naive: {naive:.1f} s (cold cache, serial, autotuner benchmarks every config first)")
        print(f"ratio: naive / ours = {naive / ours:.1f}x")
    return 0 if all(r.score == r.max_score for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
