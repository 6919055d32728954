"""Known wrong: dequantizes without adding the minimum."""

import torch
import triton
import triton.language as tl

GROUP = 256


@triton.jit
def _quant_pack_kernel(x_ptr, p_ptr, s_ptr, m_ptr, K, CIN, G, BITS: tl.constexpr):
    # One program per group: group k*G + g holds columns g*256 .. g*256+255 of row k. Its 256 values are loaded
    # as [NWORDS, VPW], so that row w of the tile holds exactly the codes of packed word w.
    VPW: tl.constexpr = 32 // BITS
    NWORDS: tl.constexpr = 256 // VPW
    QMAX: tl.constexpr = (1 << BITS) - 1
    pid = tl.program_id(0)
    k = pid // G
    g = pid % G
    offs_w = tl.arange(0, NWORDS)
    offs_j = tl.arange(0, VPW)
    col = g * 256 + offs_w[:, None] * VPW + offs_j[None, :]
    # Columns past CIN are the zero padding: they load as 0.0 and count in the minimum and the maximum.
    x = tl.load(x_ptr + k.to(tl.int64) * CIN + col, mask=col < CIN, other=0.0).to(tl.float32)
    xmin = tl.min(tl.min(x, axis=1), axis=0)
    xmax = tl.max(tl.max(x, axis=1), axis=0)
    scale = (xmax - xmin) / QMAX
    scale = tl.where(scale == 0.0, 1.0, scale)  # a constant group: every code is 0 and S = 1
    # Round to nearest with ties down; the value is > 0 here, so the conversion (which truncates) is a floor.
    q = ((x - xmin) / scale + 0.5 - 1e-6).to(tl.int32)
    q = tl.minimum(tl.maximum(q, 0), QMAX)
    words = tl.sum(q << (offs_j[None, :] * BITS), axis=1)  # disjoint bits: the sum is the OR
    tl.store(p_ptr + pid.to(tl.int64) * NWORDS + offs_w, words)
    tl.store(s_ptr + pid, scale.to(s_ptr.dtype.element_ty))
    tl.store(m_ptr + pid, xmin.to(m_ptr.dtype.element_ty))


@triton.jit
def _dequant_unpack_kernel(p_ptr, s_ptr, m_ptr, y_ptr, K, CIN, G, BITS: tl.constexpr):
    VPW: tl.constexpr = 32 // BITS
    NWORDS: tl.constexpr = 256 // VPW
    QMAX: tl.constexpr = (1 << BITS) - 1
    pid = tl.program_id(0)
    k = pid // G
    g = pid % G
    offs_w = tl.arange(0, NWORDS)
    offs_j = tl.arange(0, VPW)
    words = tl.load(p_ptr + pid.to(tl.int64) * NWORDS + offs_w)
    q = (words[:, None] >> (offs_j[None, :] * BITS)) & QMAX
    s = tl.load(s_ptr + pid).to(tl.float32)
    m = tl.load(m_ptr + pid).to(tl.float32)
    y = q.to(tl.float32) * s
    col = g * 256 + offs_w[:, None] * VPW + offs_j[None, :]
    tl.store(y_ptr + k.to(tl.int64) * CIN + col, y.to(y_ptr.dtype.element_ty), mask=col < CIN)  # pads dropped


def group_quant(x: torch.Tensor, p: torch.Tensor, s: torch.Tensor, m: torch.Tensor, *,
                bits: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Return (P, S, M) of x, and the dequantized [K, CIN] activation that (p, s, m) describe."""
    assert bits in (1, 2, 4, 8), f"bits must be 1, 2, 4 or 8, got {bits}"
    assert x.dim() == 2 and x.is_contiguous(), "x must be a contiguous [K, CIN] tensor"
    K, CIN = x.shape
    G = triton.cdiv(CIN, GROUP)
    nwords = GROUP * bits // 32
    assert p.shape == (K * G, nwords) and p.dtype == torch.int32, f"p must be int32 [{K * G}, {nwords}]"
    assert s.shape == (K * G,) and m.shape == (K * G,), f"s and m must be [{K * G}]"
    assert p.is_contiguous() and s.is_contiguous() and m.is_contiguous()

    P = torch.empty((K * G, nwords), dtype=torch.int32, device=x.device)
    S = torch.empty(K * G, dtype=x.dtype, device=x.device)
    M = torch.empty(K * G, dtype=x.dtype, device=x.device)
    x_hat = torch.empty((K, CIN), dtype=s.dtype, device=x.device)
    if K * G:
        _quant_pack_kernel[(K * G,)](x, P, S, M, K, CIN, G, BITS=bits)
        _dequant_unpack_kernel[(K * G,)](p, s, m, x_hat, K, CIN, G, BITS=bits)
    return P, S, M, x_hat
