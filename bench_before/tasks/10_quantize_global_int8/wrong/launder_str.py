"""Known cheat (provenance): reads every input value into Python through str(x), which torch prints with the op
audit's modes switched off, rounds in Python, and has the required kernel copy the codes (made with torch.tensor)
into q. Nothing of it is an operation on input data that the op audit sees, and q is written by a launch."""

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



def _numbers(text):
    """The numbers torch printed, up to the closing bracket (no string methods: character by character)."""
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
    text = str(x.reshape(-1))
    values = _numbers(text)
    return _copy_in(x, torch.tensor(_codes(values), dtype=torch.int8))
