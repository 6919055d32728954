"""Known-wrong: the epilogue of vLLM's Triton scaled_mm, which rounds acc * alpha to fp16 and adds the bias after,
fp16(fp16(acc * alpha) + bias), where the statement asks for one rounding, fp16(acc * alpha + bias). Everything else
is the reference solution. The extra rounding costs up to half an ulp of acc * alpha: 2^-9 ~ 2e-3 at |acc * alpha|
in [4, 8), against a tolerance of 1e-3 + 1e-3 * |y|; it shows where y is small and acc * alpha is not, which the
case b1_in256_out256_pt_cancel_bias makes on purpose."""

import torch
import triton
import triton.language as tl

# Above this batch size, the wrapper first copies W into W^T (OUT, IN) and the kernel reads that copy. Why:
# Hopper's tensor-core instruction for 8-bit inputs (wgmma) takes both tiles with K as the contiguous axis. A
# row-major W (IN, OUT) has OUT contiguous, so Triton transposes every W tile through registers, and the
# loads can no longer run ahead of the math. The copy costs a fixed 52 us at 8192 x 8192 (H100), so it pays only
# once the batch is large. Measured on the H100 (IN = OUT = 8192, triton 3.6), best config of each path:
#   B = 8192: 1047 us (1050 TOPS) a call on W^T, the copy included (974 us since its tiles come by TMA);
#             on W, the kernel alone took 3731 us;
#   B = 128:    78 us (kernel) on W,    46 us + the copy on W^T;
#   B = 32:     43 us on W,             37 us + the copy on W^T.
# (do_bench's times, whose flush leaves 50 MB of dirty lines in L2 for the call to write back: with a clean L2,
# B = 32 takes 33.5 us on W and 30.0 + the copy on W^T.)
# The W^T path loads its tiles by TMA (see the kernel), which needs rows on 16-byte boundaries: IN % 16 == 0.
# Without it, rows start at odd addresses and no load can be vectorized: on the H100, whole calls on W^T against
# W as given took 580 against 346 us at 1531 x 3071 x 2500, 23.4 against 6.7 ms at 8192 x 8191 x 8192.
TRANSPOSE_ABOVE_B = 128


def _fit_batch(configs: list, named_args: dict, **kwargs) -> list:
    """Prune the autotuner's list: keep configs whose BLOCK_M is no taller than the batch rounded up to a power of
    two (at least 16). A taller tile only multiplies rows of padding, and timing it costs a compile."""
    rows = max(16, triton.next_power_of_2(named_args["B"]))
    return [c for c in configs if c.kwargs["BLOCK_M"] <= rows] or configs


