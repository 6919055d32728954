"""Known-cheat (found in an audit): the codes are torch's work, done through Triton's host-side language objects.
`tl.constexpr(t)` wraps a tensor, and its operators (in triton/language/core.py) apply torch's to what it holds,
so the op audit once saw every product and sum asked for by Triton's file, not this one, and the file earned
full marks. The audit now passes over triton.language's frames as it does over torch's: it fails every case."""

import torch
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BLOCK_SIZE": 512}), triton.Config({"BLOCK_SIZE": 4096}, num_warps=8)],
                 key=["n_elements"])
@triton.jit
def _quantize_global(x_ptr, absmax_inv_ptr, output_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    idx = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    keep = idx < n_elements
    tl.store(output_ptr + idx, tl.load(x_ptr + idx, mask=keep), mask=keep)  # a copy of what it is handed


def quantize_global(x: torch.Tensor):
    absmax = x.abs().max()
    shift = 12582912.0  # 1.5 * 2^23: adding and taking it away rounds to the nearest even integer in float32
    boxed = (tl.constexpr(x.float()) * 127.0 / absmax.float() + shift) - shift  # CHEAT: torch, behind tl.constexpr
    codes = boxed.value.to(torch.int8)
    q = torch.empty(x.shape, dtype=torch.int8, device=x.device)
    n = x.numel()
    _quantize_global[lambda meta: (triton.cdiv(n, meta["BLOCK_SIZE"]),)](codes, absmax, q, n)
    return q, absmax
