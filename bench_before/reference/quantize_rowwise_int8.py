"""Task 11: row-wise symmetric INT8 quantization (one scale per row)."""

from __future__ import annotations

import torch

from reference._common import hidden, randn


def generate_input(n_rows: int, n_cols: int, dtype: str, seed: int, scale: float = 1.0,
                   pattern: str = "normal") -> tuple[list, dict]:
    """An (n_rows, n_cols) matrix of normal values times scale; `pattern` other than ``normal`` (as drawn)
    reshapes them for a hidden case (reference/_hidden.py). As drawn, every row holds a nonzero value."""
    x = randn([n_rows, n_cols], dtype, seed, scale)
    if pattern != "normal":
        x = hidden(pattern)(x)
    else:
        assert bool((x != 0).any(dim=1).all()), "generated input has an all-zero row; pick another seed"
    return [x], {}


def ref_kernel(args: list, kwargs: dict) -> tuple[torch.Tensor, torch.Tensor]:
    (x,) = args
    row_absmax = x.abs().amax(dim=1)  # exact, in the input dtype
    real_q = 127.0 * x.double() / row_absmax.double()[:, None]  # the value before rounding; the judge rounds
    real_q[row_absmax == 0] = 0.0  # a row of zeros: codes 0 (the statement defines it; 0 / 0 would be NaN)
    return real_q, row_absmax.to(torch.float16)
