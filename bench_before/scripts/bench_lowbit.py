"""Speed of task 23's fused dW against the unfused path (task 21's dequant kernel + torch.mm), measured the way
the grader's speed tests measure (grader.worker.timing.time_calls: fresh inputs and an L2 flush per call, GPU time or
the host clock as `--clock` says, interleaved, medians), plus each autotune config forced alone.

    python scripts/bench_lowbit.py [--reps 50] [--k 8192 100864] [--configs] [--breakdown] [--clock gpu|wall]

Prints a table of medians and ratios (baseline / fused: > 1 means the fused kernel is faster), and each result's
worst error as a share of the task's tolerance. `--breakdown` also splits each side's time into the host's share
(from the synchronized start until the call returns: argument checks, allocations, launches) and the GPU's (each
kernel's duration from the profiler), which says whether a gap comes from the kernels or from launching them.
Needs CUDA. Performance is never asserted in the grader's tests.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from grader.config import load_task  # noqa: E402
from grader.judge.speed import median  # noqa: E402
from grader.worker.main import _load_module, config_label, find_autotuners  # noqa: E402
from grader.worker.timing import profile_marked, time_calls  # noqa: E402
from reference import lowbit_dw  # noqa: E402

TASK = ROOT / "tasks" / "23_lowbit_dw_fused"


def tolerance_share(got: torch.Tensor, ref: torch.Tensor, rtol: float, atol: float) -> float:
    return float(((got.double() - ref).abs() / (atol + rtol * ref.abs())).max())


def breakdown(name: str, fn, args: list, kwargs: dict, reps: int) -> None:
    """Print the median host time of a call (synchronized start to return) and its kernels' median durations."""
    for _ in range(3):
        fn(*args, **kwargs)
    calls, host = profile_marked(fn, args, kwargs, reps)
    kernels = defaultdict(list)
    for own in calls:
        for begin, end, kernel in own:
            kernels[kernel[:48]].append(end - begin)
    gpu = "; ".join(f"{k} {median(v):.1f} us" for k, v in kernels.items())
    print(f"    {name}: host {median(host) * 1e6:.1f} us until the call returns; kernels: {gpu}", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--k", type=int, nargs="+", default=[8192, 100864])
    ap.add_argument("--configs", action="store_true", help="also time every autotune config forced alone")
    ap.add_argument("--solution", type=Path, default=TASK / "solution.py", help="the fused kernel's file")
    ap.add_argument("--no-slow", action="store_true", help="skip wrong/no_split_k.py")
    ap.add_argument("--breakdown", action="store_true", help="host time and kernel times of each side (profiler)")
    ap.add_argument("--clock", choices=["gpu", "wall"], default="gpu", help="what a call's time is (task.yaml perf)")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("needs CUDA")
        return 2
    task = load_task(TASK)
    out = task.outputs[0]
    solution = _load_module("solution", str(args.solution))
    slow = _load_module("slow", str(TASK / "wrong" / "no_split_k.py"))
    baseline = _load_module("baseline", str(TASK / "baseline.py")).dw_from_packed
    (tuner,) = find_autotuners(solution)
    all_configs = list(tuner.configs)
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, triton {__import__('triton').__version__}, "
          f"clock {args.clock}")
    rows = []
    for k in args.k:
        a, kw = lowbit_dw.generate_input(K=k, CIN=768, COUT=768, bits=2, dtype="bfloat16", seed=5)
        case = {"args": a, "kwargs": kw}
        dev = [t.cuda() if isinstance(t, torch.Tensor) else t for t in a]
        x_hat = lowbit_dw.dequantize64(a[1], a[2], a[3], 2, 768).to(torch.bfloat16).double().cuda()
        ref = dev[0].double().t() @ x_hat
        if args.breakdown:
            print(f"K={k} breakdown (medians of {args.reps} calls, each after an L2 flush and a synchronize):")
            breakdown("fused   ", solution.dw_from_packed, dev, kw, args.reps)
            breakdown("baseline", baseline, dev, kw, args.reps)
        variants = [("fused (autotuned)", solution.dw_from_packed, all_configs)]
        if args.configs:
            variants += [(f"fused [{config_label(c)}]", solution.dw_from_packed, [c]) for c in all_configs]
        if not args.no_slow:
            variants += [("wrong/no_split_k", slow.dw_from_packed, None)]
        for name, fn, configs in variants:
            if configs is not None:
                tuner.configs = configs
                tuner.cache.clear()
            rec = time_calls(fn, baseline, case, "cuda", args.warmup, args.reps, args.clock)
            if rec["error"]:
                print(f"K={k} {name}: {rec['error']}")
                continue
            got = rec["outputs"][0]["tensor"].cuda()
            share = tolerance_share(got, ref, out.rtol, out.atol)
            t_f, t_b = median(rec["submission"]), median(rec["baseline"])
            base_out = baseline(*dev, **kw)
            base_share = tolerance_share(base_out.float(), ref, out.rtol, out.atol)
            tuned = configs is all_configs and tuner.best_config
            best = f" best config {config_label(tuner.best_config)}" if tuned else ""
            rows.append((k, name, t_b, t_f, t_b / t_f, share, base_share))
            print(f"K={k:6d} {name}: baseline {t_b * 1e3:.4f} ms, fused {t_f * 1e3:.4f} ms, ratio {t_b / t_f:.2f}x, "
                  f"error {share:.3f} of tolerance (baseline's bf16 output: {base_share:.3f}){best}", flush=True)
        tuner.configs = all_configs
    print("\n| K | variant | baseline ms | fused ms | baseline / fused | error / tolerance |")
    print("| --- | --- | --- | --- | --- | --- |")
    for k, name, t_b, t_f, ratio, share, _ in rows:
        print(f"| {k} | {name} | {t_b * 1e3:.4f} | {t_f * 1e3:.4f} | {ratio:.2f}x | {share:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
