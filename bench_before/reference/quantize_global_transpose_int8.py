"""Task 13: global (per-tensor) symmetric INT8 quantization, stored transposed."""

from __future__ import annotations

import torch

from reference._common import hidden, randn

# The spec floors the divisor so that an all-zero input does not divide by zero.
MIN_DENOM = 127 * 1e-8


def generate_input(m: int, n: int, dtype: str, seed: int, layout: str = "contiguous", scale: float = 1.0,
                   zeros: bool = False, pattern: str = "normal") -> tuple[list, dict]:
    """An (m, n) input laid out as asked:

    * ``contiguous``: row-major, strides (n, 1);
    * ``transposed``: the transpose of a contiguous (n, m) tensor, strides (1, m);
    * ``sliced``: the first n columns of a contiguous (m, n + 13) tensor, strides (n + 13, 1);
    * another name: a hidden case's layout (reference/_hidden.py).

    ``zeros`` makes every value 0; `pattern` other than ``normal`` (as drawn) reshapes the values for a hidden
    case (reference/_hidden.py).
    """
    if layout == "contiguous":
        x = randn([m, n], dtype, seed, scale)
    elif layout == "transposed":
        x = randn([n, m], dtype, seed, scale).t()
    elif layout == "sliced":
        x = randn([m, n + 13], dtype, seed, scale)[:, :n]
    else:
        x = hidden(layout)(m, n, dtype, seed, scale)
    if pattern != "normal":
        x.copy_(hidden(pattern)(x))  # in place, like zeros below
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
