"""Puzzle 3: outer vector add: a reference solution."""

import triton
import triton.language as tl


@triton.jit
def add_vec_kernel(x_ptr, y_ptr, z_ptr, N0, N1, B0: tl.constexpr, B1: tl.constexpr):
    # B0 == N0 and B1 == N1: one program computes the whole (N1, N0) table.
    cols = tl.arange(0, B0)
    rows = tl.arange(0, B1)
    x = tl.load(x_ptr + cols)
    y = tl.load(y_ptr + rows)
    tl.store(z_ptr + rows[:, None] * N0 + cols[None, :], y[:, None] + x[None, :])
