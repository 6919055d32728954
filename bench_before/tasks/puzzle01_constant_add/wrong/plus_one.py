"""Known wrong: adds 1 instead of 10."""

import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, z_ptr, N0, B0: tl.constexpr):
    idx = tl.arange(0, B0)
    tl.store(z_ptr + idx, tl.load(x_ptr + idx) + 1.0)
