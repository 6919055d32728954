"""Class-scale timing: the demo class copied to N students, graded with `batch` rules, next to a serial run.

    python scripts/bench_class.py --students 200 [--serial-students 5] [--device cuda] [--workers N]

The parallel run grades all N students; the serial run (one worker) grades the first few copies and its time
is scaled to N, since a serial pass over a whole class would not fit in one sitting. Both start from a cold
Triton cache; identical files compile once (Triton's cache is keyed by source), as in a real class where many
files differ, so the parallel figure is a lower bound for a class of distinct files.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from grader.batch import run_batch  # noqa: E402
from grader.config import ROOT, discover_tasks, load_config  # noqa: E402
from grader.grading import resolve_device  # noqa: E402


def synthetic_class(n: int, dest: Path) -> Path:
    demo = sorted(p for p in (ROOT / "submissions").iterdir() if p.is_dir())
    for i in range(n):
        shutil.copytree(demo[i % len(demo)], dest / f"student{i:03d}")
    return dest


def timed(n: int, workers: int, device: str, hw, tasks, cfg) -> float:
    work = Path(tempfile.mkdtemp(prefix="bench-class-"))
    os.environ["TRITON_CACHE_DIR"] = str(work / "triton-cache")
    root = synthetic_class(n, work / "subs")
    start = time.perf_counter()
    run_batch(root, hw, tasks, cfg, device, work / "results", workers, show=lambda s: None)
    seconds = time.perf_counter() - start
    shutil.rmtree(work, ignore_errors=True)
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=200)
    parser.add_argument("--serial-students", type=int, default=5)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--homework", default="hw4_int8")
    parser.add_argument("--judges", type=int, default=None, help="override config.yaml's grading.judges")
    args = parser.parse_args()
    tasks, _ = discover_tasks()
    cfg = load_config(tasks=tasks)
    if args.judges is not None:
        cfg = dataclasses.replace(cfg, judges=args.judges)
    hw = cfg.homeworks[args.homework]
    device = resolve_device(args.device)
    files = sum(1 for p in (ROOT / "submissions").glob("*/*.py"))
    serial = None
    if args.serial_students:  # first: it is the short one
        serial = timed(args.serial_students, 1, device, hw, tasks, cfg) * args.students / args.serial_students
        print(f"serial  : {args.serial_students} students, one worker, scaled to {args.students}: {serial:.0f} s",
              flush=True)
    parallel = timed(args.students, args.workers, device, hw, tasks, cfg)
    print(f"parallel: {args.students} students ({args.students * files // 5} files) in {parallel:.1f} s on {device}"
          f" (judges: {cfg.judges})")
    if serial:
        print(f"speed-up: about {serial / parallel:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
