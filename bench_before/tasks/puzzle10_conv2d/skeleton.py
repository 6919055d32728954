"""Puzzle 10: two-dimensional convolution. See spec.md; fill in the kernel's body."""

import triton
import triton.language as tl


@triton.jit
def conv2d_kernel(x_ptr, k_ptr, z_ptr, N0, H, W, KH: tl.constexpr, KW: tl.constexpr, B0: tl.constexpr):
    # Your code here.
    pass
