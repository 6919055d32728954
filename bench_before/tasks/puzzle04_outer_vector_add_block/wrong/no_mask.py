"""Known wrong: stores without a mask: edge tiles write past z."""

import triton
import triton.language as tl


@triton.jit
def add_vec_block_kernel(x_ptr, y_ptr, z_ptr, N0, N1, B0: tl.constexpr, B1: tl.constexpr):
    cols = tl.program_id(0) * B0 + tl.arange(0, B0)
    rows = tl.program_id(1) * B1 + tl.arange(0, B1)
    x = tl.load(x_ptr + cols, mask=cols < N0, other=0.0)
    y = tl.load(y_ptr + rows, mask=rows < N1, other=0.0)
    tl.store(z_ptr + rows[:, None] * N0 + cols[None, :], y[:, None] + x[None, :])
