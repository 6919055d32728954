"""Known wrong (for learners): each split's share of the tokens is K // SPLIT (rounded down), then rounded up
to whole BLOCK_K steps.

The rounding up to whole steps hides the floor division for most K: the SPLIT shares together still reach past K
for every K of the public cases under every config here (they fall short only when K // SPLIT is already a whole
number of steps and K % SPLIT > 0). But with fewer tokens than splits (K < SPLIT, a tiny last micro-batch),
K // SPLIT is 0, every share is empty, no token is ever read, and dW comes out all zeros. A share must round up:
tl.cdiv(K, SPLIT), as the reference does."""

import torch
import triton
import triton.language as tl

GROUP = 256


@triton.autotune(
    configs=[
        # Output tiles of dW^T: BLOCK_N (CIN; divides 256, so a tile never straddles two groups) x BLOCK_M (COUT),
        # BLOCK_K tokens per step, SPLIT programs sharing the reduction over K of each tile.
        # Measured on an H200 (triton 3.6, CIN = COUT = 768, BITS = 2, scripts/bench_lowbit.py --configs), as the
        # share of the unfused path's speed at K = 100864:
        # - BLOCK_M = 256 dequantizes each X_hat tile once for twice as many output columns as 128 does (the
        #   dequantization and its layout conversion, not the tensor cores, bound a step): 0.62x -> 0.77x;
        # - SPLIT = 7 makes 3 x 12 tiles x 7 = 252 programs, one wave at two programs per SM on 132 SMs: -> 0.91x;
        # - maxnreg=128 keeps two programs per SM once S and M are prefetched (141 registers otherwise, and one
        #   program per SM: 0.74x): -> 0.96x.
        triton.Config({"BLOCK_M": 256, "BLOCK_N": 64, "BLOCK_K": 64, "SPLIT": 7}, num_warps=8, num_stages=3,
                      maxnreg=128),
        triton.Config({"BLOCK_M": 256, "BLOCK_N": 64, "BLOCK_K": 64, "SPLIT": 14}, num_warps=8, num_stages=3,
                      maxnreg=128),
        triton.Config({"BLOCK_M": 256, "BLOCK_N": 64, "BLOCK_K": 32, "SPLIT": 7}, num_warps=8, num_stages=4,
                      maxnreg=128),
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "SPLIT": 8}, num_warps=8, num_stages=3),
    ],
    key=["K", "CIN", "COUT"],
    # The autotuner times each config on the same arguments, epoch included: the flags must start from zero each
    # time, or a split could take an earlier trial's flag for this call's.
    reset_to_zero=["flag_ptr"],
)
@triton.jit(do_not_specialize=["epoch"])
def _dw_fused_kernel(dy_ptr, p_ptr, s_ptr, m_ptr, dw_ptr, K, CIN, COUT, BITS: tl.constexpr,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                     flag_ptr, epoch, SPLIT: tl.constexpr):
    # The product is computed transposed, dW^T[CIN, COUT] = X_hat^T @ dY, so that the dequantized tile is the
    # left operand (on Hopper the tensor cores take the left operand from registers; only dY goes through shared
    # memory) and dY is read in its natural row-major layout.
    VPW: tl.constexpr = 32 // BITS
    NWORDS: tl.constexpr = 256 // VPW
    QMAX: tl.constexpr = (1 << BITS) - 1
    TILE_WORDS: tl.constexpr = BLOCK_N // VPW  # packed words per token in this tile's BLOCK_N columns
    G = (CIN + 255) // 256
    pid_tile = tl.program_id(0)
    pid_k = tl.program_id(1)
    n_tiles_m = tl.cdiv(COUT, BLOCK_M)
    pid_n = pid_tile // n_tiles_m
    pid_m = pid_tile % n_tiles_m

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)  # dW rows: columns of dY
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)  # dW columns: columns of X
    offs_k = tl.arange(0, BLOCK_K)
    offs_w = tl.arange(0, TILE_WORDS)
    shifts = tl.arange(0, VPW) * BITS
    mask_m = offs_m < COUT
    mask_n = offs_n < CIN
    # The tile's columns are group g, words first_word .. first_word + TILE_WORDS - 1 of it.
    g = (pid_n * BLOCK_N) // 256
    first_word = ((pid_n * BLOCK_N) % 256) // VPW

    # This program's share of the tokens: a whole number of BLOCK_K steps.
    chunk = tl.cdiv(K // SPLIT, BLOCK_K) * BLOCK_K  # BUG: K // SPLIT rounds down (0 when K < SPLIT)
    k_start = pid_k * chunk
    k_end = tl.minimum(k_start + chunk, K)

    # dW comes uninitialized (a zero fill would be one more launch before this one, and the GPU would idle while
    # the host issues this launch): split 0 of each tile zeroes the tile first, then raises the tile's flag to
    # this call's epoch. The other splits add into the tile only once they see that flag, hundreds of steps later.
    if pid_k == 0:
        tl.store(dw_ptr + offs_m[None, :] * CIN + offs_n[:, None], tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32),
                 mask=mask_n[:, None] & mask_m[None, :])
        tl.debug_barrier()  # every thread's zeros are issued before the flag goes up
        tl.atomic_xchg(flag_ptr + pid_tile, epoch, sem="release")

    acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    # S and M are 2-byte gathers (stride G), too narrow for the compiler's asynchronous copies, so a plain load
    # would stall every step for a full memory round trip. They are loaded one step ahead instead.
    grp_next = (k_start + offs_k) * G + g
    mask_next = k_start + offs_k < k_end
    s_next = tl.load(s_ptr + grp_next, mask=mask_next, other=0.0)
    mn_next = tl.load(m_ptr + grp_next, mask=mask_next, other=0.0)
    for k0 in range(k_start, k_end, BLOCK_K):
        ks = k0 + offs_k
        mask_k = ks < k_end
        b = tl.load(dy_ptr + ks[:, None] * COUT + offs_m[None, :], mask=mask_k[:, None] & mask_m[None, :],
                    other=0.0)  # dY tile [BLOCK_K, BLOCK_M]
        grp = ks * G + g  # the group of (token, g)
        s = s_next.to(tl.float32)
        mn = mn_next.to(tl.float32)
        mask_next = ks + BLOCK_K < k_end
        s_next = tl.load(s_ptr + grp + BLOCK_K * G, mask=mask_next, other=0.0)
        mn_next = tl.load(m_ptr + grp + BLOCK_K * G, mask=mask_next, other=0.0)
        # Each word once, [TILE_WORDS, BLOCK_K]; then its VPW codes, [TILE_WORDS, VPW, BLOCK_K] -> [BLOCK_N, BLOCK_K]
        # (column w * VPW + j of the tile is code j of word w).
        words = tl.load(p_ptr + grp[None, :] * NWORDS + first_word + offs_w[:, None], mask=mask_k[None, :],
                        other=0)
        q = (words[:, None, :] >> shifts[None, :, None]) & QMAX
        # int -> float32 without the (quarter-rate) conversion instruction: the bits of 2^23 + q, minus 2^23.
        qf = (q | 0x4B000000).to(tl.float32, bitcast=True) - 8388608.0
        qf = tl.reshape(qf, (BLOCK_N, BLOCK_K))
        x_hat_t = (qf * s[None, :] + mn[None, :]).to(dy_ptr.dtype.element_ty)  # X_hat^T, rounded as the format says
        acc = tl.dot(x_hat_t, b, acc)  # bf16 (fp16) operands, fp32 accumulation

    # The SPLIT partial sums of a tile meet in dW through atomic adds, once the tile is zeroed (split 0 waits too:
    # its zeros were stored by other threads). The GPU starts blocks in the order of their index in practice (CUDA
    # does not promise it), and split 0's blocks come first, so by the time a split has walked its share of K the
    # flag is long up; only for tiny K is there anything to wait for.
    # Measured on the H100 (bench_lowbit.py --breakdown): with this wait after the loop, ptxas no longer
    # serializes the wgmma instructions (its C7515 note is gone), and the kernel takes 329.9 us at K = 100864
    # instead of 341.5 us.
    seen = tl.atomic_add(flag_ptr + pid_tile, 0, sem="acquire")
    while seen != epoch:
        seen = tl.atomic_add(flag_ptr + pid_tile, 0, sem="acquire")
    # Relaxed order: the adds only have to be atomic, not ordered (red.global instead of atom.global).
    # acc[n, m] is dW[m, n].
    tl.atomic_add(dw_ptr + offs_m[None, :] * CIN + offs_n[:, None], acc, mask=mask_n[:, None] & mask_m[None, :],
                  sem="relaxed")


