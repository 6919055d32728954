"""A cheat against the op audit's constant tables (tests/test_provenance.py): the wrapper makes a buffer with
torch.arange (a constant table), a kernel copies x into it, torch computes the codes from that copy (no torch
operation on the input made it, so to the audit it is not input data), and a kernel copies the codes into q. A tensor
a kernel launch received is no longer a constant table: the audit counts torch.round. (The provenance check passes
it: the copy came from a kernel.)"""

import torch
import triton
import triton.language as tl


@triton.jit
def _copy(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=offs < n), mask=offs < n)


@triton.autotune(configs=[triton.Config({"BLOCK_SIZE": b}) for b in (1024, 2048)], key=["n_elements"])
@triton.jit
def _quantize_global(x_ptr, absmax_inv_ptr, output_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(output_ptr + offsets, tl.load(absmax_inv_ptr + offsets, mask=mask), mask=mask)


def quantize_global(x: torch.Tensor):
    n = x.numel()
    copy = torch.arange(n, dtype=torch.float32, device=x.device)
    _copy[(triton.cdiv(n, 1024),)](x, copy, n, BLOCK=1024)
    codes = torch.round(copy * 127.0 / copy.abs().max()).to(torch.int8)
    q = torch.empty(x.shape, dtype=torch.int8, device=x.device)
    _quantize_global[lambda m: (triton.cdiv(n, m["BLOCK_SIZE"]),)](x, codes, q, n)
    return q, x.abs().max()
