"""The unfused path the speed tests compare against (staff code, never graded): the dequant-unpack kernel of
task 21 writes X_hat to memory in dY's dtype, then cuBLAS multiplies: torch.mm(dY^T, X_hat). `torch_math` is the
same math in plain torch, what scripts/bench_references.py times, eager and compiled (max-autotune)."""

import torch
import triton
import triton.language as tl

GROUP = 256


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
    y = q.to(tl.float32) * s + m
    col = g * 256 + offs_w[:, None] * VPW + offs_j[None, :]
    tl.store(y_ptr + k.to(tl.int64) * CIN + col, y.to(y_ptr.dtype.element_ty), mask=col < CIN)


def dw_from_packed(dy: torch.Tensor, p: torch.Tensor, s: torch.Tensor, m: torch.Tensor, *, cin: int,
                   bits: int) -> torch.Tensor:
    K = dy.shape[0]
    G = triton.cdiv(cin, GROUP)
    x_hat = torch.empty((K, cin), dtype=s.dtype, device=dy.device)
    _dequant_unpack_kernel[(K * G,)](p, s, m, x_hat, K, cin, G, BITS=bits)
    return torch.mm(dy.t(), x_hat)


def torch_math(dy: torch.Tensor, p: torch.Tensor, s: torch.Tensor, m: torch.Tensor, *, cin: int,
               bits: int) -> torch.Tensor:
    shifts = torch.arange(32 // bits, dtype=torch.int32, device=p.device) * bits
    codes = ((p.unsqueeze(-1) >> shifts) & ((1 << bits) - 1)).reshape(p.shape[0], GROUP)
    x_hat = (codes.float() * s.float()[:, None] + m.float()[:, None]).to(s.dtype)
    return torch.mm(dy.t(), x_hat.reshape(dy.shape[0], -1)[:, :cin])
