"""Wrong (126 instead of 127), prints a line, and makes torch warn during the call (copy-constructing a tensor from
a tensor): the student sees the line under the failing test, and the warning goes to the worker's log."""

import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice

_WORKSPACE = {"cpu": torch.zeros(1 << 16, dtype=torch.float32)}  # device type -> the staging buffer


@triton.autotune(configs=[triton.Config({"BLOCK_SIZE": b}) for b in (1024, 2048)], key=["n_elements"])
@triton.jit
def _quantize_global(x_ptr, absmax_inv_ptr, output_ptr, n_elements, BLOCK_SIZE: tl.constexpr, sizes):
    # sizes: (n_elements, 1), one tuple; x_ptr is the float32 workspace holding a copy of x
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < sizes[0] * sizes[1]
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    q = libdevice.rint(126.0 * x * tl.load(absmax_inv_ptr))
    tl.store(output_ptr + offsets, q.to(tl.int8), mask=mask)


def _staged(x: torch.Tensor) -> torch.Tensor:
    """x's elements as float32 in the kept workspace (a larger one replaces it when x does not fit)."""
    n = x.numel()
    ws = _WORKSPACE.get(x.device.type)
    if ws is None or ws.numel() < n:
        ws = _WORKSPACE[x.device.type] = torch.empty(max(n, 1 << 16), dtype=torch.float32, device=x.device)
    ws[:n].copy_(x.reshape(-1))
    return ws


def quantize_global(x: torch.Tensor):
    absmax = x.abs().max()
    print("hello from the student")
    torch.tensor(absmax)  # torch warns: copy-constructing from a tensor
    absmax_inv = 1.0 / absmax.float()
    q = torch.empty(x.shape, dtype=torch.int8, device=x.device)
    n = x.numel()
    _quantize_global[lambda m: (triton.cdiv(n, m["BLOCK_SIZE"]),)](_staged(x), absmax_inv, q, n, sizes=(n, 1))
    return q, absmax
