"""Triton's interpreter as the grader patches it (grader/interpreter.py), in a subprocess: TRITON_INTERPRET is
read when a kernel is decorated."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

NESTED = r'''
import torch, triton, triton.language as tl
from triton.runtime import interpreter
from grader.interpreter import patch_interpreter_nested_calls

@triton.jit
def _scaled(x, s):
    return x * s

@triton.jit
def rowmax_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n + cols, mask=cols < n, other=-float("inf"))
    tl.store(out_ptr + row, _scaled(tl.max(x, axis=0), 2.0) + tl.sum(tl.where(cols < n, x, 0.0), axis=0))

calls = []
real = interpreter._patch_lang
def counted(fn, *a, **k):
    calls.append(fn.__name__)
    return real(fn, *a, **k)
interpreter._patch_lang = counted

def launch():
    torch.manual_seed(0)
    x = torch.randn(64, 50)
    out = torch.empty(64)
    rowmax_kernel[(64,)](x, out, 50, BLOCK=64)
    assert torch.allclose(out, 2 * x.max(1).values + x.sum(1), atol=1e-5), "wrong values"
    return out

before = launch()
stock = len(calls)
patch_interpreter_nested_calls()
patch_interpreter_nested_calls()  # idempotent
calls.clear()
after = launch()
again = launch()
assert torch.equal(before, after) and torch.equal(after, again)
print(stock, len(calls))
'''


def test_the_language_is_patched_once_per_launch_not_per_nested_call():
    env = dict(os.environ, TRITON_INTERPRET="1")
    done = subprocess.run([sys.executable, "-c", NESTED], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    stock, patched = map(int, done.stdout.split()[-2:])
    # Stock: the launch once, and each of 64 programs' nested calls (tl.max, tl.sum, _scaled, and what they call)
    # again; patched: per launch, the launch and the first call of each distinct set of language modules.
    assert stock >= 64 * 3
    assert patched <= 2 * 4, (stock, patched)
