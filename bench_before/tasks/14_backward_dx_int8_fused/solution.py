"""Reference solution for task 14: dX = dY @ dequant(W_q)^T with the dequantization fused into the matmul."""

import torch
import triton
import triton.language as tl


@triton.autotune(
    configs=[
        # dX^T tiles are BLOCK_N (IN) x BLOCK_M (batch); BLOCK_K is the step along OUT, the reduction axis. The IN
        # side is the tensor cores' M (64 rows per warpgroup); the batch side is their N (8 to 256), so a small
        # batch still fills whole instructions. Each config was the fastest of 19 tried on the H100 at some batch
        # (IN = OUT = 8192, triton 3.6): B = 512-8192 the first (8192: 2.07 ms; 2.15 ms with GROUP_M 4 or 16),
        # B = 256 the second (100 us), B = 128 the third (61 us), B = 64 the fourth (51 us; B = 32 47 us), B = 16
        # the last (42 us).
        triton.Config({"BLOCK_M": 256, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8}, num_warps=8, num_stages=4),
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 128, "GROUP_M": 8}, num_warps=8, num_stages=3),
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 128, "GROUP_M": 8}, num_warps=4, num_stages=4),
        triton.Config({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 256, "GROUP_M": 8}, num_warps=4, num_stages=3),
        triton.Config({"BLOCK_M": 16, "BLOCK_N": 64, "BLOCK_K": 256, "GROUP_M": 8}, num_warps=4, num_stages=4),
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
    GROUP_M: tl.constexpr,   # batch tiles per group of the launch order (below)
):
    # Program (pid_m, pid_n) computes dX[offs_m, offs_n] = sum over k of dY[offs_m, k] * W[offs_n, k] * s_w[k],
    # as its transpose: dX^T[offs_n, offs_m] = W_deq[offs_n, :] @ dY[offs_m, :]^T. Why transposed: the dequantized
    # W tile is made in registers, and Hopper's tensor-core instruction (wgmma) takes its left operand from
    # registers but its right one only from shared memory. With W on the left it goes straight in; on the right
    # it would have to be written back to shared memory first. Measured on the H100 (8192^3): 4.0 ms with W on
    # the right, 2.6 ms with W on the left.
    # The grid is (batch tiles, IN tiles), but its programs are renumbered: consecutive programs walk down
    # GROUP_M batch tiles before moving to the next IN tile, so the programs running at the same time share dY
    # rows and W rows in L2 (8192^3 on the H100, 256 x 128 x 64 tiles: 2.58 ms in this order, 2.63 ms in the grid's own).
    num_pid_m = tl.num_programs(axis=0)
    num_pid_n = tl.num_programs(axis=1)
    pid = tl.program_id(axis=1) * num_pid_m + tl.program_id(axis=0)
    group_id = pid // (GROUP_M * num_pid_n)
    first_pid_m = group_id * GROUP_M
    group_size_m = tl.minimum(num_pid_m - first_pid_m, GROUP_M)  # the last group may be shorter
    pid_m = first_pid_m + (pid % (GROUP_M * num_pid_n)) % group_size_m
    pid_n = (pid % (GROUP_M * num_pid_n)) // group_size_m
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)  # rows of dY and dX (batch)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)  # columns of dX = rows of W (input features)
    offs_k = tl.arange(0, BLOCK_K)                    # position inside the current step along OUT
    mask_m = offs_m < B
    mask_n = offs_n < IN

    # W[n, k] is at n * OUT + k and dY[m, k] at m * OUT + k: both tiles are read along k, the contiguous axis.
    w_ptrs = wq_ptr + offs_n[:, None] * OUT + offs_k[None, :]    # (BLOCK_N, BLOCK_K)
    dy_ptrs = dy_ptr + offs_m[:, None] * OUT + offs_k[None, :]   # (BLOCK_M, BLOCK_K)

    acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    # At least one step, even for OUT = 0 (then every load is masked and adds 0). Why: Triton issues the tensor-core
    # instructions asynchronously, one step's work still running while the next tile is converted; but with a loop
    # that may not run at all, these zeros reach the code after the loop without passing through one, and ptxas
    # then makes each instruction wait for the previous one (its note C7515, "wgmma.mma_async instructions are
    # serialized"). H100, IN = OUT = 8192: 2.49 -> 2.07 ms at B = 8192, 616 -> 535 us at B = 2048.
    for k in range(0, tl.maximum(tl.cdiv(OUT, BLOCK_K), 1)):
        offs_kk = k * BLOCK_K + offs_k
        mask_k = offs_kk < OUT  # the last step may run past OUT: masked elements load as 0
        wq = tl.load(w_ptrs, mask=mask_n[:, None] & mask_k[None, :], other=0)
        dy = tl.load(dy_ptrs, mask=mask_m[:, None] & mask_k[None, :], other=0.0)
        # int8 -> float32, exactly, without the conversion instruction, which runs at a quarter of an add's rate
        # on Hopper (and every element of every W tile goes through it). 0x4B400000 is the bit pattern of
        # 1.5 * 2^23, where consecutive floats are 1 apart, so adding the code i (|i| <= 128) to the bits gives
        # the float 1.5 * 2^23 + i; subtracting 1.5 * 2^23 leaves i. Same values as wq.to(tl.float32). Measured
        # on the H100 (8192 x 8192 W, per channel), before the loop bound above: 2.57 -> 2.46 ms at B = 8192,
        # 648 -> 614 us at B = 2048, 118 -> 105 us at B = 256 (128 x 128 tiles); with it, 2.23 -> 2.12 ms at
        # B = 8192 and 544 -> 532 us at B = 2048.
        wf = (wq.to(tl.int32) + 0x4B400000).to(tl.float32, bitcast=True) - 12582912.0
        if PER_CHANNEL:
            # s_w[k] scales column k of this W tile, which is the reduction axis: it cannot be pulled out of the
            # sum, so the tile is dequantized here, once per tile (not once per partial sum).
            s_w = tl.load(w_scale_ptr + offs_kk, mask=mask_k, other=0.0)
            w = (wf * s_w[None, :]).to(tl.float16)  # fp16 for the tensor cores
        else:
            w = wf.to(tl.float16)  # exact: every code fits in fp16
        acc = tl.dot(w, tl.trans(dy), acc)  # fp16 x fp16 products, summed in fp32
        w_ptrs += BLOCK_K
        dy_ptrs += BLOCK_K

    if not PER_CHANNEL:
        # One scale for all of W factors out of the sum: apply it once, after the loop.
        acc = acc * tl.load(w_scale_ptr)

    # Element (n, m) of the tile is dX[m, n].
    dx_ptrs = dx_ptr + offs_m[None, :] * IN + offs_n[:, None]
    tl.store(dx_ptrs, acc.to(tl.float16), mask=mask_n[:, None] & mask_m[None, :])


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