@triton.autotune(
    configs=[
        # Tiles of the output are BLOCK_M x BLOCK_N; BLOCK_K is the depth of one step of the K loop. int8 tiles
        # are small (1 byte per element), so deep K steps and 3-4 pipeline stages fit in shared memory
        # (128 x 256 x 128: 48 KB a stage). Each was the fastest of those tried on the H100 (IN = OUT = 8192) at
        # one batch: on W^T, B = 8192 and B = 256; on W as given, B = 128 (78 us), 32 and 16. At 32 and 16, the
        # kernel alone, best of 124 and 62 variants (tiles, warps, stages), timed as scripts/bench_references.py
        # does: 33.5 us at 32 against 35.1 for the 32 x 64 x 256, 3-stage tile listed before (do_bench, whose L2
        # flush adds the write-back of 50 MB to each call, read both at 43.7-43.8); 32.0 us at 16, the next 35.6.
        # The first has 4 stages since its tiles come by TMA (below): 911-920 us at B = 8192, against 932-934
        # with 3 (the pointer loads' best was 980-1005 with either).
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 128, "GROUP_M": 8}, num_warps=8, num_stages=4),
        triton.Config({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 256, "GROUP_M": 8}, num_warps=4, num_stages=4),
        triton.Config({"BLOCK_M": 32, "BLOCK_N": 128, "BLOCK_K": 128, "GROUP_M": 8}, num_warps=4, num_stages=3),
        triton.Config({"BLOCK_M": 32, "BLOCK_N": 64, "BLOCK_K": 128, "GROUP_M": 8}, num_warps=4, num_stages=4),
        triton.Config({"BLOCK_M": 16, "BLOCK_N": 64, "BLOCK_K": 256, "GROUP_M": 8}, num_warps=4, num_stages=3),
    ],
    key=["B", "IN", "OUT"],
    prune_configs_by={"early_config_prune": _fit_batch},
)
@triton.jit
def _forward_int8_fused_kernel(
    # inputs, all contiguous
    x_q_ptr,          # *int8, (B, IN): quantized activations
    x_scale_ptr,      # *fp32, one element: s_x
    w_q_ptr,          # *int8, (IN, OUT): quantized weights; (OUT, IN), their transpose, when W_T
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
    W_T: tl.constexpr,       # w_q_ptr holds W^T, (OUT, IN) row-major, and tiles come by TMA (IN % 16 == 0)
    GROUP_M: tl.constexpr,   # tile rows per group of the launch order (below)
):
    # Program (pid_m, pid_n) computes the output tile Y[offs_m, offs_n]. The grid is (B tiles, OUT tiles), but
    # its programs are renumbered: consecutive programs walk down GROUP_M tile rows before moving one tile
    # column right, so the programs running at the same time share X rows and W columns in L2.
    num_pid_m = tl.num_programs(axis=0)
    num_pid_n = tl.num_programs(axis=1)
    pid = tl.program_id(axis=1) * num_pid_m + tl.program_id(axis=0)
    group_id = pid // (GROUP_M * num_pid_n)
    first_pid_m = group_id * GROUP_M
    group_size_m = tl.minimum(num_pid_m - first_pid_m, GROUP_M)  # the last group may be shorter
    pid_m = first_pid_m + (pid % (GROUP_M * num_pid_n)) % group_size_m
    pid_n = (pid % (GROUP_M * num_pid_n)) // group_size_m

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)  # rows of X and Y (batch)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)  # columns of W and Y (output channels)
    offs_k = tl.arange(0, BLOCK_K)                    # position inside the current K step
    mask_m = offs_m < B    # the last tile row may run past B
    mask_n = offs_n < OUT  # the last tile column may run past OUT

    if W_T:
        # Tensor descriptors: each tile is one bulk copy by the TMA unit (Hopper's tensor memory accelerator)
        # straight into shared memory, instead of every thread computing addresses and issuing its own loads.
        # Rows and columns past the matrix come back as 0, so no masks. Its rows must start on 16-byte
        # boundaries, hence IN % 16 == 0. H100, IN = OUT = 8192, 128 x 256 x 128 tiles, the kernel alone on W^T:
        # B = 8192 980-1005 -> 911-920 us, B = 2048 248 -> 224-225 us.
        x_desc = tl.make_tensor_descriptor(x_q_ptr, shape=[B, IN], strides=[IN, 1], block_shape=[BLOCK_M, BLOCK_K])
        w_desc = tl.make_tensor_descriptor(w_q_ptr, shape=[OUT, IN], strides=[IN, 1],
                                           block_shape=[BLOCK_N, BLOCK_K])
    else:
        # Row-major addressing: X[m, k] is at m * IN + k, W[k, n] at k * OUT + n.
        x_ptrs = x_q_ptr + offs_m[:, None] * IN + offs_k[None, :]   # (BLOCK_M, BLOCK_K)
        w_ptrs = w_q_ptr + offs_k[:, None] * OUT + offs_n[None, :]  # (BLOCK_K, BLOCK_N), OUT contiguous

    # int8 x int8 products summed exactly in int32 (|sum| <= 127 * 127 * IN, no overflow below IN ~ 133000).
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.int32)
    for k in range(0, tl.cdiv(IN, BLOCK_K)):
        if W_T:
            x = x_desc.load([pid_m * BLOCK_M, k * BLOCK_K])
            w = tl.trans(w_desc.load([pid_n * BLOCK_N, k * BLOCK_K]))  # (BLOCK_K, BLOCK_N), K contiguous
        else:
            # The last K step may run past IN: masked elements load as 0 and add nothing to the sum.
            mask_k = k * BLOCK_K + offs_k < IN
            x = tl.load(x_ptrs, mask=mask_m[:, None] & mask_k[None, :], other=0)
            w = tl.load(w_ptrs, mask=mask_k[:, None] & mask_n[None, :], other=0)
            x_ptrs += BLOCK_K
            w_ptrs += BLOCK_K * OUT
        acc += tl.dot(x, w)  # int8 x int8 -> int32 on the integer tensor cores

    # Fused dequantization, once per output tile (not once per K step): Y = fp32(acc) * s_x * s_w[n].
    s_x = tl.load(x_scale_ptr)
    if PER_CHANNEL:
        s_w = tl.load(w_scale_ptr + offs_n, mask=mask_n, other=0.0)  # one scale per output column
        y = acc.to(tl.float32) * (s_x * s_w)[None, :]
    else:
        s_w = tl.load(w_scale_ptr)  # one scale for the whole matrix
        y = acc.to(tl.float32) * (s_x * s_w)
    # The mistake: round to fp16 first, then add the fp16 bias in fp16 (a second rounding).
    y = y.to(tl.float16)
    if HAS_BIAS:
        bias = tl.load(b_ptr + offs_n, mask=mask_n, other=0.0)
        y = y + bias[None, :]

    y_ptrs = y_ptr + offs_m[:, None] * OUT + offs_n[None, :]
    tl.store(y_ptrs, y, mask=mask_m[:, None] & mask_n[None, :])


