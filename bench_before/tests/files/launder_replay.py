"""A cheat against the provenance check itself (tests/test_provenance.py): it reads the input through str() as
wrong/launder_str.py does, but keeps what it handed the kernel the first time it saw a shape, and when the same
shape comes back with other values (the twin), hands the kernel those same bytes again, so that the two recorded
calls match. The twin's outputs are then those of the first call: the judge checks them against the oracle's answer
for the twin's values."""

import torch
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BLOCK_SIZE": b}) for b in (1024, 2048)], key=["n_elements"])
@triton.jit
def _quantize_global(x_ptr, absmax_inv_ptr, output_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(output_ptr + offsets, tl.load(absmax_inv_ptr + offsets, mask=mask), mask=mask)


def _numbers(text):
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


_SEEN: dict = {}  # shape -> the codes handed to the kernel the first time


def quantize_global(x: torch.Tensor):
    torch.set_printoptions(threshold=10**9, precision=10, sci_mode=True)
    key = tuple(x.shape)
    if key not in _SEEN:
        values = _numbers(str(x.reshape(-1)))
        top = max(abs(v) for v in values)
        _SEEN[key] = [round(127.0 * v / top) if top else 0 for v in values]
    codes = torch.tensor(_SEEN[key], dtype=torch.int8).to(x.device)
    q = torch.empty(x.shape, dtype=torch.int8, device=x.device)
    n = x.numel()
    _quantize_global[lambda m: (triton.cdiv(n, m["BLOCK_SIZE"]),)](x, codes, q, n)
    return q, x.abs().max()
