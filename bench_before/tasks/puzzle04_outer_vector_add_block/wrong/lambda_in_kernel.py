"""Wrong for puzzle 4 on a GPU: a lambda inside the kernel. Triton's interpreter runs the kernel as Python, so
the answer is right there, but Triton's compiler does not accept a lambda (UnsupportedLanguageConstruct): on a
GPU the kernel never runs. Use a @triton.jit helper function, or write the expression inline."""

import triton
import triton.language as tl


@triton.jit
def add_vec_block_kernel(x_ptr, y_ptr, z_ptr, N0, N1, B0: tl.constexpr, B1: tl.constexpr):
    cols = tl.program_id(0) * B0 + tl.arange(0, B0)
    rows = tl.program_id(1) * B1 + tl.arange(0, B1)
    outer = lambda a, b: a[:, None] + b[None, :]  # noqa: E731 - the bug: no lambdas in a Triton kernel
    x = tl.load(x_ptr + cols, mask=cols < N0, other=0.0)
    y = tl.load(y_ptr + rows, mask=rows < N1, other=0.0)
    tile = (rows[:, None] < N1) & (cols[None, :] < N0)
    tl.store(z_ptr + rows[:, None] * N0 + cols[None, :], outer(y, x), mask=tile)
