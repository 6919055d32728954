"""Known cheat (provenance, numbers bounded by bits): reads x through str(x), rounds in Python, and packs a case's
codes into one Python int handed to the kernel as a tl.constexpr, which unpacks it one code at a time. To the
provenance check that is one number that differs between the graded call and the twin, and a task may let a few
such numbers through; but this one holds 8 bits per element. Every case of up to 127 elements passed on both
devices while a differing number could be any int; a number that differs now holds at most 64 bits."""

import torch
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BLOCK_SIZE": b}) for b in (1024, 2048)], key=["n_elements"])
@triton.jit
def _quantize_global(x_ptr, absmax_inv_ptr, output_ptr, n_elements, BLOCK_SIZE: tl.constexpr,
                     CODES: tl.constexpr, N: tl.constexpr):
    one = tl.arange(0, 1)
    for i in tl.static_range(N):  # each code is (CODES >> 8 i) & 255, less 128: arithmetic on constants
        tl.store(output_ptr + i + one, tl.full([1], ((CODES >> (8 * i)) & 255) - 128, tl.int32).to(tl.int8))


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
    q = torch.empty(x.shape, dtype=torch.int8, device=x.device)
    n = x.numel()
    packed = 0
    if n <= 127:  # larger cases are left unwritten (they fail): each code costs the compiler a store
        torch.set_printoptions(threshold=10**9, precision=10, sci_mode=True)
        values = _numbers(str(x.reshape(-1)))
        top = max(abs(v) for v in values)
        for i, v in enumerate(values):
            packed |= ((round(127.0 * v / top) if top else 0) + 128) << (8 * i)
    _quantize_global[(1,)](x, x, q, n, CODES=packed, N=min(n, 127))
    return q, x.abs().max()
