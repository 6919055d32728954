"""Right for puzzle 7, written with a tensor method: `x.sum(1)` instead of `tl.sum(x, 1)`.

Triton defines the reductions as methods of its tensors too; one public solution (zzhbrr/Triton-Puzzles-Lite,
puzzles.py, graded 2026-11-25) writes them so. The grader's GPU compile check once ran the interpreter's version
of such a method inside the compiler and failed every case of a right kernel ("'value' object has no attribute
'data'"): this file keeps that from coming back.
"""

import triton
import triton.language as tl


@triton.jit
def sum_kernel(x_ptr, z_ptr, N0, N1, T, B0: tl.constexpr, B1: tl.constexpr):
    rows = tl.program_id(0) * B0 + tl.arange(0, B0)
    total = tl.zeros([B0], dtype=tl.float32)
    for start in range(0, T, B1):
        cols = start + tl.arange(0, B1)
        inside = (rows[:, None] < N0) & (cols[None, :] < T)
        block = tl.load(x_ptr + rows[:, None] * T + cols[None, :], mask=inside, other=0.0)
        total += block.sum(1)  # the method form of tl.sum(block, 1)
    tl.store(z_ptr + rows, total, mask=rows < N0)
