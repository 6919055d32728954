"""How fast is the answer key? Each INT8 and lowbit reference solution against torch.compile of the same math, eager
torch, and the best library call, in one process, at the issue's large shapes and at a few realistic ones.

    python scripts/bench_references.py [--tasks 10 11 12 13 14 20 21 22 23] [--quick] [--no-compile]
    TRITON_INTERPRET=1 python scripts/bench_references.py --smoke [--no-compile]

For each row: the lowest of three medians of 100 calls timed by CUDA events, each after an L2 flush that leaves L2
clean and a head start for the host (`bench`), in microseconds, and the ratios other / reference (> 1: the
reference is faster). Memory-bound tasks also show the bytes they must move (read x twice for a global absmax, or
once; write the codes) over the reference's time, as a share of what a device-to-device copy reaches in the same
run. GEMM rows show TOPS (int8) or TFLOPS (fp16) for 2 * M * N * K.

The reference is called as a student's file would be (its entry function, argument checks, allocation and any
layout work included). The library calls get their best layout for free (prepared outside the timed call), as the
issue's table did; task 12's `_int_mm` is also timed with torch's copy of W^T inside the call, the layout work
the reference's own call includes. The math in torch is `torch_math` of each task's baseline.py; the lowbit rows
also check that the reference's outputs match it, and `--smoke` runs those rows, small, on the CPU interpreter.
Needs CUDA (but --smoke); nothing here is asserted: it prints.

The Triton Puzzles' reference kernels have their own table, in the same style: scripts/bench_puzzles.py.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import importlib.util
import os
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
TASKS = ROOT / "tasks"
sys.path.insert(0, str(ROOT))

from grader.worker.timing import L2Flush  # noqa: E402  (the speed tier's flush: one way to empty L2)


def _load(task: str, filename: str, name: str):
    folder = next(TASKS.glob(f"{task}_*"))
    spec = importlib.util.spec_from_file_location(f"t{task}_{Path(filename).stem}", folder / filename)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)


def _entry(task: str, name: str):
    return _load(task, "solution.py", name)


HEAD_START_CYCLES = 600_000
"""GPU clock cycles (about 300 us on an H100) that `bench` keeps the GPU busy after each L2 flush, so that the host
has issued the whole call before the GPU reaches it, and the events time the GPU's work, not a host that fell
behind it. Without it, task 12's reference at B = 32 read 59.7 us in one run and 33.4 with it, compile's 67.8
against 48.1 (the flush alone is a head start of about 95 us, shorter than some calls' host work)."""


def bench(fn, *args, repeats: int = 3, reps: int = 100) -> float:
    """Microseconds of `fn(*args)` on the GPU: the lowest of `repeats` medians of `reps` calls, each timed by CUDA
    events after an L2 flush (the speed tier's, grader.worker.timing.L2Flush, which leaves L2 clean) and a head start
    for the host (HEAD_START_CYCLES). `triton.testing.do_bench`, used here before, flushes by writing 256 MB: the next
    call then also pays for writing those dirty lines back, about 10 us on the H100, which pulled every ratio of a short
    memory-bound call toward 1 (see L2Flush's numbers); and its flush was the host's only head start, so a call's host
    work could stall the GPU (one median of task 12 at B = 16 read 82.6 us against 42-44 in other runs)."""
    flush = _l2_flush()
    for _ in range(5):  # compiles, autotunes, warms up
        fn(*args)
    best = float("inf")
    for _ in range(repeats):
        events = []
        for _ in range(reps):
            flush()
            torch.cuda._sleep(HEAD_START_CYCLES)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn(*args)
            end.record()
            events.append((start, end))
        torch.cuda.synchronize()
        best = min(best, statistics.median(start.elapsed_time(end) for start, end in events) * 1e3)
    return best


@functools.cache
def _l2_flush() -> L2Flush:
    return L2Flush("cuda")


def bench_cpu(fn, *args, reps: int = 3) -> float:
    """--smoke: median microseconds of `reps` calls after one untimed call, by the host clock."""
    fn(*args)
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn(*args)
        times.append((time.perf_counter() - start) * 1e6)
    return statistics.median(times)


def compiled(fn, on: bool):
    if not on:
        return None
    return torch.compile(fn, mode="max-autotune-no-cudagraphs", dynamic=False)


# ------------------------------------------------------------------------------------------- the math, in torch


def _math(task: str):
    """The task's math in plain torch: `torch_math` of its baseline.py, what the speed tier compiles (one name
    through the grader and this script)."""
    return _load(task, "baseline.py", "torch_math")


# ------------------------------------------------------------------------------------------- rows


ROWS: list[dict] = []  # every printed row, for the targets at the end


def row(label: str, ref: float, others: dict[str, float | None], extra: str = "", share: float | None = None) -> None:
    ROWS.append({"label": label, "ref": ref, "others": others, "share": share})
    cells = [f"{label:<34}", f"ref {ref:9.1f} us"]
    for name, t in others.items():
        cells.append(f"{name} {t:9.1f} us ({t / ref:5.2f}x)" if t else f"{name} {'-':>9}")
    print("  ".join(cells) + ("  " + extra if extra else ""), flush=True)


def memory_bound(args, copy_gbs: float) -> None:
    dev = "cuda"
    for task, n in (("10", 8192), ("11", 8192), ("13", 8192)):
        if task not in args.tasks:
            continue
        x = torch.randn(n, n, dtype=torch.float16, device=dev)
        if task == "10":
            ref, math, reads = _entry("10", "quantize_global"), _math("10"), 2
        elif task == "11":
            ref, math, reads = _entry("11", "quantize_rowwise"), _math("11"), 1
        else:
            ref, math, reads = _entry("13", "quantize_global_transpose"), _math("13"), 2
        t_ref = bench(ref, x)
        comp = compiled(math, args.compile)
        t_comp = bench(comp, x) if comp else None
        t_eager = bench(math, x)
        moved = reads * x.numel() * x.element_size() + x.numel()  # reads of x, one int8 write
        gbs = moved / t_ref / 1e3
        row(f"{task} {n}x{n} fp16", t_ref, {"compile": t_comp, "eager": t_eager},
            f"{moved / 1e6:.0f} MB moved: {gbs:.0f} GB/s = {gbs / copy_gbs:.0%} of copy", share=gbs / copy_gbs)


def _int_mm_copying(x_q: torch.Tensor, w_q: torch.Tensor) -> torch.Tensor:
    return torch._int_mm(x_q, w_q.t().contiguous().t())


def gemms(args) -> None:
    dev = "cuda"
    n = k = 8192
    sizes = [8192] if args.quick else [8192, 2048, 256, 128, 32, 16]
    if "12" in args.tasks:
        ref = _entry("12", "matmul_int8_fused")
        comp = compiled(_math("12"), args.compile)  # Dynamo compiles it again for each shape (dynamic=False)
        for m in sizes:
            x_q = torch.randint(-127, 128, (m, k), dtype=torch.int8, device=dev)
            w_q = torch.randint(-127, 128, (k, n), dtype=torch.int8, device=dev)
            w_col = w_q.t().contiguous().t()  # column-major: cuBLASLt's int8 layout
            x_scale = torch.rand(1, device=dev) / 100
            w_scale = torch.rand(n, device=dev) / 100
            bias = torch.randn(n, dtype=torch.float16, device=dev)
            t_ref = bench(ref, x_q, x_scale, w_q, w_scale, bias)
            t_comp = bench(comp, x_q, x_scale, w_q, w_scale, bias) if comp else None
            t_lib = bench(torch._int_mm, x_q, w_col) if m > 16 else None  # _int_mm needs M > 16
            t_lib_rm = bench(torch._int_mm, x_q, w_q) if m > 16 else None
            # The reference's call includes its layout work (its own copy of W^T); here is _int_mm with the copy
            # torch makes of a row-major W, w_q.t().contiguous(), inside the timed call.
            t_lib_copy = bench(_int_mm_copying, x_q, w_q) if m > 16 else None
            ops = 2 * m * n * k
            row(f"12 {m}x{k}x{n} int8", t_ref, {"compile": t_comp, "_int_mm colmajor": t_lib,
                                                 "_int_mm + torch's copy": t_lib_copy,
                                                 "_int_mm rowmajor": t_lib_rm},
                f"{ops / t_ref / 1e6:.0f} TOPS")
    if "14" in args.tasks:
        ref = _entry("14", "backward_dx_int8_fused")
        comp = compiled(_math("14"), args.compile)
        for m in sizes:
            dy = torch.randn(m, n, dtype=torch.float16, device=dev)
            w_q = torch.randint(-127, 128, (k, n), dtype=torch.int8, device=dev)
            w_scale = torch.rand(n, device=dev) / 100
            w_deq = (w_q.float() * w_scale[None, :]).half()
            t_ref = bench(ref, dy, w_q, w_scale)
            t_comp = bench(comp, dy, w_q, w_scale) if comp else None
            t_lib = bench(torch.matmul, dy, w_deq.t())
            t_ceiling = _triton_ceiling(dy, w_deq)
            ops = 2 * m * n * k
            row(f"14 {m}x{n}x{k} dX", t_ref, {"compile": t_comp, "cuBLAS fp16 (W dequantized)": t_lib,
                                               "Triton fp16 GEMM (W dequantized)": t_ceiling},
                f"{ops / t_ref / 1e6:.0f} TFLOPS")


@functools.cache
def _triton_gemm_ceiling():
    """scripts/triton_gemm_ceiling.py's configs and entry, loaded once from its file (as the tasks' files are)."""
    path = ROOT / "scripts" / "triton_gemm_ceiling.py"
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.CONFIGS, module.gemm_fp16


def _triton_ceiling(dy: torch.Tensor, w_deq: torch.Tensor) -> float | None:
    """Task 14's GEMM in Triton, handed W already dequantized: the fastest of triton_gemm_ceiling's configs whose
    result matches cuBLAS's (None if none runs here). A fused kernel does this work and more."""
    CONFIGS, gemm_fp16 = _triton_gemm_ceiling()

    want = dy @ w_deq.t()
    times = []
    for config in CONFIGS:
        try:
            got = gemm_fp16(dy, w_deq, config)
        except Exception as e:  # e.g. out of shared memory on a smaller GPU
            print(f"   (Triton GEMM {config}: {type(e).__name__})")
            continue
        if not torch.allclose(got.float(), want.float(), rtol=1e-2, atol=1e-1):
            print(f"   (Triton GEMM {config}: differs from cuBLAS, not counted)")
            continue
        times.append(bench(gemm_fp16, dy, w_deq, config))
    return min(times) if times else None


# ------------------------------------------------------------------------------------------- lowbit (20-23)


def _differs(got, want) -> str:
    """'' when the reference's outputs match torch's: integer outputs exactly, float ones within 1% of the largest
    magnitude (task 23 sums in another order; the bench compares speeds, the grader judges results)."""
    got = got if isinstance(got, (tuple, list)) else (got,)
    want = want if isinstance(want, (tuple, list)) else (want,)
    for i, (a, b) in enumerate(zip(got, want)):
        if a.shape != b.shape:
            return f"output {i}: shape {tuple(a.shape)} against {tuple(b.shape)}"
        if a.dtype.is_floating_point or b.dtype.is_floating_point:
            a, b = a.float(), b.float()
            err = (a - b).abs().max().item() if a.numel() else 0.0
            if err > 1e-2 * (b.abs().max().item() if b.numel() else 0.0) + 1e-5:
                return f"output {i}: off by up to {err:.3g}"
        elif not torch.equal(a, b):
            return f"output {i}: {(a != b).sum().item()} of {a.numel()} elements differ"
    return ""


BITS = 2  # the lowbit rows' code width, the homework's main one: 16 codes a word


def _words(*shape: int, dev: str) -> torch.Tensor:
    """Random int32 words, negative ones included: any 32 bits are valid packed codes."""
    return torch.randint(-2**31, 2**31 - 1, shape, dtype=torch.int32, device=dev)


def _packed_activation(k: int, cin: int, act: torch.dtype, dev: str, m_scale: float) -> tuple[torch.Tensor, ...]:
    """(P, S, M) of a [k, cin] activation in task 21's format: words, and a scale and a minimum per group of 256."""
    groups = k * -(-cin // 256)
    return (_words(groups, 256 * BITS // 32, dev=dev), (torch.rand(groups, device=dev) / 10).to(act),
            (torch.randn(groups, device=dev) * m_scale).to(act))


def _lowbit_cases(task: str, smoke: bool, dev: str):
    """(label, args, kwargs, bytes the call must move or None, flops or None) per size; the CPU interpreter (--smoke)
    runs fp16 and small sizes. Activations are bf16 on CUDA, as the homework's CUDA cases are."""
    act = torch.float16 if smoke else torch.bfloat16
    if task == "20":
        for rows, cols in ([(4, 64)] if smoke else [(4096, 8192)]):
            codes = torch.randint(0, 1 << BITS, (rows, cols), dtype=torch.int32, device=dev)
            packed = _words(rows, cols * BITS // 32, dev=dev)
            moved = 2 * 4 * (codes.numel() + packed.numel())  # codes in, words out; words in, codes out
            yield f"20 {rows}x{cols} bits={BITS}", (codes, packed), {"bits": BITS}, moved, None
    elif task == "21":
        for k, cin in ([(3, 300)] if smoke else [(32768, 768), (8192, 1000)]):
            x = torch.randn(k, cin, device=dev).to(act)
            p, s_, m_ = _packed_activation(k, cin, act, dev, m_scale=1.0)
            moved = 2 * (2 * x.numel() + 4 * p.numel() + 4 * s_.numel())  # both halves: activations, words, s and m
            yield f"21 {k}x{cin} bits={BITS}", (x, p, s_, m_), {"bits": BITS}, moved, None
    elif task == "22":
        for rows, cols in ([(5, 77)] if smoke else [(8192, 3072)]):
            x = torch.randn(rows, cols, device=dev)
            x[torch.rand(rows, cols, device=dev) < 0.1] = 0
            x, dy = x.to(act), torch.randn(rows, cols, device=dev).to(act)
            mask = _words(-(-x.numel() // 32), dev=dev)
            yield f"22 {rows}x{cols}", (x, dy, mask), {}, 4 * 2 * x.numel() + 2 * 4 * mask.numel(), None
    elif task == "23":
        for k, cin, cout in ([(64, 300, 40)] if smoke else [(8192, 768, 768), (100864, 768, 768)]):
            dy = torch.randn(k, cout, device=dev).to(act)
            p, s_, m_ = _packed_activation(k, cin, act, dev, m_scale=0.1)
            yield (f"23 {k}x{cin}x{cout} bits={BITS}", (dy, p, s_, m_), {"cin": cin, "bits": BITS}, None,
                   2 * k * cin * cout)


LOWBIT_ENTRIES = {"20": "pack_unpack", "21": "group_quant", "22": "relu_mask", "23": "dw_from_packed"}


def lowbit(args, copy_gbs: float | None) -> None:
    """Tasks 20-23: the reference against eager torch and torch.compile of `torch_math` (each task's baseline.py),
    and task 23 against the unfused path of its speed tests (task 21's dequant kernel + cuBLAS). Each row also
    says whether the reference's outputs match torch's."""
    dev = "cpu" if args.smoke else "cuda"
    for task in ("20", "21", "22", "23"):
        if task not in args.tasks:
            continue
        ref, math = _entry(task, LOWBIT_ENTRIES[task]), _math(task)
        if args.smoke:  # the interpreter has no driver to benchmark configs with: run each kernel's first one
            import triton

            for value in list(ref.__globals__.values()):
                if isinstance(value, triton.runtime.Autotuner):
                    value.configs = value.configs[:1]
        comp = compiled(math, args.compile and not args.smoke)
        timer = bench_cpu if args.smoke else bench
        unfused = _load("23", "baseline.py", "dw_from_packed") if task == "23" else None
        for label, a, kw, moved, flops in _lowbit_cases(task, args.smoke, dev):
            problem = _differs(ref(*a, **kw), math(*a, **kw))
            call = lambda f, kw=kw: (lambda *xs: f(*xs, **kw))  # noqa: E731
            t_ref = timer(call(ref), *a)
            others = {"compile": timer(call(comp), *a) if comp else None, "eager": timer(call(math), *a)}
            if unfused:
                others["unfused (dequant kernel + cuBLAS)"] = timer(call(unfused), *a)
            notes = []
            if moved and copy_gbs:
                gbs = moved / t_ref / 1e3
                notes.append(f"{moved / 1e6:.0f} MB moved: {gbs:.0f} GB/s = {gbs / copy_gbs:.0%} of copy")
            if flops and not args.smoke:
                notes.append(f"{flops / t_ref / 1e6:.0f} TFLOPS")
            if problem:
                notes.append(f"differs from torch: {problem}")
            row(label, t_ref, others, "; ".join(notes))


def targets(rows: list[dict]) -> list[str]:
    """The references' targets, one line per row: the memory-bound tasks (10, 11, 13) at >= 1x torch.compile and >= 90%
    of the copy's bandwidth; 12 at >= 1.5x the best of torch.compile and `_int_mm`, read two ways (with torch's
    copy of W^T in `_int_mm`'s call, and with W^T handed to it); 14 at >= 1x torch.compile, shown beside (not a
    target) how compile compares with Triton's own fp16 GEMM handed the dequantized W. A ratio is other /
    reference; a missing measurement (no compile, `_int_mm` below 17 rows) leaves the other side out."""
    def best(others: dict, names: tuple[str, ...]) -> float | None:
        times = [others[n] for n in names if others.get(n)]
        return min(times) if times else None

    lines = []
    for r in rows:
        task, ref, others = r["label"].split()[0], r["ref"], r["others"]
        checks: list[tuple[str, bool]] = []
        aside = ""  # printed after the checks, not one of them
        if task in ("10", "11", "13"):
            if others.get("compile"):
                checks.append((f"{others['compile'] / ref:.2f}x compile (>= 1)", others["compile"] / ref >= 1.0))
            if r["share"] is not None:
                checks.append((f"{r['share']:.0%} of copy (>= 90%)", r["share"] >= 0.90))
        elif task == "12":
            for what, names in (("with the copy", ("compile", "_int_mm + torch's copy")),
                                ("W^T given", ("compile", "_int_mm colmajor"))):
                other = best(others, names)
                if other:
                    checks.append((f"{other / ref:.2f}x the best, {what} (>= 1.5)", other / ref >= 1.5))
        elif task == "14" and others.get("compile"):
            checks.append((f"{others['compile'] / ref:.2f}x compile (>= 1)", others["compile"] / ref >= 1.0))
            ceiling = others.get("Triton fp16 GEMM (W dequantized)")
            if ceiling:  # not a target: how far a fused Triton kernel could go here at all
                aside = f"(Triton's fp16 GEMM, W dequantized for free: {others['compile'] / ceiling:.2f}x compile)"
        if checks:
            verdict = "met" if all(ok for _, ok in checks) else "MISSED"
            lines.append(f"{r['label']:<34}  {verdict:<6}  " + "; ".join(
                [text + ("" if ok else " <-") for text, ok in checks] + ([aside] if aside else [])))
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", nargs="+", default=["10", "11", "12", "13", "14", "20", "21", "22", "23"])
    parser.add_argument("--quick", action="store_true", help="the large shapes only")
    parser.add_argument("--no-compile", dest="compile", action="store_false", help="skip torch.compile")
    parser.add_argument("--smoke", action="store_true",
                        help="the lowbit rows only, small, on the CPU under TRITON_INTERPRET=1 (checks that each "
                             "reference matches its torch_math; the times mean nothing)")
    args = parser.parse_args()
    if args.smoke:
        if os.environ.get("TRITON_INTERPRET") != "1":
            sys.exit("--smoke runs Triton's interpreter: set TRITON_INTERPRET=1")
        print("bench_references --smoke on the CPU (Triton's interpreter; medians of 3 calls by the host clock)")
        from grader.worker.interpreter import patch_interpreter

        patch_interpreter()  # as a CPU worker runs kernels (a scalar as a range bound under triton 3.6, ...)
        lowbit(args, None)
        return
    if not torch.cuda.is_available():
        sys.exit("bench_references.py needs CUDA (or --smoke, on the CPU)")
    import triton

    torch.backends.cuda.matmul.allow_tf32 = False
    src = torch.empty(1 << 28, dtype=torch.int8, device="cuda")
    dst = torch.empty_like(src)
    t_copy = bench(dst.copy_, src)
    copy_gbs = 2 * src.numel() / t_copy / 1e3
    print(f"bench_references on {torch.cuda.get_device_name()}, {datetime.date.today()}, torch {torch.__version__}, "
          f"triton {triton.__version__}; device-to-device copy of 256 MiB: {copy_gbs:.0f} GB/s (read + write)")
    memory_bound(args, copy_gbs)
    gemms(args)
    lowbit(args, copy_gbs)
    print("\ntargets:")
    for line in targets(ROWS):
        print(line)


if __name__ == "__main__":
    main()
