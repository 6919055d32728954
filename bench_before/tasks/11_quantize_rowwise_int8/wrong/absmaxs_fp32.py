"""Known-wrong: returns the row maxima as float32."""

import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice


@triton.autotune(
    configs=[
        # One program owns one whole row, so the tile size is fixed by the row length (BLOCK_SIZE, P2 come from
        # the wrapper). Only the launch parameters are left to tune.
        triton.Config({}, num_warps=2, num_stages=1),
        triton.Config({}, num_warps=4, num_stages=2),
        triton.Config({}, num_warps=8, num_stages=1),
    ],
    key=["n_elements"],
)
@triton.jit
def _quantize_rowwise(
    x_ptr,            # *fp16 | *fp32, the input, contiguous [n_rows, n_cols]
    output_ptr,       # *int8, the codes, [n_rows, n_cols]
    output_maxs,      # *fp16, one absmax per row, [n_rows]
    n_elements,       # n_rows * n_cols (the autotune key; the kernel itself does not need it)
    BLOCK_SIZE: tl.constexpr,  # the row length n_cols
    P2: tl.constexpr,          # next power of two >= n_cols: tl.arange needs a power-of-two length
):
    row = tl.program_id(axis=0)
    cols = tl.arange(0, P2)
    mask = cols < BLOCK_SIZE  # lanes n_cols..P2-1 lie in the next row (or past the end of x)
    offsets = row * BLOCK_SIZE + cols
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    # Masked lanes were loaded as 0, so they can never be the row's maximum.
    absmax = tl.max(tl.abs(x), axis=0)
    # rint rounds half to even, like torch.round; .to(tl.int8) alone would truncate toward zero.
    q = libdevice.rint(127.0 * x / absmax)
    tl.store(output_ptr + offsets, q.to(tl.int8), mask=mask)
    tl.store(output_maxs + row, absmax)


def quantize_rowwise(x: torch.Tensor):
    """Return (Q, absmaxs): Q[r, c] = round(127 * x[r, c] / max_c |x[r, c]|) as int8, absmaxs[r] that max as fp16."""
    assert x.dim() == 2, f"x must be 2-D [n_rows, n_cols], got shape {tuple(x.shape)}"
    assert x.dtype in (torch.float16, torch.float32), f"x must be float16 or float32, got {x.dtype}"
    assert x.is_contiguous(), "x must be contiguous (row-major)"
    n_rows, n_cols = x.shape
    output = torch.empty((n_rows, n_cols), dtype=torch.int8, device=x.device)
    output_maxs = torch.empty((n_rows,), dtype=torch.float32, device=x.device)  # BUG: the spec asks for fp16
    if x.numel() == 0:
        return output, output_maxs
    P2 = triton.next_power_of_2(n_cols)
    grid = (n_rows,)  # one program per row
    _quantize_rowwise[grid](x, output, output_maxs, x.numel(), BLOCK_SIZE=n_cols, P2=P2)
    return output, output_maxs
