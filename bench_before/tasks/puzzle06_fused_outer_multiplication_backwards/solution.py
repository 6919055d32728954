"""Puzzle 6: fused outer multiplication, backwards: a reference solution."""

import triton
import triton.language as tl


@triton.jit
def mul_relu_block_back_kernel(x_ptr, y_ptr, dz_ptr, dx_ptr, N0, N1, B0: tl.constexpr, B1: tl.constexpr):
    cols = tl.program_id(0) * B0 + tl.arange(0, B0)
    rows = tl.program_id(1) * B1 + tl.arange(0, B1)
    tile = (rows[:, None] < N1) & (cols[None, :] < N0)
    at = rows[:, None] * N0 + cols[None, :]
    x = tl.load(x_ptr + at, mask=tile, other=0.0)
    y = tl.load(y_ptr + rows, mask=rows < N1, other=0.0)
    dz = tl.load(dz_ptr + at, mask=tile, other=0.0)
    # d relu(x * y) / dx = y where x * y > 0, else 0
    grad = tl.where(x * y[:, None] > 0, y[:, None] * dz, 0.0)
    tl.store(dx_ptr + at, grad, mask=tile)
