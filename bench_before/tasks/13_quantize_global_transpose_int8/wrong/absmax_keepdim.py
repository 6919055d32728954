"""Wrong for task 13: the codes are right, but absmax keeps both reduced dimensions (keepdim=True), so it comes
back with shape [1, 1]. The statement calls absmax a scalar: [] and [1] are right, a 2-D tensor is not."""

import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice


@triton.autotune(
    configs=[
        triton.Config({"BLOCK_M": 64, "BLOCK_N": 64, "GROUP_M": 1}, num_warps=4),
        triton.Config({"BLOCK_M": 32, "BLOCK_N": 128, "GROUP_M": 1}, num_warps=4),
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 32, "GROUP_M": 1}, num_warps=4),
    ],
    key=["M", "N"],
)
@triton.jit
def _quantize_global_transpose(A, absmax_inv_ptr, B, stride_am, stride_an, stride_bn, stride_bm, M, N,
                               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    keep = (rows[:, None] < M) & (cols[None, :] < N)
    tile = tl.load(A + rows[:, None] * stride_am + cols[None, :] * stride_an, mask=keep, other=0.0)
    codes = libdevice.rint(tile.to(tl.float32) * (127.0 * tl.load(absmax_inv_ptr)))
    tl.store(B + cols[None, :] * stride_bn + rows[:, None] * stride_bm, codes.to(tl.int8), mask=keep)


def quantize_global_transpose(x: torch.Tensor):
    m, n = x.shape
    absmax = x.abs().amax(dim=(0, 1), keepdim=True).float()  # the bug: shape [1, 1]
    inv = 1.0 / torch.clamp(absmax, min=127e-8).reshape(1)  # an all-zero x must not divide by zero
    q_t = torch.empty((n, m), dtype=torch.int8, device=x.device)
    grid = lambda meta: (triton.cdiv(m, meta["BLOCK_M"]), triton.cdiv(n, meta["BLOCK_N"]))  # noqa: E731
    _quantize_global_transpose[grid](x, inv, q_t, x.stride(0), x.stride(1), q_t.stride(0), q_t.stride(1), m, n)
    return q_t, absmax
