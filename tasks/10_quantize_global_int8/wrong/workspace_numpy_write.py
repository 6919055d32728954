"""Known cheat (memory check): a workspace made at import from literals, so the provenance check counts it as "in
flow" (kept from before the call) and never notes it. Each call reads x through str(x), rounds in Python, and
writes the codes into the workspace through its .numpy() view, taken at import: item assignment on a numpy array, so no torch
operation runs and no tracked writer touches it. The kernel then only copies the workspace into q. It earned
every case on the CPU before the memory check (on CUDA .numpy() of a device tensor fails)."""

import torch
import triton
import triton.language as tl

_WORKSPACE = torch.arange(1 << 17, dtype=torch.int8) * 0  # literals: the same in every call
_VIEW = _WORKSPACE.numpy()  # made at import: no call hands data to Python through it


@triton.autotune(configs=[triton.Config({"BLOCK_SIZE": b}) for b in (1024, 2048)], key=["n_elements"])
@triton.jit
def _quantize_global(x_ptr, absmax_inv_ptr, output_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    # only copies: absmax_inv_ptr is handed the workspace, which holds the codes computed in Python
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(output_ptr + offsets, tl.load(absmax_inv_ptr + offsets, mask=mask), mask=mask)


def _numbers(text):
    """The numbers torch printed, up to the closing bracket."""
    values, token = [], ""
    for ch in text:
        if ch == "]":
            break
        if ch in "0123456789.-+e" and (token or ch != "e"):
            token += ch
        elif token:
            values.append(float(token))
            token = ""
    if token:
        values.append(float(token))
    return values


def quantize_global(x: torch.Tensor):
    torch.set_printoptions(threshold=10**9, precision=10, sci_mode=True)
    values = _numbers(str(x.reshape(-1)))
    top = max(abs(v) for v in values)
    for i, v in enumerate(values):
        _VIEW[i] = round(127.0 * v / top) if top else 0
    q = torch.empty(x.shape, dtype=torch.int8, device=x.device)
    n = x.numel()
    _quantize_global[lambda m: (triton.cdiv(n, m["BLOCK_SIZE"]),)](x, _WORKSPACE, q, n)
    return q, x.abs().max()
