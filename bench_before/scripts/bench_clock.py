"""Does the speed tests' GPU clock measure the calls, or the profiler? Task 23 at K = 8192 (its fused solution and
its baseline, three kernels and a torch.mm), five ways, in one run:

1. the grader's clock (grader/worker/timing.py): GPU activity traced alone, calls told apart by marker kernels;
2. the same spans with the host's operators traced too (the grader's clock before 2026-11-24), which slows the
   host and so widens the gaps between a call's kernels;
3. the sum of the call's kernel durations (from trace 1): the GPU's own work, no gaps;
4. CUDA events around the call with no profiler, behind a 2 ms sleep kernel so that the whole call is queued
   before the GPU reaches it: kernel time plus the GPU's own gaps between kernels, no host time at all;
5. CUDA events around the call with no profiler and no sleep: the GPU's time from the call's start, which adds
   the host's work before its first launch and any host gap between launches.

    python scripts/bench_clock.py [--reps 50] [--k 8192]

Medians in microseconds. Expect 3 <= 4 <= 1 <= 5: the grader's clock should sit near 4 (kernels plus the gaps
that exist without a profiler) and below 5, where 2 may not. Needs CUDA; prints, asserts nothing.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from grader.judge.speed import median  # noqa: E402
from grader.worker import timing  # noqa: E402
from grader.worker.main import _load_module  # noqa: E402
from reference import lowbit_dw  # noqa: E402

TASK = ROOT / "tasks" / "23_lowbit_dw_fused"


def traced(fn, args: list, kwargs: dict, reps: int, host_too: bool) -> tuple[list[float], list[float]]:
    """(spans, kernel sums) of `reps` calls under the profiler, each after a flush and a marker."""
    calls = [own for own in timing.profile_marked(fn, args, kwargs, reps, host_too)[0] if own]
    return [timing.span(own) for own in calls], [sum(end - start for start, end, _ in own) for own in calls]


def evented(fn, args: list, kwargs: dict, reps: int, sleep_cycles: int) -> list[float]:
    flush = timing.L2Flush("cuda")
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        flush()
        torch.cuda.synchronize()
        if sleep_cycles:
            torch.cuda._sleep(sleep_cycles)
        start.record()
        fn(*args, **kwargs)
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
    return times


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--k", type=int, nargs="+", default=[8192])
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("needs CUDA")
        return 2
    solution = _load_module("solution", str(TASK / "solution.py")).dw_from_packed
    baseline = _load_module("baseline", str(TASK / "baseline.py")).dw_from_packed
    cycles = int(2e-3 * torch.cuda.get_device_properties(0).clock_rate * 1e3)  # about 2 ms
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, triton {__import__('triton').__version__}")
    print(f"{'K':>6} {'side':<9} {'1 grader':>9} {'2 +host':>9} {'3 kernels':>9} {'4 events+sleep':>14} "
          f"{'5 events':>9}")
    for k in args.k:
        a, kw = lowbit_dw.generate_input(K=k, CIN=768, COUT=768, bits=2, dtype="bfloat16", seed=5)
        dev = [t.cuda() if isinstance(t, torch.Tensor) else t for t in a]
        for name, fn in (("fused", solution), ("baseline", baseline)):
            for _ in range(10):
                fn(*dev, **kw)
            torch.cuda.synchronize()
            spans, sums = traced(fn, dev, kw, args.reps, host_too=False)
            spans_host, _ = traced(fn, dev, kw, args.reps, host_too=True)
            sleep = evented(fn, dev, kw, args.reps, cycles)
            plain = evented(fn, dev, kw, args.reps, 0)
            print(f"{k:>6} {name:<9} {median(spans):9.1f} {median(spans_host):9.1f} {median(sums):9.1f} "
                  f"{median(sleep):14.1f} {median(plain):9.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
