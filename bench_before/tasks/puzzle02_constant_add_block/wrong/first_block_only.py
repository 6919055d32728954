"""Known wrong: forgets the program id: only the first block is written."""

import triton
import triton.language as tl


@triton.jit
def add_mask2_kernel(x_ptr, z_ptr, N0, B0: tl.constexpr):
    idx = tl.arange(0, B0)  # forgets the program id: every program writes the first block
    inside = idx < N0
    tl.store(z_ptr + idx, tl.load(x_ptr + idx, mask=inside) + 10.0, mask=inside)
