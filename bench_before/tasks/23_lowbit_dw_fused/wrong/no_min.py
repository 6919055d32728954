"""Known wrong: forgets the group minimum in the dequantization."""

import torch
import triton
import triton.language as tl

GROUP = 256


@triton.autotune(
    configs=[
        # Output tiles of dW^T: BLOCK_N (CIN; divides 256, so a tile never straddles two groups) x BLOCK_M (COUT),
        # BLOCK_K tokens per step, SPLIT programs sharing the reduction over K of each tile.
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "SPLIT": 16}, num_warps=8, num_stages=3),
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "SPLIT": 8}, num_warps=8, num_stages=3),
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "SPLIT": 4}, num_warps=8, num_stages=3),
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 64, "SPLIT": 8}, num_warps=4, num_stages=3),
    ],
    key=["K", "CIN", "COUT"],
    reset_to_zero=["dw_ptr"],  # the kernel adds into dW: the autotuner's trial runs must start from zeros
)
@triton.jit
def _dw_fused_kernel(dy_ptr, p_ptr, s_ptr, m_ptr, dw_ptr, K, CIN, COUT, BITS: tl.constexpr,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, SPLIT: tl.constexpr):
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
    chunk = tl.cdiv(tl.cdiv(K, SPLIT), BLOCK_K) * BLOCK_K
    k_start = pid_k * chunk
    k_end = tl.minimum(k_start + chunk, K)

    acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    for k0 in range(k_start, k_end, BLOCK_K):
        ks = k0 + offs_k
        mask_k = ks < k_end
        b = tl.load(dy_ptr + ks[:, None] * COUT + offs_m[None, :], mask=mask_k[:, None] & mask_m[None, :],
                    other=0.0)  # dY tile [BLOCK_K, BLOCK_M]
        grp = ks * G + g  # the group of (token, g)
        s = tl.load(s_ptr + grp, mask=mask_k, other=0.0).to(tl.float32)
        mn = tl.load(m_ptr + grp, mask=mask_k, other=0.0).to(tl.float32)
        # Each word once, [TILE_WORDS, BLOCK_K]; then its VPW codes, [TILE_WORDS, VPW, BLOCK_K] -> [BLOCK_N, BLOCK_K]
        # (column w * VPW + j of the tile is code j of word w).
        words = tl.load(p_ptr + grp[None, :] * NWORDS + first_word + offs_w[:, None], mask=mask_k[None, :],
                        other=0)
        q = (words[:, None, :] >> shifts[None, :, None]) & QMAX
        # int -> float32 without the (quarter-rate) conversion instruction: the bits of 2^23 + q, minus 2^23.
        qf = (q | 0x4B000000).to(tl.float32, bitcast=True) - 8388608.0
        qf = tl.reshape(qf, (BLOCK_N, BLOCK_K))
        x_hat_t = (qf * s[None, :]).to(dy_ptr.dtype.element_ty)  # X_hat^T, rounded as the format says
        acc = tl.dot(x_hat_t, b, acc)  # bf16 (fp16) operands, fp32 accumulation

    # acc[n, m] is dW[m, n]; the SPLIT partial sums of a tile meet in dW through atomic adds.
    tl.atomic_add(dw_ptr + offs_m[None, :] * CIN + offs_n[:, None], acc, mask=mask_n[:, None] & mask_m[None, :])


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

    dw = torch.zeros((COUT, cin), dtype=torch.float32, device=dy.device)
    grid = lambda meta: (triton.cdiv(cin, meta["BLOCK_N"]) * triton.cdiv(COUT, meta["BLOCK_M"]),  # noqa: E731
                         meta["SPLIT"])
    _dw_fused_kernel[grid](dy, p, s, m, dw, K, cin, COUT, BITS=bits)
    return dw
