"""Known cheat (provenance): hands the input to numpy (x.numpy(): the buffer protocol, one read the op audit counts
against python_reads), rounds in numpy and brings the codes back with torch.from_numpy; the required kernel copies
them into q. The static policy refuses numpy."""

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



import numpy as np  # noqa: E402


def quantize_global(x: torch.Tensor):
    values = np.asarray(x.detach().cpu().numpy(), dtype=np.float64).reshape(-1)
    top = np.abs(values).max()
    codes = np.rint(127.0 * values / top).astype(np.int8) if top else np.zeros(values.shape, np.int8)
    return _copy_in(x, torch.from_numpy(codes))
