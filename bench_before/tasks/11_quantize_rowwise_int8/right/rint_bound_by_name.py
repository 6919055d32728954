"""Right, another way: the rounding function imported by name from libdevice (`from ... import rint`), as many
Triton codebases write it. Under the interpreter the grader patches libdevice's rounding functions; the GPU
compile check must hand this file's own global `rint` the real one back, or a correct kernel would be reported
as one that does not compile for a GPU (it did, before that fix)."""

import torch
import triton
import triton.language as tl
from triton.language.extra.libdevice import rint


@triton.autotune(
    configs=[triton.Config({}, num_warps=4), triton.Config({}, num_warps=8), triton.Config({}, num_warps=2)],
    key=["n_elements"],
)
@triton.jit
def _quantize_rowwise(x_ptr, output_ptr, output_maxs, n_elements, BLOCK_SIZE: tl.constexpr, P2: tl.constexpr):
    row_start = tl.program_id(0) * BLOCK_SIZE
    lanes = tl.arange(0, P2)
    in_row = lanes < BLOCK_SIZE
    vals = tl.load(x_ptr + row_start + lanes, mask=in_row, other=0.0).to(tl.float32)
    peak = tl.max(tl.abs(vals), axis=0)
    tl.store(output_ptr + row_start + lanes, rint(vals * 127.0 / peak).to(tl.int8), mask=in_row)
    tl.store(output_maxs + tl.program_id(0), peak.to(tl.float16))


def quantize_rowwise(x: torch.Tensor):
    n_rows, n_cols = x.shape
    codes = torch.empty((n_rows, n_cols), dtype=torch.int8, device=x.device)
    peaks = torch.empty((n_rows,), dtype=torch.float16, device=x.device)
    if x.numel():
        _quantize_rowwise[(n_rows,)](x, codes, peaks, x.numel(), BLOCK_SIZE=n_cols,
                                     P2=triton.next_power_of_2(n_cols))
    return codes, peaks
