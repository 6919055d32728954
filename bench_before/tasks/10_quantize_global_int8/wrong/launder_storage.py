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


def _copy_in(x, codes):
    """Has the required kernel copy `codes` (int8, on any device) into q."""
    q = torch.empty(x.shape, dtype=torch.int8, device=x.device)
    codes = codes.to(x.device)
    n = x.numel()
    _quantize_global[lambda m: (triton.cdiv(n, m["BLOCK_SIZE"]),)](x, codes, q, n)
    return q, x.abs().max()


def _codes(values):
    top = max(abs(v) for v in values)
    return [round(127.0 * v / top) if top else 0 for v in values]


def quantize_global(x: torch.Tensor):
    raw = bytes(x.detach().cpu().clone().untyped_storage())
    y = torch.frombuffer(bytearray(raw), dtype=x.dtype)[:x.numel()].double()
    top = y.abs().max()
    codes = torch.round(127.0 * y / top) if top else torch.zeros_like(y)
    return _copy_in(x, codes.to(torch.int8))