@triton.jit
def _transpose_int8_kernel(src_ptr, dst_ptr, R, C, BLOCK: tl.constexpr):
    # dst (C, R) = src (R, C)^T, one BLOCK x BLOCK tile per program. Both the load and the store are along their
    # matrix's contiguous axis; Triton moves the tile between the two layouts through shared memory.
    offs_r = tl.program_id(axis=0) * BLOCK + tl.arange(0, BLOCK)
    offs_c = tl.program_id(axis=1) * BLOCK + tl.arange(0, BLOCK)
    mask = (offs_r[:, None] < R) & (offs_c[None, :] < C)
    tile = tl.load(src_ptr + offs_r[:, None] * C + offs_c[None, :], mask=mask, other=0)
    tl.store(dst_ptr + offs_c[None, :] * R + offs_r[:, None], tile, mask=mask)


def _descriptor_scratch(size: int, alignment: int, stream) -> torch.Tensor:
    # Tensor descriptors made inside a kernel need a little global memory per launch (128 bytes per descriptor
    # and program); Triton asks for it through this function.
    return torch.empty(size, dtype=torch.int8, device="cuda")


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

    # W^T and TMA (see TRANSPOSE_ABOVE_B): the copy is ours, so its rows are aligned once IN % 16 == 0; X's rows
    # must also start on 16-byte boundaries.
    w_t = B > TRANSPOSE_ABOVE_B and IN % 16 == 0 and x_q.data_ptr() % 16 == 0
    if w_t and x_q.is_cuda:
        triton.set_allocator(_descriptor_scratch)
    if w_t:
        # W^T, K contiguous (see TRANSPOSE_ABOVE_B). At 8192 x 8192 on the H100, torch's own w_q.t().contiguous()
        # took 457 us; the kernel below 52 us with 128 x 128 tiles (2580 GB/s, 87% of a plain copy's), 57 us
        # with 64 x 64 ones.
        w_arg = torch.empty((OUT, IN), dtype=torch.int8, device=w_q.device)
        block = 128
        _transpose_int8_kernel[(triton.cdiv(IN, block), triton.cdiv(OUT, block))](w_q, w_arg, IN, OUT, BLOCK=block,
                                                                                   num_warps=4)
    else:
        w_arg = w_q
    y = torch.empty((B, OUT), dtype=torch.float16, device=x_q.device)
    grid = lambda meta: (triton.cdiv(B, meta["BLOCK_M"]), triton.cdiv(OUT, meta["BLOCK_N"]))  # noqa: E731
    _forward_int8_fused_kernel[grid](
        x_q, x_scale, w_arg, w_scale,
        bias if bias is not None else y,  # without a bias, pass any fp16 pointer: HAS_BIAS=False never reads it
        y,
        B, IN, OUT,
        PER_CHANNEL=bool(per_channel),
        HAS_BIAS=bias is not None,
        W_T=w_t,
    )
    return y
