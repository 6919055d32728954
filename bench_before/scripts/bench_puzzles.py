"""How fast is the answer key of the Triton Puzzles? Each puzzle's reference solution (tasks/puzzleNN_*/solution.py)
against torch.compile of the same math and eager torch, in one process, at the notebook's size and at larger ones
that make the GPU work.

    python scripts/bench_puzzles.py [--puzzles 1 5 11] [--quick] [--no-compile]
    TRITON_INTERPRET=1 python scripts/bench_puzzles.py --smoke [--no-compile]

For each row: the lowest of three medians of 100 calls timed by CUDA events, each after an L2 flush (the timing
functions are scripts/bench_references.py's), in microseconds, and the ratios other / reference (> 1: the reference
is faster). Memory-bound puzzles also show the bytes the kernel moves over the reference's time, as a share of what
a device-to-device copy reaches in the same run (a kernel that mostly writes, as puzzle 4's, can pass 100%); the
matrix products show TFLOPS (float32, 2 * N0 * N1 * MID per matrix), puzzle 9 its scores per second.

The reference kernel is launched as the grader launches it (task.yaml `launch`): grader.pipeline.grading.launch_job
reads the kernel, the grid and the environment, grader.worker.main.Launcher runs `kernel[cdiv(N0, B0), ...](*tensors,
**sizes)` with only the keyword arguments the kernel declares, on the inputs of the puzzle's oracle (`generate_input` of
reference/puzzleNN_*.py, seed 0 as in the notebook). Kernels are specialized on their integer arguments, as in the
grader's speed tests. The torch side is the oracle's `spec` (the notebook's spec function), on the same float32 inputs.
The first size of each puzzle is its task.yaml `notebook` case; the larger ones and their block sizes are chosen below,
one comment per puzzle. Some kernels are naive on purpose (puzzles 1 and 3 run one program): this prints their numbers
and asserts nothing; a row whose kernel output differs from eager torch says so in its note.

--smoke runs everything on the CPU under TRITON_INTERPRET=1, at tiny sizes (the notebook case and one small case
with the large rows' block sizes), timed with time.perf_counter: it checks the script without a GPU, and its
numbers are the interpreter's, not a GPU's.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import os
import sys
import types
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from grader.config import load_task  # noqa: E402
from grader.judge import compare_values  # noqa: E402
from grader.pipeline.grading import Prepared, launch_job  # noqa: E402
from grader.worker.main import Launcher, _load_module  # noqa: E402

sys.path.insert(0, str(ROOT / "scripts"))
from bench_references import bench, bench_cpu, compiled  # noqa: E402  (one way to time, for both tables)

TASKS = ROOT / "tasks"

# ------------------------------------------------------------------------------------------- sizes, per puzzle
# LARGE: the rows after the notebook's (on CUDA). SMOKE: one case for --smoke with the block sizes of LARGE, small
# enough for the interpreter. A size missing from a case counts as 1 in the grid, as in the grader.

LARGE: dict[int, list[dict]] = {
    # No mask and one program (grid 1): the block must be the whole vector (B0 = N0, a power of two). One SM
    # works whatever N0 is; 65536 floats is 512 a thread at 4 warps (spilled), about the most worth compiling.
    1: [dict(N0=4096, B0=4096), dict(N0=65536, B0=65536)],
    # Masked blocks: B0 = 1024 is 8 floats a thread at 4 warps (two 16-byte loads), 16384 programs at 16M.
    2: [dict(N0=65536, B0=1024), dict(N0=1 << 24, B0=1024)],
    # No masks, one program for the whole (N1, N0) table: B0 = N0, B1 = N1, powers of two, at most 65536
    # elements (as puzzle 1's largest block).
    3: [dict(N0=128, N1=128, B0=128, B1=128), dict(N0=256, N1=256, B0=256, B1=256)],
    # 2-D tiles of z (N1, N0): B0 = 128 along z's contiguous rows (512-byte coalesced stores), B1 = 32 rows,
    # 4096 elements (32 a thread at 4 warps); 16384 tiles at 8192 x 8192.
    4: [dict(N0=1024, N1=1024, B0=128, B1=32), dict(N0=8192, N1=8192, B0=128, B1=32)],
    5: [dict(N0=1024, N1=1024, B0=128, B1=32), dict(N0=8192, N1=8192, B0=128, B1=32)],  # as puzzle 4
    # As puzzle 4; each tile holds three of them (x, dz, dx), 96 floats a thread.
    6: [dict(N0=1024, N1=1024, B0=128, B1=32), dict(N0=8192, N1=8192, B0=128, B1=32)],
    # Rows of length T: B1 = 1024 along the row (contiguous), B0 = 4 rows a program (4096 elements a step, 1024
    # programs at N0 = 4096). N1 = B1: the grid's second axis is cdiv(N1, B1) and the kernel ignores program_id(1),
    # so N1 > B1 would launch copies of every program.
    7: [dict(N0=1024, N1=1024, T=4096, B0=4, B1=1024), dict(N0=4096, N1=1024, T=16384, B0=4, B1=1024)],
    8: [dict(N0=1024, N1=1024, T=4096, B0=4, B1=1024), dict(N0=4096, N1=1024, T=16384, B0=4, B1=1024)],  # as 7
    # B0 = 32 queries a program; the kernel steps over keys 32 at a time (CHUNK), so 1024 scores a step, and
    # N0 / 32 = 128 programs at 4096 (about one per SM of an H100), 512 at 16384.
    9: [dict(N0=4096, T=4096, B0=32), dict(N0=16384, T=16384, B0=32)],
    # B0 = 8 images a program: the kernel's tile is B0 x 16 columns (BW), 128 elements, one a thread at 4 warps;
    # 64 x 64 images with the notebook's 4 x 4 kernel, 128 and 1024 programs.
    10: [dict(N0=1024, H=64, W=64, KH=4, KW=4, B0=8), dict(N0=8192, H=64, W=64, KH=4, KW=4, B0=8)],
    # 64 x 64 tiles of z (a 32-register float32 accumulator a thread at 4 warps), B_MID = 32, one matrix of the
    # batch a program (B2 = 1). TRITON_F32_DEFAULT=ieee (task.yaml's env) makes tl.dot full float32: no tensor cores.
    11: [dict(N0=1024, N1=1024, N2=4, MID=1024, B0=64, B1=64, B2=1, B_MID=32),
         dict(N0=4096, N1=4096, N2=1, MID=4096, B0=64, B1=64, B2=1, B_MID=32)],
    # MID is at most 64 (one int32 of shifts a row) and the kernel steps 16 at a time (CHUNK): a thin product, its
    # time mostly z's writes. 64 x 64 tiles of z, 4096 and 16384 programs.
    12: [dict(N0=4096, N1=4096, MID=64, B0=64, B1=64), dict(N0=8192, N1=8192, MID=64, B0=64, B1=64)],
}

SMOKE: dict[int, dict] = {
    1: dict(N0=4096, B0=4096),
    2: dict(N0=5000, B0=1024),
    3: dict(N0=64, N1=128, B0=64, B1=128),
    4: dict(N0=300, N1=70, B0=128, B1=32),
    5: dict(N0=300, N1=70, B0=128, B1=32),
    6: dict(N0=300, N1=70, B0=128, B1=32),
    7: dict(N0=10, N1=1024, T=3000, B0=4, B1=1024),
    8: dict(N0=10, N1=1024, T=3000, B0=4, B1=1024),
    9: dict(N0=70, T=100, B0=32),
    10: dict(N0=10, H=12, W=20, KH=4, KW=4, B0=8),
    11: dict(N0=100, N1=70, N2=2, MID=80, B0=64, B1=64, B2=1, B_MID=32),
    12: dict(N0=100, N1=70, MID=64, B0=64, B1=64),
}


def moved(nn: int, p: dict) -> int | None:
    """Bytes the reference kernel reads and writes (float32 and int32: 4 bytes), for the memory-bound puzzles."""
    g = lambda *names: [p.get(n, 1) for n in names]
    if nn in (1, 2):
        return 2 * 4 * p["N0"]
    if nn in (3, 4, 5):
        n0, n1 = g("N0", "N1")
        return 4 * (n0 * n1 + n0 + n1)
    if nn == 6:
        n0, n1 = g("N0", "N1")
        return 4 * (3 * n0 * n1 + n1)  # x, dz read, dx written, y
    if nn == 7:
        n0, t = g("N0", "T")
        return 4 * (n0 * t + n0)
    if nn == 8:
        n0, t = g("N0", "T")
        return 4 * 3 * n0 * t  # x read twice (maximum and sum, then the values), z written
    if nn == 10:
        n0, h, w = g("N0", "H", "W")
        return 4 * 2 * n0 * h * w  # x once (its KH x KW reuses hit the cache) and z
    if nn == 12:
        n0, n1, mid = g("N0", "N1", "MID")
        return 4 * (n0 * n1 + mid * n1 + 2 * n0 * mid // 8 + n0)  # z, activation, weights and scales, shifts
    return None


def note(nn: int, p: dict, t_ref: float, copy_gbs: float | None) -> str:
    """`copy_gbs` None (--smoke): no rates, the interpreter's would mean nothing."""
    parts = []
    if nn in (1, 3):
        parts.append("one program")
    if copy_gbs is None:
        return "; ".join(parts)
    if nn == 9:
        parts.append(f"{p['N0'] * p['T'] / t_ref / 1e3:.1f} G scores/s")
    if nn in (11, 12):
        flops = 2 * p.get("N2", 1) * p["N0"] * p["N1"] * p["MID"]
        parts.append(f"{flops / t_ref / 1e6:.2f} TFLOPS fp32")
    nbytes = moved(nn, p)
    if nbytes is not None and nbytes >= 1e6 and nn not in (1, 3):  # under 1 MB, a launch's latency, not bandwidth
        gbs = nbytes / t_ref / 1e3
        parts.append(f"{nbytes / 1e6:.3g} MB moved: {gbs:.0f} GB/s = {gbs / copy_gbs:.0%} of copy")
    return "; ".join(parts)


