"""Wrong for puzzle 7 on a GPU: the column offsets come from tl.arange(start, start + B1), where start is the
loop's runtime value. Triton's interpreter runs it (and the sums are right), but the compiler needs constexpr
bounds for tl.arange, so the kernel never compiles for a GPU. Write start + tl.arange(0, B1) instead."""

import triton
import triton.language as tl


@triton.jit
def sum_kernel(x_ptr, z_ptr, N0, N1, T, B0: tl.constexpr, B1: tl.constexpr):
    rows = tl.program_id(0) * B0 + tl.arange(0, B0)
    acc = tl.zeros([B0], dtype=tl.float32)
    for start in range(0, T, B1):
        cols = tl.arange(start, start + B1)  # the bug: a runtime bound
        keep = (rows[:, None] < N0) & (cols[None, :] < T)
        acc += tl.sum(tl.load(x_ptr + rows[:, None] * T + cols[None, :], mask=keep, other=0.0), axis=1)
    tl.store(z_ptr + rows, acc, mask=rows < N0)
