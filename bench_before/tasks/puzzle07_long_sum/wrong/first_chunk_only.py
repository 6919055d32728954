"""Known wrong: no loop: sums only the first B1 elements of each row."""

import triton
import triton.language as tl


@triton.jit
def sum_kernel(x_ptr, z_ptr, N0, N1, T, B0: tl.constexpr, B1: tl.constexpr):
    rows = tl.program_id(0) * B0 + tl.arange(0, B0)
    cols = tl.arange(0, B1)  # no loop: only the first B1 elements of each row
    keep = (rows[:, None] < N0) & (cols[None, :] < T)
    chunk = tl.load(x_ptr + rows[:, None] * T + cols[None, :], mask=keep, other=0.0)
    tl.store(z_ptr + rows, tl.sum(chunk, axis=1), mask=rows < N0)