# ------------------------------------------------------------------------------------------- timing


def torch_math(nn: int, oracle):
    """The puzzle's math in torch: its oracle's `spec` (the notebook's spec function), run on the float32 inputs.

    Puzzle 12's `nibbles` makes its shift amounts with `torch.arange` on the CPU (the oracle runs there), which
    neither eager torch nor torch.compile mixes with CUDA inputs (a `torch.device` context does not reach Dynamo's
    trace): the same `spec` code, with a `nibbles` that makes them on its input's device."""
    if nn != 12:
        return oracle.spec

    def nibbles(x: torch.Tensor) -> torch.Tensor:
        return (x[..., None].long() >> (4 * torch.arange(oracle.FPINT, device=x.device))) & 15

    return types.FunctionType(oracle.spec.__code__, {**oracle.spec.__globals__, "nibbles": nibbles}, "spec")


def quiet_inductor() -> None:
    """Keep the rows readable: max-autotune prints each GEMM's autotuning table and logs an error for every
    template config too big for the GPU's shared memory (and skips it)."""
    import logging
    import warnings

    import torch._inductor.config as inductor_config

    inductor_config.autotune_num_choices_displayed = 0
    inductor_config.max_autotune_report_choices_stats = False
    logging.getLogger("torch._inductor.select_algorithm").setLevel(logging.CRITICAL)
    warnings.filterwarnings("ignore", message="TensorFloat32 tensor cores")
    warnings.filterwarnings("ignore", message="TypedStorage is deprecated")