_FLAGS: dict = {}  # (device, stream) -> [per-tile flags, last epoch]


def _next_epoch(device: torch.device, n_tiles: int) -> tuple[torch.Tensor, int]:
    """The tile flags of this device and stream (calls on one stream run one after another) and a new epoch."""
    stream = torch.cuda.current_stream(device).cuda_stream if device.type == "cuda" else 0
    entry = _FLAGS.get((device, stream))
    if entry is None or entry[0].numel() < n_tiles or entry[1] >= 2**30:
        entry = _FLAGS[(device, stream)] = [torch.zeros(n_tiles, dtype=torch.int32, device=device), 0]
    entry[1] += 1
    return entry[0], entry[1]


def dw_from_packed(dy: torch.Tensor, p: torch.Tensor, s: torch.Tensor, m: torch.Tensor, *, cin: int,
                   bits: int) -> torch.Tensor:
    """Return dW = dY^T @ dequant(p, s, m) as fp32 [COUT, cin]."""
    assert bits in (1, 2, 4, 8), f"bits must be 1, 2, 4 or 8, got {bits}"
    assert dy.dim() == 2 and dy.is_contiguous(), "dy must be a contiguous [K, COUT] tensor"
    K, COUT = dy.shape
    G = triton.cdiv(cin, GROUP)
    assert p.shape == (K * G, GROUP * bits // 32) and p.dtype == torch.int32 and p.is_contiguous()
    assert s.shape == (K * G,) and m.shape == (K * G,) and s.is_contiguous() and m.is_contiguous()
    assert s.dtype == dy.dtype and m.dtype == dy.dtype, "s and m must have dy's dtype"

    dw = torch.empty((COUT, cin), dtype=torch.float32, device=dy.device)
    flags, epoch = _next_epoch(dy.device, triton.cdiv(cin, 16) * triton.cdiv(COUT, 16))
    grid = lambda meta: (triton.cdiv(cin, meta["BLOCK_N"]) * triton.cdiv(COUT, meta["BLOCK_M"]),  # noqa: E731
                         meta["SPLIT"])
    _dw_fused_kernel[grid](dy, p, s, m, dw, K, cin, COUT, BITS=bits, flag_ptr=flags, epoch=epoch)
    return dw
