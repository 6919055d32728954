"""Known-wrong: floors absmax in x's own dtype, and only then converts it to float32.

For float32 inputs this is the spec. For float16 inputs the floor 127e-8 is itself rounded to float16, where it
is a subnormal: 21 * 2^-24 = 1.2517e-6, 1.5% below 1.27e-6. Inputs with an absmax above the floor never see it,
and an all-zero input gives zero codes whatever the divisor, so every public case passes; an fp16 input whose
every |x| is below 1.27e-6 is divided by too small a number, and its larger codes come out one too high."""

import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice


@triton.autotune(
    configs=[
        # 2-D tiles of A. The small tile makes more programs than GROUP_M rows of tiles, so the grouped
        # ordering (and its short last group) is exercised even on modest shapes.
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 128, "GROUP_M": 8}, num_warps=4),
        triton.Config({"BLOCK_M": 64, "BLOCK_N": 128, "GROUP_M": 8}, num_warps=4, num_stages=2),
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 64, "GROUP_M": 8}, num_warps=4, num_stages=2),
        triton.Config({"BLOCK_M": 32, "BLOCK_N": 64, "GROUP_M": 4}, num_warps=2, num_stages=1),
    ],
    key=["M", "N"],
)
@triton.jit
def _quantize_global_transpose(
    A,                # *fp16 | *fp32, the input X[M, N], any strides
    absmax_inv_ptr,   # *fp32, one element: 1 / max(absmax, 127e-8)
    B,                # *int8, the output Q^T[N, M]
    stride_am, stride_an,  # element strides of A: X[m, n] lives at A + m * stride_am + n * stride_an
    stride_bn, stride_bm,  # element strides of B: Q^T[n, m] lives at B + n * stride_bn + m * stride_bm
    M, N,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    GROUP_M: tl.constexpr,
):
    # Grouped ordering: consecutive programs walk down a group of GROUP_M tile-rows before moving to the next
    # tile-column, so the tiles that run together touch nearby rows of A and nearby columns of B (better L2 reuse).
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = tl.minimum(num_pid_m - first_pid_m, GROUP_M)  # the last group may be shorter
    pid_m = first_pid_m + (pid % num_pid_in_group) % group_size_m
    pid_n = (pid % num_pid_in_group) // group_size_m

    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)  # rows of X handled by this tile
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)  # columns of X handled by this tile
    # Edge tiles hang over the last row and/or column: mask both edges, on the load and on the store.
    mask = (rm[:, None] < M) & (rn[None, :] < N)

    a = tl.load(A + rm[:, None] * stride_am + rn[None, :] * stride_an, mask=mask, other=0.0).to(tl.float32)
    absmax_inv = tl.load(absmax_inv_ptr)
    # rint rounds half to even, like torch.round.
    q = libdevice.rint(127.0 * a * absmax_inv)
    # Element (m, n) of the tile goes to Q^T[n, m]: the same tile, addressed with B's strides swapped.
    tl.store(B + rn[None, :] * stride_bn + rm[:, None] * stride_bm, q.to(tl.int8), mask=mask)


def quantize_global_transpose(x: torch.Tensor):
    """Return (q_t, absmax): q_t = round(127 * x / max(absmax, 127e-8)).T as int8 [N, M], absmax = max|x| as fp32[1]."""
    assert x.dim() == 2, f"x must be 2-D [M, N], got shape {tuple(x.shape)}"
    assert x.dtype in (torch.float16, torch.float32), f"x must be float16 or float32, got {x.dtype}"
    M, N = x.shape
    # Strides are passed to the kernel, so x may be a view (transposed, sliced): no .contiguous() copy.
    absmax = x.abs().max()  # in x's dtype
    denom = torch.clamp(absmax, min=127 * 1e-8)  # BUG: in fp16 the floor rounds to 1.2517e-6
    absmax_inv = (1.0 / denom.float()).reshape(1)
    output = torch.empty((N, M), dtype=torch.int8, device=x.device)
    grid = lambda meta: (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),)  # noqa: E731
    _quantize_global_transpose[grid](
        x, absmax_inv, output,
        x.stride(0), x.stride(1),
        output.stride(0), output.stride(1),
        M, N,
    )
    return output, absmax.float().reshape(1)  # the original absmax, not the floored divisor
