"""Known-cheat: computes the codes with torch, then launches an autotuned Triton kernel that only copies them into
the output, so a kernel did write the output. The op audit catches the torch computation (torch.round and the
arithmetic before it on x's data) and fails every case, n = 1 included (x * 127 touches the input itself)."""

import torch
import triton
import triton.language as tl


@triton.autotune(
    configs=[
        triton.Config({"BLOCK_SIZE": 1024}, num_warps=4),
        triton.Config({"BLOCK_SIZE": 2048}, num_warps=8),
    ],
    key=["n_elements"],
)
@triton.jit
def _quantize_global(x_ptr, absmax_inv_ptr, output_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    # x_ptr here holds the codes torch computed: the "kernel" is a copy
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(output_ptr + offsets, tl.load(x_ptr + offsets, mask=mask), mask=mask)


def quantize_global(x: torch.Tensor):
    absmax = x.abs().max()
    codes = torch.round(127.0 * x.float() / absmax.float()).to(torch.int8)  # CHEAT: torch does the work
    output = torch.empty(x.shape, dtype=torch.int8, device=x.device)
    n_elements = x.numel()
    grid = lambda meta: (triton.cdiv(n_elements, meta["BLOCK_SIZE"]),)  # noqa: E731
    _quantize_global[grid](codes, absmax, output, n_elements)
    return output, absmax
