"""Task 10 with a block pointer: right under triton 3.6 (the course's GPU box), and under triton 3.9, which
removed block pointers, every case fails with a message that names tl.make_block_ptr (tests/test_known_errors.py)."""

import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice


@triton.autotune(
    configs=[triton.Config({"BLOCK_SIZE": 1024}, num_warps=4), triton.Config({"BLOCK_SIZE": 2048}, num_warps=8)],
    key=["n_elements"],
)
@triton.jit
def _quantize_global(x_ptr, absmax_inv_ptr, output_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    start = tl.program_id(0) * BLOCK_SIZE
    # one block of the flat input and of the codes; boundary_check leaves out what lies past n_elements
    x_block = tl.make_block_ptr(x_ptr, shape=(n_elements,), strides=(1,), offsets=(start,),
                                block_shape=(BLOCK_SIZE,), order=(0,))
    q_block = tl.make_block_ptr(output_ptr, shape=(n_elements,), strides=(1,), offsets=(start,),
                                block_shape=(BLOCK_SIZE,), order=(0,))
    x = tl.load(x_block, boundary_check=(0,), padding_option="zero").to(tl.float32)
    codes = libdevice.rint(127.0 * x * tl.load(absmax_inv_ptr))
    tl.store(q_block, codes.to(tl.int8), boundary_check=(0,))


def quantize_global(x: torch.Tensor):
    absmax = x.abs().max()
    absmax_inv = (1.0 / absmax.float()).reshape(1)
    q = torch.empty_like(x, dtype=torch.int8)
    n = x.numel()
    _quantize_global[lambda meta: (triton.cdiv(n, meta["BLOCK_SIZE"]),)](x, absmax_inv, q, n)
    return q, absmax
