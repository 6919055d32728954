"""The benchmark scripts still run: scripts/bench_puzzles.py and the lowbit rows of scripts/bench_references.py on the
CPU interpreter (--smoke), which also check each reference's output against eager torch."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent


def test_bench_puzzles_smoke_prints_a_matching_row_per_size() -> None:
    env = dict(os.environ, TRITON_INTERPRET="1")
    done = subprocess.run([sys.executable, "scripts/bench_puzzles.py", "--smoke", "--no-compile", "--puzzles", "2", "8",
                           "11"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [line for line in done.stdout.splitlines() if line.startswith("p")]
    # --smoke runs two sizes a puzzle: the notebook's case and one with the large rows' block sizes
    assert [r.split()[0] for r in rows] == ["p02", "p02", "p08", "p08", "p11", "p11"], done.stdout
    assert all(" ref " in r and " us " in r for r in rows), done.stdout
    assert not [r for r in rows if "differs from eager torch" in r], done.stdout


def test_bench_references_smoke_prints_a_matching_row_per_lowbit_task() -> None:
    env = dict(os.environ, TRITON_INTERPRET="1")
    done = subprocess.run([sys.executable, "scripts/bench_references.py", "--smoke", "--no-compile"], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [line for line in done.stdout.splitlines() if line[:2] in ("20", "21", "22", "23")]
    assert [r.split()[0] for r in rows] == ["20", "21", "22", "23"], done.stdout
    assert all(" ref " in r and " eager " in r for r in rows), done.stdout
    assert "unfused (dequant kernel + cuBLAS)" in rows[3], done.stdout
    assert not [r for r in rows if "differs from torch" in r], done.stdout


def test_bench_references_says_when_a_reference_differs_from_torch() -> None:
    differs = _bench_references()._differs
    words = torch.tensor([1, -2, 3], dtype=torch.int32)
    assert differs((words, torch.ones(4)), (words.clone(), torch.ones(4) + 1e-4)) == ""  # floats: within 1%
    assert differs((words, torch.ones(4)), (words, torch.ones(4) * 1.1)) == "output 1: off by up to 0.1"
    assert differs(words, torch.tensor([1, -2, 4], dtype=torch.int32)) == "output 0: 1 of 3 elements differ"
    assert differs(words, words[:2]).startswith("output 0: shape (3,)")


def _bench_references():
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_references", ROOT / "scripts" / "bench_references.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_bench_references_targets_read_the_rows_as_issue_16_states_them() -> None:
    """Rows as scripts/bench_references.py collects them, with the H100's figures of 2026-11-24 (but task 13 at 89%
    of the copy's bandwidth, not its 90%, so that this check is seen to fail too)."""
    targets = _bench_references().targets
    rows = [
        {"label": "10 8192x8192 fp16", "ref": 122.8, "others": {"compile": 126.0, "eager": 1131.3}, "share": 0.93},
        {"label": "11 8192x8192 fp16", "ref": 72.7, "others": {"compile": 70.6, "eager": 1162.9}, "share": 0.94},
        {"label": "13 8192x8192 fp16", "ref": 126.3, "others": {"compile": 129.8, "eager": 1590.5}, "share": 0.89},
        {"label": "12 8192x8192x8192 int8", "ref": 1062.7, "share": None,
         "others": {"compile": 3896.4, "_int_mm colmajor": 1213.0, "_int_mm + torch's copy": 1596.2,
                    "_int_mm rowmajor": 8469.4}},
        {"label": "12 16x8192x8192 int8", "ref": 49.3, "share": None,
         "others": {"compile": 67.8, "_int_mm colmajor": None, "_int_mm + torch's copy": None,
                    "_int_mm rowmajor": None}},
        {"label": "14 128x8192x8192 dX", "ref": 63.9, "share": None,
         "others": {"compile": 130.8, "cuBLAS fp16 (W dequantized)": 62.0}},
        {"label": "14 8192x8192x8192 dX", "ref": 2575.2, "share": None,
         "others": {"compile": 1639.2, "cuBLAS fp16 (W dequantized)": 1657.0,
                    "Triton fp16 GEMM (W dequantized)": 1629.0}},
    ]
    lines = targets(rows)
    verdicts = [line[34:].split()[0] for line in lines]  # after the label's column
    assert verdicts == ["met", "MISSED", "MISSED", "MISSED", "MISSED", "met", "MISSED"], "\n".join(lines)
    assert "0.97x compile (>= 1) <-" in lines[1] and "94% of copy (>= 90%);" not in lines[1]
    assert "89% of copy (>= 90%) <-" in lines[2]  # 1.03x compile, but under 90% of the copy's bandwidth
    # 12 at 8192^3: 1.50x with the copy in _int_mm's call (met), 1.14x with W^T given (missed)
    assert "1.50x the best, with the copy (>= 1.5);" in lines[3] and "1.14x the best, W^T given (>= 1.5) <-" in lines[3]
    assert "1.38x the best" in lines[4]  # batch 16: no _int_mm, so compile is the best
    # 14: Triton's own GEMM on W given is shown beside the target, and does not make the row met
    assert "0.64x compile (>= 1) <-" in lines[6], lines[6]
    assert "(Triton's fp16 GEMM, W dequantized for free: 1.01x compile)" in lines[6], lines[6]
    assert "Triton's" not in lines[5]  # no such column in that row


