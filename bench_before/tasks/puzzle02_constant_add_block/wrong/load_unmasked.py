"""Wrong for puzzle 2: the store is masked, the load is not. Every value written is right, since the lanes past
the end of x are never stored, but the last block still reads past the end of x: on a GPU that is memory the
tensor does not own (it may not even be mapped). On the interpreter the grader checks every address a kernel
touches and reports the read; mask the load with the same condition as the store."""

import triton
import triton.language as tl


@triton.jit
def add_mask2_kernel(x_ptr, z_ptr, N0, B0: tl.constexpr):
    idx = tl.program_id(0) * B0 + tl.arange(0, B0)
    x = tl.load(x_ptr + idx)  # the bug: no mask, so the last block reads past the end of x
    tl.store(z_ptr + idx, x + 10.0, mask=idx < N0)
