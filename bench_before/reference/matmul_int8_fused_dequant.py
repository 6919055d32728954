"""Task 12: INT8 x INT8 matmul with the dequantization (and the bias) fused after the K loop."""

from __future__ import annotations

import math

import torch

from reference._common import generator


def generate_input(
    B: int,
    IN: int,
    OUT: int,
    per_channel: bool,
    bias: bool,
    seed: int,
    dist: str = "uniform",
    bias_dist: str = "normal",
) -> tuple[list, dict]:
    """x_q (B, IN) int8, x_scale (1,) fp32, w_q (IN, OUT) int8, w_scale (OUT,) or (1,) fp32[, bias (OUT,) fp16].

    dist="uniform": codes uniform in [-127, 127]; the accumulator of one output has a standard deviation of about
    5400 * sqrt(IN), and the scales bring Y to a standard deviation of about 3.
    dist="saturated": codes in [100, 127], all positive, so every accumulator is about 12800 * IN (beyond 2^24,
    and far beyond fp16's range, for IN in the thousands); the weight scales shrink by sqrt(IN) to keep Y near 3.
    Without a bias the argument is left out, so the entry's default (None) is used.
    bias_dist="normal": the bias is standard normal.
    bias_dist="cancel": the bias nearly cancels row 0 of acc * alpha: bias = fp16(-(acc * alpha)[0] + u), u uniform
    in [0, 0.5), so y[0] is small (in about [-0.004, 0.504]) while acc * alpha is of size ~3 to ~15. Only the order
    of the epilogue then shows: fp16(acc * alpha + bias) is off by at most half an ulp of y (2^-13 below 0.5), but
    fp16(fp16(acc * alpha) + bias) keeps the rounding error of acc * alpha, 2^-8 for |acc * alpha| in [8, 16)
    (against a tolerance of ~1.0e-3 to 1.5e-3 at these y). Meant for B = 1 (later rows are not cancelled).
    """
    g = generator(seed)
    if dist == "uniform":
        x_q = torch.randint(-127, 128, (B, IN), generator=g, dtype=torch.int8)
        w_q = torch.randint(-127, 128, (IN, OUT), generator=g, dtype=torch.int8)
        w_base = 3.0 / (127.0 * math.sqrt(IN))
    elif dist == "saturated":
        x_q = torch.randint(100, 128, (B, IN), generator=g, dtype=torch.int8)
        w_q = torch.randint(100, 128, (IN, OUT), generator=g, dtype=torch.int8)
        w_base = 1.0 / (127.0 * IN)
    else:
        raise ValueError(f"unknown dist {dist!r}")
    # Scales of a symmetric quantizer: absmax / 127, with some spread so that per-channel scales really differ.
    x_scale = (3.0 / 127.0) * (0.8 + 0.4 * torch.rand(1, generator=g))
    n_w = OUT if per_channel else 1
    w_scale = w_base * (0.5 + torch.rand(n_w, generator=g))
    args = [x_q, x_scale.float(), w_q, w_scale.float()]
    if bias and bias_dist == "normal":
        args.append(torch.randn(OUT, generator=g).to(torch.float16))
    elif bias and bias_dist == "cancel":
        scaled = (x_q[0].double() @ w_q.double()) * (x_scale.float().double() * w_scale.float().double())
        u = 0.5 * torch.rand(OUT, generator=g, dtype=torch.float64)
        args.append((u - scaled).to(torch.float16))
    elif bias:
        raise ValueError(f"unknown bias_dist {bias_dist!r}")
    return args, {"per_channel": bool(per_channel)}


def ref_kernel(args: list, kwargs: dict) -> tuple[torch.Tensor]:
    x_q, x_scale, w_q, w_scale = args[:4]
    bias = args[4] if len(args) > 4 else None
    # float64 holds every partial sum exactly (|acc| <= 127 * 127 * IN < 2^53), so this is the exact integer product.
    acc = x_q.double() @ w_q.double()
    alpha = x_scale.double() * w_scale.double()  # (1,) or (OUT,): broadcasts over the columns
    y = acc * alpha
    if bias is not None:
        y = y + bias.double()
    return (y,)
