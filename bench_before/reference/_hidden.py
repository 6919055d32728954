"""Value patterns and layouts that only hidden cases use.

Staff only: `python -m grader release` leaves this module out of the student kit, so the kit's oracles name no
hidden pattern (asked for one, `reference._common.hidden` says it is graded after submission); the staff tree
and the Gradescope bundle, which grade every case, have it. A pattern here draws exactly what its oracle drew
before it moved (same generator calls in the same order), so every case's inputs are unchanged.
"""

from __future__ import annotations

import torch

from reference._common import randn

# ------------------------------------------------------------------ INT8 tasks 10, 11, 13 (`pattern:`, `layout:`)


def negative(x: torch.Tensor) -> torch.Tensor:
    """Every value -|x|: the absmax then comes from the most negative element."""
    return -x.abs()


def single(x: torch.Tensor) -> torch.Tensor:
    """Only the element of largest magnitude kept, every other element zero (a 1-D input)."""
    keep = x.abs().argmax()
    return torch.zeros_like(x).index_copy_(0, keep.reshape(1), x[keep].reshape(1))


def zero_rows(x: torch.Tensor) -> torch.Tensor:
    """Every third row (0, 3, 6, ...) set to zeros."""
    x[::3] = 0
    return x


def stepped(m: int, n: int, dtype: str, seed: int, scale: float) -> torch.Tensor:
    """Every other row and every other column of a contiguous (2m, 2n) tensor, strides (4n, 2): neither is 1."""
    return randn([2 * m, 2 * n], dtype, seed, scale)[::2, ::2]


# ------------------------------------------------------------------------------ lowbit 21, 23 (`dist:` of activations)


def lowbit_negative(k: int, cin: int, g: torch.Generator) -> torch.Tensor:
    """-(|N(0, 1)| + 0.25), all below zero: the zero pads become each group's maximum."""
    return -(torch.randn(k, cin, generator=g).abs() + 0.25)


def lowbit_const_rows(k: int, cin: int, g: torch.Generator) -> torch.Tensor:
    """Each row one value of N(0, 2^2), either sign: full groups are constant, and a part-filled last group holds
    that value and the zero pads, so the pads are its minimum or its maximum."""
    return (torch.randn(k, 1, generator=g) * 2).expand(k, cin).clone()


# -------------------------------------------------------------------------------- lowbit 22 (`pattern:` of signs)


def relu_nonpositive(x: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    """The values made <= 0 (+0.0, never -0.0): every mask word is 0."""
    x = -x.abs()
    x[x == 0] = 0.0
    return x


def relu_one_positive(x: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    """As `relu_nonpositive`, with one element > 0 (never bit 31 of its word, nor the middle element, which is
    kept 0): one set bit in the whole mask."""
    x = relu_nonpositive(x, g)
    n = x.numel()
    i = int(torch.randint(0, n, (1,), generator=g))
    while i % 32 == 31 or i == n // 2:  # a lone bit 31 would make its word the int32 poison
        i = (i + 1) % n
    x.view(-1)[i] = x.view(-1)[i].abs() + 0.5
    return x
