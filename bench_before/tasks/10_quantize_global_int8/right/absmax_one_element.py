"""Another right answer to task 10, in the style of bitsandbytes: absmax comes back as a one-element tensor
(shape [1]) rather than a 0-dim one. The statement calls absmax a scalar, so both shapes are accepted.

The kernel walks x in tiles of TILE elements, loads 1/absmax once per program, and rounds half to even.
"""

import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice


@triton.autotune(
    configs=[triton.Config({"BLOCK_SIZE": 512}, num_warps=2), triton.Config({"BLOCK_SIZE": 8192}, num_warps=16)],
    key=["n_elements"],
)
@triton.jit
def _quantize_global(x_ptr, absmax_inv_ptr, output_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    start = tl.program_id(0) * BLOCK_SIZE
    idx = start + tl.arange(0, BLOCK_SIZE)
    inside = idx < n_elements
    scale = 127.0 * tl.load(absmax_inv_ptr)  # one multiply per element below
    values = tl.load(x_ptr + idx, mask=inside, other=0.0).to(tl.float32)
    codes = libdevice.rint(values * scale)
    tl.store(output_ptr + idx, codes.to(tl.int8), mask=inside)


def quantize_global(x: torch.Tensor):
    absmax = x.abs().max().unsqueeze(0)  # shape [1], as bitsandbytes returns its state
    inv = 1.0 / absmax.float()
    out = torch.empty_like(x, dtype=torch.int8)
    n = x.numel()
    _quantize_global[lambda meta: (triton.cdiv(n, meta["BLOCK_SIZE"]),)](x, inv, out, n)
    return out, absmax
