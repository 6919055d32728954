# bob, HW4 12_matmul_int8_fused_dequant

import torch
import triton
import triton.language as tl


@triton.autotune(
    configs=[
        # Tiles of the output are BLOCK_M x BLOCK_N; BLOCK_K is the depth of one step of the K loop.
        # int8 tiles are small (1 byte per element), so deep K steps and 3-4 pipeline stages fit in shared memory.
        triton.Config({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 64}, num_warps=4, num_stages=3),
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 64}, num_warps=4, num_stages=3),
        triton.Config({"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 32}, num_warps=4, num_stages=4),
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 128}, num_warps=8, num_stages=3),
    ],
    key=["B", "IN", "OUT"],
)
@triton.jit
def _forward_int8_fused_kernel(
    # inputs, all contiguous
    x_q_ptr,          # *int8, (B, IN): quantized activations
    x_scale_ptr,      # *fp32, one element: s_x
    w_q_ptr,          # *int8, (IN, OUT): quantized weights
    w_scale_ptr,      # *fp32, (OUT,) if PER_CHANNEL else one element: s_w
    b_ptr,            # *fp16, (OUT,): the bias; any valid pointer when HAS_BIAS is False (never read then)
    # output, contiguous
    y_ptr,            # *fp16, (B, OUT)
    # sizes
    B, IN, OUT,
    # tile sizes, chosen by the autotuner
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    # switches, fixed by the wrapper: each combination compiles to its own kernel, with no runtime branch
    PER_CHANNEL: tl.constexpr,
    HAS_BIAS: tl.constexpr,
):
    # Program (pid_m, pid_n) computes the output tile Y[offs_m, offs_n].
    pid_m = tl.program_id(axis=0)
    pid_n = tl.program_id(axis=1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)  # rows of X and Y (batch)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)  # columns of W and Y (output channels)
    offs_k = tl.arange(0, BLOCK_K)                    # position inside the current K step
    mask_m = offs_m < B    # the last tile row may run past B
    mask_n = offs_n < OUT  # the last tile column may run past OUT

    # Row-major addressing: X[m, k] is at m * IN + k, W[k, n] at k * OUT + n.
    x_ptrs = x_q_ptr + offs_m[:, None] * IN + offs_k[None, :]   # (BLOCK_M, BLOCK_K)
    w_ptrs = w_q_ptr + offs_k[:, None] * OUT + offs_n[None, :]  # (BLOCK_K, BLOCK_N)

    # int8 x int8 products summed exactly in int32 (|sum| <= 127 * 127 * IN, no overflow below IN ~ 133000).
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.int32)
    for k in range(0, tl.cdiv(IN, BLOCK_K)):
        # The last K step may run past IN: masked elements load as 0 and add nothing to the sum.
        mask_k = k * BLOCK_K + offs_k < IN
        x = tl.load(x_ptrs, mask=mask_m[:, None] & mask_k[None, :], other=0)
        w = tl.load(w_ptrs, mask=mask_k[:, None] & mask_n[None, :], other=0)
        acc += tl.dot(x, w)  # int8 x int8 -> int32 on the integer tensor cores
        x_ptrs += BLOCK_K
        w_ptrs += BLOCK_K * OUT

    # Fused dequantization, once per output tile (not once per K step): Y = fp32(acc) * s_x * s_w[n].
    s_x = tl.load(x_scale_ptr)
    if PER_CHANNEL:
        s_w = tl.load(w_scale_ptr + offs_n, mask=mask_n, other=0.0)  # one scale per output column
        y = acc.to(tl.float32) * (s_x * s_w)[None, :]
    else:
        s_w = tl.load(w_scale_ptr)  # one scale for the whole matrix
        y = acc.to(tl.float32) * (s_x * s_w)
    if HAS_BIAS:
        bias = tl.load(b_ptr + offs_n, mask=mask_n, other=0.0)
        y += bias.to(tl.float32)[None, :]

    y_ptrs = y_ptr + offs_m[:, None] * OUT + offs_n[None, :]
    tl.store(y_ptrs, y.to(tl.float16), mask=mask_m[:, None] & mask_n[None, :])


def matmul_int8_fused(x_q: torch.Tensor,
                      x_scale: torch.Tensor,
                      w_q: torch.Tensor,
                      w_scale: torch.Tensor,
                      bias: torch.Tensor | None = None,
                      *, per_channel: bool = True) -> torch.Tensor:
    """Return Y = dequant(X_q) @ dequant(W_q) + bias, dtype fp16, shape (B, OUT)."""
    # inputs: dtypes, shapes, layout
    assert x_q.dtype == torch.int8 and w_q.dtype == torch.int8, \
        f"x_q and w_q must be int8, got {x_q.dtype} and {w_q.dtype}"
    assert x_q.dim() == 2 and w_q.dim() == 2, f"x_q and w_q must be 2-D, got {tuple(x_q.shape)} and {tuple(w_q.shape)}"
    B, IN = x_q.shape
    assert w_q.shape[0] == IN, f"inner dimensions differ: x_q is {tuple(x_q.shape)}, w_q is {tuple(w_q.shape)}"
    OUT = w_q.shape[1]
    assert x_q.is_contiguous() and w_q.is_contiguous(), "x_q and w_q must be contiguous (the kernel has no strides)"
    # scales and bias
    assert x_scale.dtype == torch.float32 and x_scale.numel() == 1, \
        f"x_scale must be one float32, got {x_scale.dtype} of shape {tuple(x_scale.shape)}"
    n_scales = OUT if per_channel else 1
    assert w_scale.dtype == torch.float32 and w_scale.numel() == n_scales, \
        f"w_scale must be float32 with {n_scales} element(s) (per_channel={per_channel}), " \
        f"got {w_scale.dtype} of shape {tuple(w_scale.shape)}"
    assert w_scale.is_contiguous(), "w_scale must be contiguous"
    if bias is not None:
        assert bias.dtype == torch.float16 and bias.shape == (OUT,), \
            f"bias must be float16 of shape ({OUT},), got {bias.dtype} of shape {tuple(bias.shape)}"
        assert bias.is_contiguous(), "bias must be contiguous"
    tensors = [x_q, x_scale, w_q, w_scale] + ([bias] if bias is not None else [])
    assert all(t.device == x_q.device for t in tensors), "all inputs must be on the same device"

    y = torch.empty((B, OUT), dtype=torch.float16, device=x_q.device)
    grid = lambda meta: (triton.cdiv(B, meta["BLOCK_M"]), triton.cdiv(OUT, meta["BLOCK_N"]))  # noqa: E731
    _forward_int8_fused_kernel[grid](
        x_q, x_scale, w_q, w_scale,
        bias if bias is not None else y,  # without a bias, pass any fp16 pointer: HAS_BIAS=False never reads it
        y,
        B, IN, OUT,
        PER_CHANNEL=bool(per_channel),
        HAS_BIAS=bias is not None,
    )
    return y
