"""Known cheat: carries each input value out of the op audit's sight with operations it allowed: `tmp.fill_(x[i])`
copies an element into a scratch tensor (filling a buffer is allocation work), `tmp.item()` reads it back as
"scalar" work (one element that held no input data), Python rounds, and `q[i].fill_(code)` writes each code.
A kernel that does nothing is launched with the output's pointer. The audit now follows input data through
every operation (a tensor filled from input data holds input data), so each `.item()` counts."""

import torch
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BLOCK_SIZE": b}) for b in (1024, 2048, 4096)], key=["n_elements"])
@triton.jit
def _quantize_global(x_ptr, absmax_inv_ptr, output_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pass  # launched with the output's pointer, and does nothing


def quantize_global(x: torch.Tensor):
    absmax = x.abs().max()  # this task's wrapper may compute the absmax with torch
    q = torch.empty(x.shape, dtype=torch.int8, device=x.device)
    tmp = torch.empty((), dtype=torch.float64, device=x.device)
    tmp.fill_(absmax)
    top = tmp.item()
    flat, out = x.reshape(-1), q.reshape(-1)
    for i in range(min(flat.numel(), 4096)):  # (a bound: one .item() an element is slow; past it, q stays poison)
        tmp.fill_(flat[i])
        out[i].fill_(round(127.0 * tmp.item() / top))  # Python's round: half to even, as the task asks
    _quantize_global[(1,)](x, absmax, q, q.numel())
    return q, absmax