def test_triton_gemm_ceiling_computes_the_product_on_the_interpreter() -> None:
    """The kernel bench_references times as Triton's ceiling for task 14, on ragged tiles (M and N not multiples of
    the blocks, K of the step) and with K = 0; the interpreter runs its tensor descriptors."""
    code = (
        "import sys, torch; sys.path.insert(0, 'scripts')\n"
        "from triton_gemm_ceiling import gemm_fp16\n"
        # as a CPU worker runs kernels: a scalar as a range bound (triton 3.6's interpreter and NumPy >= 2.5)
        "from grader.worker.interpreter import patch_interpreter_scalars; patch_interpreter_scalars()\n"
        "torch.manual_seed(0)\n"
        "for m, n, k in ((40, 72, 96), (16, 8, 0)):\n"
        "    a = torch.randn(m, k).half(); b = torch.randn(n, k).half()\n"
        "    got = gemm_fp16(a, b, (16, 32, 32, 4, 2), num_sms=3).float()\n"
        "    want = a.float() @ b.float().t()\n"
        "    print(m, n, k, float((got - want).abs().max()), bool(torch.allclose(got, want, rtol=1e-2, atol=2e-2)))\n")
    env = dict(os.environ, TRITON_INTERPRET="1")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert [line.split()[-1] for line in done.stdout.splitlines()] == ["True", "True"], done.stdout


def test_tolerance_use_prints_how_much_of_each_tolerance_a_reference_uses() -> None:
    """scripts/tolerance_use.py: the numbers behind task.yaml's tolerance comments (docs/task-authors.md)."""
    done = subprocess.run([sys.executable, "scripts/tolerance_use.py", "--task", "puzzle08_long_softmax", "--task",
                           "puzzle12_quant_dot"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [line for line in done.stdout.splitlines() if line.startswith("puzzle")]
    assert [r.split()[0] for r in rows] == ["puzzle08_long_softmax", "puzzle12_quant_dot"], done.stdout
    used = [float(r.rsplit("tolerance used ", 1)[1]) for r in rows]
    assert all(0 <= u < 0.1 for u in used), rows  # a correct kernel uses a small fraction of it


def test_bench_server_smoke_prints_every_row_and_the_goals() -> None:
    """scripts/bench_server.py --smoke (the CPU, a puzzle, tiny counts): `grade` alone, the warmed-up server's memory,
    the idle and burst rows, and the lines of ratios against their goals."""
    done = subprocess.run([sys.executable, "scripts/bench_server.py", "--smoke"], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    table = [line.split("|") for line in done.stdout.splitlines() if line.startswith("| ")]
    rows = {r[1].strip(): r for r in table[2:]}  # after the header and its rule
    assert [r for r in rows if not r.startswith("server memory")] == [
        "grade, one file alone, wall", "grade, one file alone, core-seconds", "warm-up, the server's first file",
        "idle, one at a time", "idle, core-seconds a file", "burst, 2 students", "last verdict of the burst",
        "each student's first verdict (burst)", "complete, speed tier timed (burst)", "burst, busy core-seconds"], \
        done.stdout
    counts = {name: int(r[2]) for name, r in rows.items()}
    assert counts["grade, one file alone, wall"] == 1 and counts["idle, one at a time"] == 2, done.stdout
    assert counts["burst, 2 students"] == 4 and counts["each student's first verdict (burst)"] == 2, done.stdout
    assert all(float(r[3]) > 0 for r in rows.values()), done.stdout
    assert float(rows["server memory after warm-up"][3]) > 0 and "server memory after the burst" in rows, done.stdout
    for words in ("idle p50 / grade's latency: ", "last verdict / floor: ", "floor by the server's own cost: ",
                  "each student's first verdict within 90 s: yes", "server memory: "):
        assert words in done.stdout, done.stdout
