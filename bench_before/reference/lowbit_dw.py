"""Task 23: the weight gradient dW = dY^T @ dequant(P) from packed activations."""

from __future__ import annotations

import math

import torch

from reference._common import DTYPES, generator
from reference._lowbit import activations, dequantize64, quantize


def generate_input(K: int, CIN: int, COUT: int, bits: int, dtype: str, seed: int,
                   dist: str = "normal") -> tuple[list, dict]:
    """dy [K, COUT] (N(0, 1/K), so |dW| stays near 1 for every K) and the packed activations p, s, m of an
    activation [K, CIN]."""
    x = activations(K, CIN, dtype, seed, dist, bits)
    p, s, m = quantize(x, bits)
    dy = (torch.randn(K, COUT, generator=generator(seed + 1)) / math.sqrt(K)).to(DTYPES[dtype])
    return [dy, p, s, m], {"cin": CIN, "bits": bits}


def ref_kernel(args: list, kwargs: dict) -> tuple[torch.Tensor]:
    dy, p, s, m = args
    # X_hat as the format defines it: q * S + M, rounded to the dtype of S; then the product in float64.
    x_hat = dequantize64(p, s, m, kwargs["bits"], kwargs["cin"]).to(s.dtype).double()
    return (dy.double().t() @ x_hat,)
