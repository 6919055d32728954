"""Puzzle 2 with block pointers: right under triton 3.6, NotImplementedError under 3.9 (tests/test_toolchain.py)."""

import triton
import triton.language as tl


@triton.jit
def add_mask2_kernel(x_ptr, z_ptr, N0, B0: tl.constexpr):
    start = tl.program_id(0) * B0
    # a block of B0 elements of a vector of N0; boundary_check masks the part past its end
    x_block = tl.make_block_ptr(x_ptr, shape=(N0,), strides=(1,), offsets=(start,), block_shape=(B0,), order=(0,))
    z_block = tl.make_block_ptr(z_ptr, shape=(N0,), strides=(1,), offsets=(start,), block_shape=(B0,), order=(0,))
    x = tl.load(x_block, boundary_check=(0,), padding_option="zero")
    tl.store(z_block, x + 10.0, boundary_check=(0,))