# ------------------------------------------------------------------------------------------- rows


def row(label: str, sizes: str, ref: float, others: dict[str, float | None], extra: str = "") -> None:
    cells = [f"{label:<44}", f"{sizes:<52}", f"ref {ref:9.1f} us"]
    for name, t in others.items():
        cells.append(f"{name} {t:9.1f} us ({t / ref:5.2f}x)" if t else f"{name} {'-':>9} {'':9}")
    print("  ".join(cells) + ("  " + extra if extra else ""), flush=True)


def sizes_text(p: dict) -> str:
    dims = " ".join(f"{k}={v}" for k, v in p.items() if not k.startswith("B"))
    blocks = " ".join(f"{k}={v}" for k, v in p.items() if k.startswith("B"))
    return f"{dims} | {blocks}"


COMPILE_FAILURES: set[str] = set()


def try_compile(comp, inputs) -> bool:
    """One call of the compiled math (compiles it); on failure say why once per reason and show '-'."""
    try:
        comp(*inputs)
        return True
    except Exception as exc:  # noqa: BLE001 - a compile failure is a result: '-' in its column
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
        why = f"{type(exc).__name__}: {' / '.join(lines[:2])}"[:400]
        if why not in COMPILE_FAILURES:
            COMPILE_FAILURES.add(why)
            print(f"  (torch.compile failed, '-' in its column where it does: {why})", flush=True)
        return False


