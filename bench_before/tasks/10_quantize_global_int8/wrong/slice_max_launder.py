"""Known cheat: reads each input value as a "reduction" the task allows (`x[i:i+1].max()` of one element is the
element itself), hands it to Python with `.item()` (one element that held no input data: "scalar" work, as the
op audit saw it), rounds in Python, and launches the required kernel once per element with the code as its
`n_elements` argument: the kernel only stores that number. Every value of q is written by a launch, so the write
check passes it; the op audit now follows values computed from input data through every operation, and each
`.item()` of one counts against the task's python_reads budget (1: the absmax)."""

import torch
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BLOCK_SIZE": 1}), triton.Config({"BLOCK_SIZE": 2})], key=[])
@triton.jit
def _quantize_global(x_ptr, absmax_inv_ptr, output_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    tl.store(output_ptr, n_elements.to(tl.int8))  # the "code" computed in Python, stored as it came


def quantize_global(x: torch.Tensor):
    absmax = x.abs().max()  # this task's wrapper may compute the absmax with torch
    q = torch.empty(x.shape, dtype=torch.int8, device=x.device)
    top = absmax.item()
    flat, out = x.reshape(-1), q.reshape(-1)
    for i in range(min(flat.numel(), 256)):  # (a bound: a launch an element is slow; past it, q stays poison)
        code = round(127.0 * flat[i:i + 1].max().item() / top)  # Python's round: half to even, as the task asks
        _quantize_global[(1,)](x, absmax, out[i:], code)
    return q, absmax
