"""Puzzle 7: long sum: a reference solution."""

import triton
import triton.language as tl


@triton.jit
def sum_kernel(x_ptr, z_ptr, N0, N1, T, B0: tl.constexpr, B1: tl.constexpr):
    rows = tl.program_id(0) * B0 + tl.arange(0, B0)
    acc = tl.zeros([B0], dtype=tl.float32)
    for start in range(0, T, B1):
        cols = start + tl.arange(0, B1)
        keep = (rows[:, None] < N0) & (cols[None, :] < T)
        chunk = tl.load(x_ptr + rows[:, None] * T + cols[None, :], mask=keep, other=0.0)
        acc += tl.sum(chunk, axis=1)
    tl.store(z_ptr + rows, acc, mask=rows < N0)
