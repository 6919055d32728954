"""The benchmark scripts still run: scripts/bench_puzzles.py on the CPU interpreter (--smoke), which also checks each
reference kernel's output against eager torch."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

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
