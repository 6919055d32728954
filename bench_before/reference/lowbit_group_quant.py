"""Task 21: group-256 quantize-and-pack, and dequant-unpack."""

from __future__ import annotations

import torch

from reference._lowbit import INT32_MIN, activations, codes_of, dequantize64, groups, pack, quant_params, quantize


def generate_input(K: int, CIN: int, bits: int, dtype: str, seed: int, dist: str = "normal") -> tuple[list, dict]:
    """x [K, CIN] to quantize, and (p, s, m): another activation of the same shape, packed by the oracle, to
    dequantize (so the two halves are graded apart)."""
    x = activations(K, CIN, dtype, seed, dist, bits)
    p2, s2, m2 = quantize(activations(K, CIN, dtype, seed + 1000, dist, bits), bits)
    if (quantize(x, bits)[0] == INT32_MIN).any():
        raise ValueError("an expected word equals the int32 poison: choose another seed")
    return [x, p2, s2, m2], {"bits": bits}


def ref_kernel(args: list, kwargs: dict) -> tuple[torch.Tensor, ...]:
    x, p2, s2, m2 = args
    bits = kwargs["bits"]
    xmin, scale, v = quant_params(groups(x), bits)
    p = pack(codes_of(v, bits), bits)
    return p, scale, xmin, dequantize64(p2, s2, m2, bits, x.shape[1])
