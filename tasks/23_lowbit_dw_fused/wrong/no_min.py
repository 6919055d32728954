"""Known wrong: forgets the group minimum in the dequantization."""

import torch
import triton
import triton.language as tl

GROUP = 256


@triton.autotune(
    configs=[
        # Output tiles BLOCK_M (COUT) x BLOCK_N (CIN; a divisor of 256, so a tile never straddles two groups),
        # BLOCK_K tokens per step, SPLIT programs sharing the reduction over K per output tile.
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "SPLIT": 8}, num_warps=8, num_stages=3),
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "SPLIT": 16}, num_warps=8, num_stages=3),
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "SPLIT": 16}, num_warps=8, num_stages=3),
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 128, "SPLIT": 32}, num_warps=8, num_stages=3),
    ],
    key=["K", "CIN", "COUT"],
    reset_to_zero=["dw_ptr"],  # the kernel adds into dW: the autotuner's trial runs must start from zeros
)
@triton.jit
def _dw_fused_kernel(dy_ptr, p_ptr, s_ptr, m_ptr, dw_ptr, K, CIN, COUT, BITS: tl.constexpr,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, SPLIT: tl.constexpr):
    VPW: tl.constexpr = 32 // BITS
    NWORDS: tl.constexpr = 256 // VPW
    QMAX: tl.constexpr = (1 << BITS) - 1
    G = (CIN + 255) // 256
    pid_tile = tl.program_id(0)
    pid_k = tl.program_id(1)
    n_tiles_n = tl.cdiv(CIN, BLOCK_N)
    pid_m = pid_tile // n_tiles_n
    pid_n = pid_tile % n_tiles_n

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)  # output rows: columns of dY
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)  # output columns: columns of X
    offs_k = tl.arange(0, BLOCK_K)
    mask_m = offs_m < COUT
    mask_n = offs_n < CIN

    # Where column n of X lives in the packed format: group g (the same for the whole tile), word w, bit shift.
    g = (pid_n * BLOCK_N) // 256
    word = (offs_n % 256) // VPW
    shift = (offs_n % VPW) * BITS

    # This program's share of the tokens: a whole number of BLOCK_K steps.
    chunk = tl.cdiv(tl.cdiv(K, SPLIT), BLOCK_K) * BLOCK_K
    k_start = pid_k * chunk
    k_end = tl.minimum(k_start + chunk, K)

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(k_start, k_end, BLOCK_K):
        ks = k0 + offs_k
        mask_k = ks < k_end
        # dY^T tile [BLOCK_M, BLOCK_K]: dY is [K, COUT] row-major, so dY^T[m, k] sits at k * COUT + m.
        a = tl.load(dy_ptr + ks[None, :].to(tl.int64) * COUT + offs_m[:, None],
                    mask=mask_m[:, None] & mask_k[None, :], other=0.0)
        # X_hat tile [BLOCK_K, BLOCK_N], unpacked and dequantized in registers (never written to memory).
        grp = ks.to(tl.int64) * G + g  # group index of (token, g)
        words = tl.load(p_ptr + grp[:, None] * NWORDS + word[None, :], mask=mask_k[:, None], other=0)
        q = (words >> shift[None, :]) & QMAX
        s = tl.load(s_ptr + grp, mask=mask_k, other=0.0).to(tl.float32)
        mn = tl.load(m_ptr + grp, mask=mask_k, other=0.0).to(tl.float32)
        x_hat = (q.to(tl.float32) * s[:, None]).to(dy_ptr.dtype.element_ty)
        acc = tl.dot(a, x_hat, acc)  # bf16 (fp16) operands, fp32 accumulation

    dw_ptrs = dw_ptr + offs_m[:, None] * CIN + offs_n[None, :]
    tl.atomic_add(dw_ptrs, acc, mask=mask_m[:, None] & mask_n[None, :])  # the SPLIT partial sums meet here


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
    grid = lambda meta: (triton.cdiv(COUT, meta["BLOCK_M"]) * triton.cdiv(cin, meta["BLOCK_N"]),  # noqa: E731
                         meta["SPLIT"])
    _dw_fused_kernel[grid](dy, p, s, m, dw, K, cin, COUT, BITS=bits)
    return dw
