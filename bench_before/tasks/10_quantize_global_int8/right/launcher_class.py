"""Right for task 10, in another style: a launcher class (`__init__`, `__call__`), helper functions for the
configs and the input checks, and the absmax taken with torch (this task's wrapper may). The static policy's
allowlists (grader/gates/static.py) must not refuse honest code written this way."""

import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice


def _configs():
    """Three tile sizes, a warp count each: the autotuner picks per input size."""
    return [triton.Config({"BLOCK_SIZE": size}, num_warps=warps) for size, warps in ((1024, 4), (2048, 4),
                                                                                      (4096, 8))]


@triton.autotune(configs=_configs(), key=["n_elements"])
@triton.jit
def _quantize_global(x_ptr, absmax_inv_ptr, output_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    start = tl.program_id(0) * BLOCK_SIZE
    offsets = start + tl.arange(0, BLOCK_SIZE)
    inside = offsets < n_elements
    values = tl.load(x_ptr + offsets, mask=inside, other=0.0).to(tl.float32)
    inverse = tl.load(absmax_inv_ptr)
    codes = libdevice.rint(127.0 * values * inverse)  # half to even, like torch.round
    tl.store(output_ptr + offsets, codes.to(tl.int8), mask=inside)


def _check(x: torch.Tensor) -> None:
    assert x.dtype in (torch.float16, torch.float32), f"x must be float16 or float32, got {x.dtype}"
    assert x.is_contiguous(), "x must be contiguous"


class _Quantizer:
    """Holds the kernel; called like the function it stands for."""

    def __init__(self, kernel):
        self.kernel = kernel

    def __call__(self, x: torch.Tensor):
        n = x.numel()
        codes = torch.empty(x.shape, dtype=torch.int8, device=x.device)
        absmax = x.abs().max()
        inverse = (1.0 / absmax.float()).reshape(1)
        self.kernel[lambda meta: (triton.cdiv(n, meta["BLOCK_SIZE"]),)](x, inverse, codes, n)
        return codes, absmax


_quantize = _Quantizer(_quantize_global)


def quantize_global(x: torch.Tensor):
    _check(x)
    return _quantize(x)
