"""The low-bit activation format in plain PyTorch (CPU): bit packing, group-256 quantization, dequantization.

Shared by the oracles of the lowbit tasks. Everything here is exact integer work or float64 arithmetic; the
tasks' tolerances are stated against these values.
"""

from __future__ import annotations

import torch

from reference._common import DTYPES, generator, hidden

GROUP = 256
INT32_MIN = -(1 << 31)
"""The grader's poison for int32 outputs: a packed word that is expected to equal it could not be told apart from
an unwritten one, so the generators make sure no expected word does."""
MARGIN = 2e-3
"""Generated activations keep (x - xmin) / scale at least this far (in code units) from a rounding boundary, so
fp32 kernels (approximate division included) and the float64 oracle agree on every code."""


def vpw(bits: int) -> int:
    if bits not in (1, 2, 4, 8):
        raise ValueError(f"bits must be 1, 2, 4 or 8, got {bits}")
    return 32 // bits


def to_int32(words: torch.Tensor) -> torch.Tensor:
    """int64 values in [0, 2^32) to the int32 with the same bits."""
    return torch.where(words >= 1 << 31, words - (1 << 32), words).to(torch.int32)


def pack(codes: torch.Tensor, bits: int) -> torch.Tensor:
    """Codes (last dimension a multiple of 32/bits) to int32 words: word w holds codes w*VPW + j at bits
    [j*bits, (j+1)*bits)."""
    n = vpw(bits)
    c = codes.to(torch.int64).reshape(*codes.shape[:-1], codes.shape[-1] // n, n)
    shifts = torch.arange(n, dtype=torch.int64) * bits
    return to_int32((c << shifts).sum(-1))


def unpack(words: torch.Tensor, bits: int) -> torch.Tensor:
    """int32 words to int32 codes, the inverse of `pack`; the last dimension grows by 32/bits."""
    n = vpw(bits)
    w = words.to(torch.int64) & 0xFFFFFFFF
    shifts = torch.arange(n, dtype=torch.int64) * bits
    codes = (w.unsqueeze(-1) >> shifts) & ((1 << bits) - 1)
    return codes.reshape(*words.shape[:-1], words.shape[-1] * n).to(torch.int32)


def groups(x: torch.Tensor) -> torch.Tensor:
    """[K, CIN] -> [K*G, 256] float64, CIN zero-padded to a multiple of 256 (the pads count in min and max)."""
    k, cin = x.shape
    g = -(-cin // GROUP)
    xp = torch.zeros(k, g * GROUP, dtype=torch.float64)
    xp[:, :cin] = x.double()
    return xp.reshape(k * g, GROUP)


def quant_params(xg: torch.Tensor, bits: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per group (rows of xg): xmin, scale (float64; 1 where the range is 0) and v = (x - xmin) / scale."""
    qmax = (1 << bits) - 1
    xmin = xg.min(dim=1).values
    xmax = xg.max(dim=1).values
    scale = (xmax - xmin) / qmax
    scale = torch.where(scale == 0, torch.ones_like(scale), scale)
    return xmin, scale, (xg - xmin[:, None]) / scale[:, None]


def codes_of(v: torch.Tensor, bits: int) -> torch.Tensor:
    """Round to nearest, ties down: int(v + 0.5 - 1e-6), clamped to [0, QMAX]."""
    return torch.floor(v + 0.5 - 1e-6).clamp(0, (1 << bits) - 1).to(torch.int64)


def quantize(x: torch.Tensor, bits: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """P [K*G, 256/VPW] int32, S and M [K*G] in x's dtype."""
    xmin, scale, v = quant_params(groups(x), bits)
    return pack(codes_of(v, bits), bits), scale.to(x.dtype), xmin.to(x.dtype)


def dequantize64(p: torch.Tensor, s: torch.Tensor, m: torch.Tensor, bits: int, cin: int) -> torch.Tensor:
    """q * S + M in float64 from packed codes and the stored S and M, as [K, cin] (pads dropped)."""
    q = unpack(p, bits).double()
    xg = q * s.double()[:, None] + m.double()[:, None]
    k = p.shape[0] * GROUP // (-(-cin // GROUP) * GROUP)
    return xg.reshape(k, -1)[:, :cin]


def activations(k: int, cin: int, dtype: str, seed: int, dist: str, bits: int) -> torch.Tensor:
    """[K, CIN] activations in `dtype`, kept MARGIN away from every rounding boundary (except dist='ties').

    dist: 'normal' (N(0, 2^2)), 'positive' (|N(0,1)| + 0.25, like post-ReLU values: the zero pads become the group
    minimum), 'const' (every third group of a row constant, range 0), 'ties' (values k/2 in [0, QMAX] with both
    ends in every group, so scale = 1 and half the values are exact ties, which round down); another name is a
    hidden case's (reference/_hidden.py `lowbit_<dist>`)."""
    g = generator(seed)
    dt = DTYPES[dtype]
    qmax = (1 << bits) - 1
    if dist == "ties":
        x = torch.randint(0, 2 * qmax + 1, (k, cin), generator=g).double() / 2
        for start in range(0, cin, GROUP):
            x[:, start] = 0.0
            x[:, min(start + 1, cin - 1)] = qmax
        return x.to(dt)  # zero pads add only more zeros to a last group
    if dist == "normal":
        x = torch.randn(k, cin, generator=g) * 2
    elif dist in ("positive", "const"):
        x = torch.randn(k, cin, generator=g).abs() + 0.25
        if dist == "const":
            for start in range(0, cin, 3 * GROUP):
                x[:, start : start + GROUP] = torch.randn(k, 1, generator=g)
    else:
        x = hidden(f"lowbit_{dist}")(k, cin, g)
    x = x.to(dt)
    return keep_off_boundaries(x, bits)


def keep_off_boundaries(x: torch.Tensor, bits: int) -> torch.Tensor:
    """Move values whose code lies within MARGIN of a rounding boundary: a real column takes its group's minimum
    (code 0); when a zero pad is the culprit, the group's minimum is pushed further down and everything is
    checked again."""
    k, cin = x.shape
    x = x.clone()
    for _ in range(50):
        xg = groups(x)
        xmin, scale, v = quant_params(xg, bits)
        t = v + 0.5 - 1e-6
        bad = (t - t.round()).abs() < MARGIN
        bad &= (xg.max(dim=1).values > xmin)[:, None]  # a constant group has every v = 0
        if not bad.any():
            return x
        real = torch.zeros_like(bad).reshape(k, -1)
        real[:, :cin] = True
        real = real.reshape(bad.shape)
        fix = bad & real
        xg = torch.where(fix, xmin[:, None].expand_as(xg), xg)
        pad_groups = (bad & ~real).any(dim=1).nonzero().flatten()
        new = xg.reshape(k, -1)[:, :cin].to(x.dtype)
        for grp in pad_groups.tolist():
            row, col0 = divmod(grp * GROUP, xg.numel() // k)
            seg = new[row, col0 : min(col0 + GROUP, cin)]
            j = int(seg.double().argmin())
            seg[j] = (seg[j].double() * 1.1 - 0.01).to(x.dtype)
        x = new
    raise RuntimeError("could not move the activations off the rounding boundaries")
