"""Task 14: dX = dY @ dequant(W_q)^T, the backward pass of an INT8 linear layer with respect to its input."""

from __future__ import annotations

import math

import torch

from reference._common import generator


def generate_input(B: int, IN: int, OUT: int, per_channel: bool, seed: int) -> tuple[list, dict]:
    """dy (B, OUT) fp16, w_q (IN, OUT) int8, w_scale (OUT,) or (1,) fp32.

    dy is standard normal; the weight scales (about 3 / (127 * sqrt(OUT)), spread by +-50%) make the dequantized
    weights of order 1 / sqrt(OUT), so every dX element has a standard deviation of about 1.7.
    """
    g = generator(seed)
    dy = torch.randn(B, OUT, generator=g).to(torch.float16)
    w_q = torch.randint(-127, 128, (IN, OUT), generator=g, dtype=torch.int8)
    n_w = OUT if per_channel else 1
    w_scale = (3.0 / (127.0 * math.sqrt(OUT))) * (0.5 + torch.rand(n_w, generator=g))
    return [dy, w_q, w_scale.float()], {"per_channel": bool(per_channel)}


def ref_kernel(args: list, kwargs: dict) -> tuple[torch.Tensor]:
    dy, w_q, w_scale = args
    w_deq = w_q.double() * w_scale.double()  # scale column o by s_w[o]; a (1,) scale broadcasts
    return (dy.double() @ w_deq.T,)
