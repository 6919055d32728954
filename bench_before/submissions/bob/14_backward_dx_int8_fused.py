# bob, HW4 14_backward_dx_int8_fused

import torch
import triton
import triton.language as tl


@triton.autotune(
    configs=[
        # dX tiles are BLOCK_M (batch) x BLOCK_N (IN); BLOCK_K is the step along OUT, the reduction axis.
        triton.Config({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 64}, num_warps=4, num_stages=3),
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 32}, num_warps=4, num_stages=4),
        triton.Config({"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 128}, num_warps=4, num_stages=3),
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64}, num_warps=8, num_stages=3),
    ],
    key=["B", "IN", "OUT"],
)
@triton.jit
def _backward_dx_fused_kernel(
    # inputs, contiguous
    dy_ptr,           # *fp16, (B, OUT): gradient of the layer's output
    wq_ptr,           # *int8, (IN, OUT): quantized weights (the forward pass computes X @ W)
    w_scale_ptr,      # *fp32, (OUT,) if PER_CHANNEL else one element
    # output, contiguous
    dx_ptr,           # *fp16, (B, IN): gradient of the layer's input
    # sizes
    B, IN, OUT,
    # tile sizes, chosen by the autotuner
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    # fixed by the wrapper
    PER_CHANNEL: tl.constexpr,
):
    # Program (pid_m, pid_n) computes dX[offs_m, offs_n] = sum over k of dY[offs_m, k] * W[offs_n, k] * s_w[k].
    pid_m = tl.program_id(axis=0)
    pid_n = tl.program_id(axis=1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)  # rows of dY and dX (batch)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)  # columns of dX = rows of W (input features)
    offs_k = tl.arange(0, BLOCK_K)                    # position inside the current step along OUT
    mask_m = offs_m < B
    mask_n = offs_n < IN

    # dY[m, k] is at m * OUT + k.
    dy_ptrs = dy_ptr + offs_m[:, None] * OUT + offs_k[None, :]   # (BLOCK_M, BLOCK_K)
    # The right operand is W^T: its element (k, n) is W[n, k], at n * OUT + k. Indexing does the transpose;
    # no transposed copy of W is ever made.
    wt_ptrs = wq_ptr + offs_k[:, None] + offs_n[None, :] * OUT   # (BLOCK_K, BLOCK_N)

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(OUT, BLOCK_K)):
        offs_kk = k * BLOCK_K + offs_k
        mask_k = offs_kk < OUT  # the last step may run past OUT: masked elements load as 0
        dy = tl.load(dy_ptrs, mask=mask_m[:, None] & mask_k[None, :], other=0.0)
        wq = tl.load(wt_ptrs, mask=mask_k[:, None] & mask_n[None, :], other=0)
        w = wq.to(tl.float16)
        acc = tl.dot(dy, w, acc)  # fp16 x fp16 products, summed in fp32
        dy_ptrs += BLOCK_K
        wt_ptrs += BLOCK_K

    # BUG: PER_CHANNEL is ignored, the first scale is used for every column of W
    acc = acc * tl.load(w_scale_ptr)

    dx_ptrs = dx_ptr + offs_m[:, None] * IN + offs_n[None, :]
    tl.store(dx_ptrs, acc.to(tl.float16), mask=mask_m[:, None] & mask_n[None, :])


def backward_dx_int8_fused(dy: torch.Tensor,
                           w_q: torch.Tensor,
                           w_scale: torch.Tensor,
                           *, per_channel: bool = True) -> torch.Tensor:
    """Return dX = dY @ (dequant(W_q))^T, dtype fp16, shape (B, IN)."""
    assert dy.dtype == torch.float16, f"dy must be float16, got {dy.dtype}"
    assert w_q.dtype == torch.int8, f"w_q must be int8, got {w_q.dtype}"
    assert dy.dim() == 2 and w_q.dim() == 2, f"dy and w_q must be 2-D, got {tuple(dy.shape)} and {tuple(w_q.shape)}"
    B, OUT = dy.shape
    IN = w_q.shape[0]
    assert w_q.shape[1] == OUT, f"dy is {tuple(dy.shape)} but w_q is {tuple(w_q.shape)}: both need OUT columns"
    assert dy.is_contiguous() and w_q.is_contiguous(), "dy and w_q must be contiguous (the kernel has no strides)"
    n_scales = OUT if per_channel else 1
    assert w_scale.dtype == torch.float32 and w_scale.numel() == n_scales, \
        f"w_scale must be float32 with {n_scales} element(s) (per_channel={per_channel}), " \
        f"got {w_scale.dtype} of shape {tuple(w_scale.shape)}"
    assert w_scale.is_contiguous(), "w_scale must be contiguous"
    assert dy.device == w_q.device == w_scale.device, "all inputs must be on the same device"

    dx = torch.empty((B, IN), dtype=torch.float16, device=dy.device)
    grid = lambda meta: (triton.cdiv(B, meta["BLOCK_M"]), triton.cdiv(IN, meta["BLOCK_N"]))  # noqa: E731
    _backward_dx_fused_kernel[grid](dy, w_q, w_scale, dx, B, IN, OUT, PER_CHANNEL=bool(per_channel))
    return dx
