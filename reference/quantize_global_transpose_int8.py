"""Task 13: global (per-tensor) symmetric INT8 quantization, stored transposed."""

from __future__ import annotations

import torch

from reference._common import randn

# The spec floors the divisor so that an all-zero input does not divide by zero.
MIN_DENOM = 127 * 1e-8


def generate_input(m: int, n: int, dtype: str, seed: int, layout: str = "contiguous", scale: float = 1.0,
                   zeros: bool = False, negative: bool = False) -> tuple[list, dict]:
    """An (m, n) input laid out as asked:

    * ``contiguous``: row-major, strides (n, 1);
    * ``transposed``: the transpose of a contiguous (n, m) tensor, strides (1, m);
    * ``sliced``: the first n columns of a contiguous (m, n + 13) tensor, strides (n + 13, 1);
    * ``stepped``: every other row and every other column of a contiguous (2m, 2n) tensor, strides (4n, 2):
      neither stride is 1.

    ``negative`` makes every value -|x| (the absmax then comes from the most negative element).
    """
    if layout == "contiguous":
        x = randn([m, n], dtype, seed, scale)
    elif layout == "transposed":
        x = randn([n, m], dtype, seed, scale).t()
    elif layout == "sliced":
        x = randn([m, n + 13], dtype, seed, scale)[:, :n]
    elif layout == "stepped":
        x = randn([2 * m, 2 * n], dtype, seed, scale)[::2, ::2]
    else:
        raise ValueError(f"unknown layout {layout!r}")
    if negative:
        x.abs_().neg_()  # in place, like zeros below
    if zeros:
        x.zero_()  # in place, so the layout (and the strides) stay as chosen
    assert tuple(x.shape) == (m, n)
    return [x], {}


def ref_kernel(args: list, kwargs: dict) -> tuple[torch.Tensor, torch.Tensor]:
    (x,) = args
    absmax = x.abs().max().float().reshape(1)  # exact: fp16 -> fp32 loses nothing
    denom = max(float(absmax), MIN_DENOM)
    # The value before rounding (the judge rounds), already transposed to the output's [N, M] layout.
    real_q_t = (127.0 * x.double() / denom).t().contiguous()
    return real_q_t, absmax
