"""Where a timing worker's baseline warm-up goes, CUDA only: each task's staff baseline compiled
once in a "staff" process (its Inductor cache kept), then its first call timed in fresh "timer" processes that
start from a copy of that cache at another path, as a timing worker does (grader/worker/timing.py compile_here),
with the parts of that first call counted apart: Dynamo's compile (on_compile_start/end), Inductor's runtime
autotuning (CachingAutotuner.benchmark_all_configs), Triton's compilations, and the calls after it.

    python scripts/diag_baseline_warm.py [--tasks 10 12 14]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TASKS = {"10": ("10_quantize_global_int8", "quantize_global"),
         "11": ("11_quantize_rowwise_int8", "quantize_rowwise"),
         "12": ("12_matmul_int8_fused_dequant", "matmul_int8_fused"),
         "14": ("14_backward_dx_int8_fused", "backward_dx_int8_fused")}


def inputs(task: str):
    import torch

    g = torch.Generator(device="cuda").manual_seed(0)
    if task in ("10",):
        return [torch.randn(67108867, device="cuda", dtype=torch.float16, generator=g)], {}
    if task == "11":
        return [torch.randn(4096, 4000, device="cuda", dtype=torch.float16, generator=g)], {}
    if task == "12":
        m, k, n = 2048, 4096, 2048
        xq = torch.randint(-127, 128, (m, k), device="cuda", dtype=torch.int8, generator=g)
        wq = torch.randint(-127, 128, (k, n), device="cuda", dtype=torch.int8, generator=g)
        return [xq, torch.rand(1, device="cuda") + 0.1, wq, torch.rand(n, device="cuda") + 0.1,
                torch.randn(n, device="cuda", dtype=torch.float16)], {"per_channel": True}
    m, n, k = 2048, 2048, 4096
    return [torch.randn(m, k, device="cuda", dtype=torch.float16, generator=g),
            torch.randint(-127, 128, (n, k), device="cuda", dtype=torch.int8, generator=g),
            torch.rand(k, device="cuda") + 0.1], {"per_channel": True}


def child(task: str, jobdir: Path, local_autotune: bool, warm_dynamo: str) -> dict:
    out: dict = {}
    t0 = time.perf_counter()
    import torch
    import torch._inductor.codegen.triton  # noqa: F401
    import torch._inductor.compile_fx  # noqa: F401 - what the fork server preloads
    import torch._inductor.runtime.triton_heuristics as th
    import triton

    out["import"] = time.perf_counter() - t0
    if warm_dynamo:  # a trivial function traced on the CPU first (what a fork server could do before forking)
        t = time.perf_counter()
        f = torch.compile(lambda a: (a * 2).sum(), backend=warm_dynamo, dynamic=False)
        f(torch.ones(8))
        torch._dynamo.reset()
        out["warm_dynamo"] = time.perf_counter() - t
    from grader.worker.timing import compile_here, load_baseline

    os.environ["TRITON_CACHE_DIR"] = str(jobdir / "triton")
    compile_here(jobdir)
    import torch._inductor.config as ic

    ic.autotune_local_cache = local_autotune
    counts = {"dynamo": 0.0, "autotune": 0.0, "triton_compile": 0.0, "autotune_calls": 0}
    import torch._dynamo.callback as cb

    starts = []
    cb.on_compile_start(lambda *_: starts.append(time.perf_counter()))
    cb.on_compile_end(lambda *_: counts.__setitem__("dynamo", counts["dynamo"] + time.perf_counter() - starts.pop()))
    orig_bench = th.CachingAutotuner.benchmark_all_configs

    def bench(self, *a, **k):
        t = time.perf_counter()
        try:
            return orig_bench(self, *a, **k)
        finally:
            counts["autotune"] += time.perf_counter() - t
            counts["autotune_calls"] += 1

    th.CachingAutotuner.benchmark_all_configs = bench
    orig_compile = triton.compile

    def comp(*a, **k):
        t = time.perf_counter()
        try:
            return orig_compile(*a, **k)
        finally:
            counts["triton_compile"] += time.perf_counter() - t

    triton.compile = comp
    name, entry = TASKS[task]
    t = time.perf_counter()
    fn = getattr(load_baseline("baseline", str(ROOT / "tasks" / name / "baseline.py")), entry)
    torch.empty(1, device="cuda")
    out["load_and_cuda"] = time.perf_counter() - t
    args, kwargs = inputs(task)
    torch.cuda.synchronize()
    profiler = None
    if os.environ.get("DIAG_PROFILE"):
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    t = time.perf_counter()
    fn(*args, **kwargs)
    torch.cuda.synchronize()
    out["first_call"] = time.perf_counter() - t
    if profiler is not None:
        import io
        import pstats

        profiler.disable()
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(60)
        print(text.getvalue().replace(os.path.dirname(torch.__file__), "torch"), file=sys.stderr)
    t = time.perf_counter()
    for _ in range(9):
        fn(*args, **kwargs)
    torch.cuda.synchronize()
    out["next_9_calls"] = time.perf_counter() - t
    out.update(counts)
    out["files"] = sorted(str(p.relative_to(jobdir)) for p in jobdir.rglob("*.best_config"))[:6]
    return out


def run(task: str, jobdir: Path, local: bool, warm: str = "") -> dict:
    jobdir.mkdir(exist_ok=True)
    r = subprocess.run([sys.executable, __file__, "--child", task, str(jobdir), "1" if local else "0", warm],
                       capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        return {"error": r.stderr[-1500:]}
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", nargs="*", default=["10", "12"])
    ap.add_argument("--child", nargs=4)
    ap.add_argument("--profile", action="store_true", help="one staff run, then one timer's first call profiled")
    a = ap.parse_args()
    if a.child:
        task, jobdir, local, warm = a.child
        print(json.dumps(child(task, Path(jobdir), local == "1", warm)))
        return
    work = Path(tempfile.mkdtemp(prefix="diag-warm-"))
    if a.profile:
        task = a.tasks[0]
        print(task, "staff", run(task, work / "staff", False), flush=True)
        shutil.copytree(work / "staff" / "inductor", work / "timer" / "inductor", symlinks=True)
        r = subprocess.run([sys.executable, __file__, "--child", task, str(work / "timer"), "0", ""],
                           capture_output=True, text=True, timeout=300, env={**os.environ, "DIAG_PROFILE": "1"})
        print(r.stdout[-2000:], r.stderr[-12000:])
        return
    for task in a.tasks:
        for local in (False, True):
            staff = work / f"staff-{task}-{int(local)}"
            staff.mkdir()
            print(task, "staff", "local" if local else "nolocal", run(task, staff, local), flush=True)
            for rep, warm in (((0, ""), (1, ""), (2, "eager"), (3, "aot_eager")) if not local else ((0, ""),)):
                timer = work / f"timer-{task}-{int(local)}-{rep}"
                timer.mkdir()
                shutil.copytree(staff / "inductor", timer / "inductor", symlinks=True)
                print(task, "timer", "local" if local else "nolocal", warm or "-", run(task, timer, local, warm),
                      flush=True)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
