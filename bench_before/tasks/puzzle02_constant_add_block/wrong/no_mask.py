"""Known wrong: no masks: the last block reads and writes past the end of x and z."""

import triton
import triton.language as tl


@triton.jit
def add_mask2_kernel(x_ptr, z_ptr, N0, B0: tl.constexpr):
    idx = tl.program_id(0) * B0 + tl.arange(0, B0)
    tl.store(z_ptr + idx, tl.load(x_ptr + idx) + 10.0)
