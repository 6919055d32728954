"""Known-wrong: no tail mask on the load or the store."""

import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice


@triton.autotune(
    configs=[
        # 1-D streaming kernel: the block size only sets how many elements one program handles.
        triton.Config({"BLOCK_SIZE": 1024}, num_warps=4),
        triton.Config({"BLOCK_SIZE": 2048}, num_warps=8),
    ],
    key=["n_elements"],
)
@triton.jit
def _quantize_global(
    x_ptr,            # *fp16 | *fp32, the input, contiguous
    absmax_inv_ptr,   # *fp32, one element: 1 / max(|x|)
    output_ptr,       # *int8, the codes, same length as x
    n_elements,       # number of elements of x
    BLOCK_SIZE: tl.constexpr,
):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    x = tl.load(x_ptr + offsets).to(tl.float32)
    absmax_inv = tl.load(absmax_inv_ptr)
    # rint rounds half to even, like torch.round.
    q = libdevice.rint(127.0 * x * absmax_inv)
    tl.store(output_ptr + offsets, q.to(tl.int8))


def quantize_global(x: torch.Tensor):
    """Return (Q, absmax): Q = round(127 * x / max|x|) as int8 with x's shape, absmax a 0-dim tensor of x's dtype."""
    assert x.dtype in (torch.float16, torch.float32), f"x must be float16 or float32, got {x.dtype}"
    assert x.is_contiguous(), "x must be contiguous"
    absmax = x.abs().max()
    absmax_inv = (1.0 / absmax.float()).reshape(1)
    output = torch.empty(x.shape, dtype=torch.int8, device=x.device)
    n_elements = x.numel()
    grid = lambda meta: (triton.cdiv(n_elements, meta["BLOCK_SIZE"]),)  # noqa: E731
    _quantize_global[grid](x, absmax_inv, output, n_elements)
    return output, absmax
