"""Another right answer to task 10: the wrapper reads absmax into Python (`.item()`) and passes 127 / absmax to
the kernel as a number, not as a pointer to a tensor. That is one value of the input data handed to Python per
call, which task.yaml allows (`python_reads: 1`); reading more (a value per element) would not be.

Python computes 127 / absmax in float64 and Triton passes it to the kernel as float32: the same number as
torch's float32 `127.0 / absmax` for every absmax (one rounding of the exact quotient either way).
"""

import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice


@triton.autotune(
    configs=[triton.Config({"BLOCK_SIZE": 1024}, num_warps=4), triton.Config({"BLOCK_SIZE": 4096}, num_warps=8)],
    key=["n_elements"],
)
@triton.jit
def _quantize_global(x_ptr, absmax_inv_ptr, output_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    # absmax_inv_ptr holds a number here (127 / absmax), not an address: the name is the task's.
    idx = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    inside = idx < n_elements
    values = tl.load(x_ptr + idx, mask=inside, other=0.0).to(tl.float32)
    codes = libdevice.rint(values * absmax_inv_ptr)
    tl.store(output_ptr + idx, codes.to(tl.int8), mask=inside)


def quantize_global(x: torch.Tensor):
    absmax = x.abs().max()
    scale = 127.0 / absmax.item()  # the one value of the input data read into Python
    out = torch.empty_like(x, dtype=torch.int8)
    n = x.numel()
    _quantize_global[lambda meta: (triton.cdiv(n, meta["BLOCK_SIZE"]),)](x, scale, out, n)
    return out, absmax
