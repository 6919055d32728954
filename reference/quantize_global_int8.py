"""Task 10: global (per-tensor) symmetric INT8 quantization."""

from __future__ import annotations

import torch

from reference._common import randn


def generate_input(n: int, dtype: str, seed: int, scale: float = 1.0, pattern: str = "normal") -> tuple[list, dict]:
    """n normal values times scale, reshaped by pattern:

    * ``normal`` (the default): as drawn;
    * ``negative``: every value made negative (-|x|), so the absmax comes from the most negative element;
    * ``single``: only the element of largest magnitude kept, every other element zero.
    """
    x = randn([n], dtype, seed, scale)
    if pattern == "negative":
        x = -x.abs()
    elif pattern == "single":
        keep = x.abs().argmax()
        x = torch.zeros_like(x).index_copy_(0, keep.reshape(1), x[keep].reshape(1))
    elif pattern != "normal":
        raise ValueError(f"unknown pattern {pattern!r}")
    return [x], {}


def ref_kernel(args: list, kwargs: dict) -> tuple[torch.Tensor, torch.Tensor]:
    (x,) = args
    absmax = x.abs().max()  # exact in the input dtype
    real_q = 127.0 * x.double() / absmax.double()  # the value before rounding; the judge rounds
    return real_q, absmax
