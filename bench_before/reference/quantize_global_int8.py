"""Task 10: global (per-tensor) symmetric INT8 quantization."""

from __future__ import annotations

import torch

from reference._common import hidden, randn


def generate_input(n: int, dtype: str, seed: int, scale: float = 1.0, pattern: str = "normal") -> tuple[list, dict]:
    """n normal values times scale; `pattern` other than ``normal`` (as drawn) reshapes them for a hidden case
    (reference/_hidden.py)."""
    x = randn([n], dtype, seed, scale)
    if pattern != "normal":
        x = hidden(pattern)(x)
    return [x], {}


def ref_kernel(args: list, kwargs: dict) -> tuple[torch.Tensor, torch.Tensor]:
    (x,) = args
    absmax = x.abs().max()  # exact in the input dtype
    real_q = 127.0 * x.double() / absmax.double()  # the value before rounding; the judge rounds
    return real_q, absmax
