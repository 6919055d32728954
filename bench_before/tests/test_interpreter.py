"""Triton's interpreter as the grader patches it (grader/worker/interpreter.py), in a subprocess: TRITON_INTERPRET is
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
from grader.worker.interpreter import patch_interpreter_nested_calls

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


MINMAX = r'''
import torch, triton, triton.language as tl
from grader.worker.interpreter import patch_interpreter_minmax
patch_interpreter_minmax()

@triton.jit
def minmax_kernel(a_ptr, b_ptr, hi_ptr, lo_ptr, n, B: tl.constexpr):
    r = tl.arange(0, max(B, 4))  # constants: Python's max
    a = tl.load(a_ptr + r, mask=r < n)
    b = tl.load(b_ptr + r, mask=r < n)
    tl.store(hi_ptr + r, max(a, b), mask=r < n)  # tensors: elementwise, as on a GPU
    tl.store(lo_ptr + r, min(a, b, 0.5), mask=r < n)

a = torch.tensor([1.0, 5.0, 1.0, 5.0, 0.0, 0.0, 0.0, 0.0])
b = torch.tensor([5.0, 1.0, 5.0, 1.0, 0.0, 0.0, 0.0, 0.0])
hi, lo = torch.zeros(8), torch.zeros(8)
minmax_kernel[(1,)](a, b, hi, lo, 4, B=8)
assert hi[:4].tolist() == [5.0, 5.0, 5.0, 5.0], hi
assert lo[:4].tolist() == [0.5, 0.5, 0.5, 0.5], lo
print("ok")
'''

SHADOWED = r'''
import torch, triton, triton.language as tl
from grader.worker.interpreter import patch_interpreter_minmax
patch_interpreter_minmax()

@triton.jit
def shadowed_kernel(a_ptr, b_ptr, out_ptr, B: tl.constexpr):
    r = tl.arange(0, B)
    tl.store(out_ptr + r, max(tl.load(a_ptr + r), tl.load(b_ptr + r)))

def max(*args):  # a module-level max is the name the kernel sees (the code generator looks in globals first)
    return args[0]

a, b, out = torch.tensor([1.0, 5.0]), torch.tensor([5.0, 1.0]), torch.zeros(2)
shadowed_kernel[(1,)](a, b, out, B=2)
assert torch.equal(out, a), out
print("ok")
'''


def test_python_min_and_max_of_tensors_in_a_kernel_are_elementwise_as_on_a_gpu(tmp_path):
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=str(ROOT))
    for name, script in (("minmax.py", MINMAX), ("shadowed.py", SHADOWED)):
        (tmp_path / name).write_text(script)  # from a file: the interpreter rewrites only kernels with a source
        done = subprocess.run([sys.executable, str(tmp_path / name)], cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=300)
        assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-3000:]


_TUPLES = """
import sys, torch, triton, triton.language as tl
from triton.language import core
from grader.worker.interpreter import patch_interpreter_tuple_types

def types(values):
    t = core.tuple(values)
    fields = t.type.fields
    return str(t.type), None if fields is None else list(fields)

x = core.tensor(None, core.block_type(tl.float32, [4, 8]))
cases = [[1, 2], [x, 3, tl.float16], [core.tuple([5, x]), x]]
eager = [types(v) for v in cases]
named = core.tuple([x, 1], core.tuple_type([x.type, core.constexpr_type(1)], ["a", "b"]))
assert patch_interpreter_tuple_types()
assert "type" not in vars(core.tuple([1, 2]))  # not made until read
assert [types(v) for v in cases] == eager
again = core.tuple([x, 1], core.tuple_type([x.type, core.constexpr_type(1)], ["a", "b"]))
assert again.b == named.b == 1 and str(again.type) == str(named.type)
t = core.tuple([1, 2])
t._setitem(0, x)  # the one way a tuple's values change: its type is made again
assert str(t.type) == types([x, 2])[0]

@triton.jit
def k(x_ptr, y_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)[:, None] * N + tl.arange(0, N)[None, :]
    tl.store(y_ptr + offs, tl.sum(tl.load(x_ptr + offs), axis=1)[:, None] + 0 * offs)

a = torch.arange(16.0).reshape(4, 4); out = torch.empty_like(a)
k[(1,)](a, out, N=4)
assert torch.equal(out, a.sum(1, keepdim=True).expand(4, 4))
assert patch_interpreter_tuple_types(lazy=False) and "type" in vars(core.tuple([1, 2]))
print("ok")
"""


def test_a_tuples_type_is_made_when_first_read_and_is_the_same():
    """grader/worker/interpreter.py `patch_interpreter_tuple_types`: the types it makes when first read are the
    ones Triton makes at once (plain, nested, named, after `_setitem`), a kernel interprets as before, and the
    patch comes off."""
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    out = subprocess.run([sys.executable, "-c", _TUPLES], capture_output=True, text=True, timeout=300, env=env,
                         cwd=Path(__file__).parents[1])
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-3000:]


_DOTS = """
import numpy as np
from triton.runtime import interpreter
import triton.language as tl
from grader.worker.interpreter import patch_interpreter_integer_dots

builder = interpreter.interpreter_builder
H = interpreter.TensorHandle
rng = np.random.default_rng(0)

def dot(x, y, acc, xt, yt):
    return builder.create_dot(H(x, xt), H(y, yt), H(acc, tl.int32), None, None).data

cases = []
shapes = [(16, 64, 32, "ii"), (1, 1, 1, "ii"), (64, 32767, 3, "uu"), (5, 200, 7, "ui"), (3, 40000, 2, "ii")]
for m, k, n, kinds in shapes:
    x = (rng.integers(0, 256, (m, k)) if kinds[0] == "u" else rng.integers(-128, 128, (m, k))).astype(
        np.uint8 if kinds[0] == "u" else np.int8)
    y = (rng.integers(0, 256, (k, n)) if kinds[1] == "u" else rng.integers(-128, 128, (k, n))).astype(
        np.uint8 if kinds[1] == "u" else np.int8)
    acc = rng.integers(-2**31, 2**31, (m, n)).astype(np.int32)  # wraps around when added, both ways
    cases.append((x, y, acc, tl.uint8 if kinds[0] == "u" else tl.int8, tl.uint8 if kinds[1] == "u" else tl.int8))
stock = [dot(*c) for c in cases]
assert patch_interpreter_integer_dots()
calls = []
original = np.matmul
np.matmul = lambda a, b, **kw: calls.append(a.dtype) or original(a, b, **kw)
fast = [dot(*c) for c in cases]
np.matmul = original
assert all(s.dtype == f.dtype == np.int32 and np.array_equal(s, f) for s, f in zip(stock, fast))
assert calls == [np.float64] * 4 + [np.int8], calls  # K = 40000 goes the interpreter's own way
assert patch_interpreter_integer_dots(fast=False)
print("ok")
"""


def test_integer_dots_in_float64_give_the_interpreters_bits():
    """grader/worker/interpreter.py `patch_interpreter_integer_dots`: 8-bit integer dots through float64 BLAS
    give the interpreter's int32 results bit for bit (signed, unsigned, mixed, K up to 32767, an accumulator that
    wraps), and a longer K goes the interpreter's own way."""
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    out = subprocess.run([sys.executable, "-c", _DOTS], capture_output=True, text=True, timeout=300, env=env,
                         cwd=Path(__file__).parents[1])
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-3000:]
