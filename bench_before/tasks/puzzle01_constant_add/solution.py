"""Puzzle 1: constant add: a reference solution."""

import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, z_ptr, N0, B0: tl.constexpr):
    # B0 == N0: one program holds the whole vector.
    idx = tl.arange(0, B0)
    tl.store(z_ptr + idx, tl.load(x_ptr + idx) + 10.0)