def puzzle(nn: int, args, device: str, timer, copy_gbs: float | None) -> None:
    folder = next(TASKS.glob(f"puzzle{nn:02d}_*"))
    task = load_task(folder)
    job = launch_job(task)  # {kernel, grid, env, outputs}: what the grader's worker gets
    os.environ.update(job["env"])  # before the kernel compiles, as the worker sets it before importing
    module = _load_module(f"puzzle{nn:02d}_solution", str(folder / "solution.py"))
    launcher = Launcher(getattr(module, job["kernel"], None), job)
    oracle = Prepared._oracle(task)  # reference/<task.reference>.py
    math = torch_math(nn, oracle)
    n_out = job["outputs"]
    label = f"p{nn:02d} {folder.name.split('_', 1)[1]}"

    notebook = next(c.params for c in task.cases if c.id == "notebook")
    cases = [notebook, SMOKE[nn]] if args.smoke else [notebook, *LARGE[nn]]
    if args.quick:
        cases = cases[-1:]
    for params in cases:
        tensors, scalars = oracle.generate_input(**params)
        tensors = [t.to(device) for t in tensors]
        inputs = tensors[: len(tensors) - n_out]
        ref = functools.partial(launcher, **scalars)
        t_ref = timer(ref, *tensors)
        out = tensors[-1].clone()  # the last timed call's z
        expected = math(*inputs)
        t_eager = timer(math, *inputs)
        comp = compiled(math, args.compile)
        t_comp = timer(comp, *inputs) if comp is not None and try_compile(comp, inputs) else None
        extra = note(nn, scalars, t_ref, copy_gbs)
        problem = compare_values(task.outputs[0], out.cpu(), expected.detach().cpu())
        if problem:
            extra = (extra + "; " if extra else "") + f"differs from eager torch: {problem[:160]}"
        row(label, sizes_text(params), t_ref, {"compile": t_comp, "eager": t_eager}, extra)
        del tensors, inputs, out, expected
        if device == "cuda":
            torch.cuda.empty_cache()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--puzzles", nargs="+", type=int, default=list(range(1, 13)), metavar="N",
                        help="which puzzles (1 to 12; default all)")
    parser.add_argument("--quick", action="store_true", help="one size each (the largest)")
    parser.add_argument("--no-compile", dest="compile", action="store_false", help="skip torch.compile")
    parser.add_argument("--smoke", action="store_true",
                        help="CPU, TRITON_INTERPRET=1, tiny sizes, host clock: checks the script without a GPU")
    args = parser.parse_args()
    if unknown := sorted(set(args.puzzles) - set(LARGE)):
        sys.exit(f"no puzzle {unknown}: puzzles are 1 to 12")
    import triton

    if args.compile:
        quiet_inductor()
    env = " ".join(f"{k}={v}" for k, v in launch_job(load_task(next(TASKS.glob("puzzle01_*"))))["env"].items())
    if args.smoke:
        os.environ["TRITON_INTERPRET"] = "1"  # read when a kernel is decorated, so before the solutions load
        from grader.worker.interpreter import patch_interpreter

        patch_interpreter()  # as the CPU worker does
        device, timer, copy_gbs = "cpu", bench_cpu, None
        print(f"bench_puzzles --smoke on the CPU (Triton's interpreter; medians of 3 calls by time.perf_counter: "
              f"the interpreter's speed, not a GPU's), {datetime.date.today()}, torch {torch.__version__}, "
              f"triton {triton.__version__}; launch env {env}", flush=True)
    else:
        if not torch.cuda.is_available():
            sys.exit("bench_puzzles.py needs CUDA (or --smoke, on the CPU)")
        device, timer = "cuda", bench
        torch.backends.cuda.matmul.allow_tf32 = False  # float32 products in full precision, as the kernels' ieee
        src = torch.empty(1 << 28, dtype=torch.int8, device="cuda")
        dst = torch.empty_like(src)
        t_copy = bench(dst.copy_, src)
        copy_gbs = 2 * src.numel() / t_copy / 1e3
        del src, dst
        print(f"bench_puzzles on {torch.cuda.get_device_name()}, {datetime.date.today()}, torch {torch.__version__}, "
              f"triton {triton.__version__}; launch env {env}; device-to-device copy of 256 MiB: {copy_gbs:.0f} GB/s "
              f"(read + write)", flush=True)
    for nn in args.puzzles:
        puzzle(nn, args, device, timer, copy_gbs)


if __name__ == "__main__":
    main()
