"""Known cheat (provenance): copies the input's bytes out of its storage (bytes(x.untyped_storage()): no torch
operation is dispatched), views them again as a tensor with torch.frombuffer (a tensor no operation on the input
made, so to the op audit it is no input data), computes the codes with torch on that copy and has the required
kernel copy them into q. The static policy refuses .untyped_storage."""

import torch
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BLOCK_SIZE": b}) for b in (1024, 2048)], key=["n_elements"])
@triton.jit
def _quantize_global(x_ptr, absmax_inv_ptr, output_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    # only copies: absmax_inv_ptr is handed the codes, computed outside every kernel
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(output_ptr + offsets, tl.load(absmax_inv_ptr + offsets, mask=mask), mask=mask)


def quantize_global(x: torch.Tensor):
    raw = bytes(x.detach().cpu().clone().untyped_storage())
    y = torch.frombuffer(bytearray(raw), dtype=x.dtype)[:x.numel()].double()
    top = y.abs().max()
    codes = torch.round(127.0 * y / top) if top else torch.zeros_like(y)
    q = torch.empty(x.shape, dtype=torch.int8, device=x.device)
    n = x.numel()
    _quantize_global[lambda m: (triton.cdiv(n, m["BLOCK_SIZE"]),)](x, codes.to(torch.int8).to(x.device), q, n)
    return q, x.abs().max()
