"""Task 22: ReLU whose forward also returns a 1-bit packed mask, and the backward from that mask alone."""

from __future__ import annotations

import torch

from reference._common import DTYPES, generator, hidden
from reference._lowbit import INT32_MIN, to_int32


def pack_mask(x: torch.Tensor) -> torch.Tensor:
    """Bit i of word w is (x.flatten()[32*w + i] > 0); the unused bits of the last word are 0."""
    flat = (x.flatten() > 0).to(torch.int64)
    n_words = -(-flat.numel() // 32)
    bits = torch.zeros(n_words * 32, dtype=torch.int64)
    bits[: flat.numel()] = flat
    return to_int32((bits.reshape(n_words, 32) << torch.arange(32, dtype=torch.int64)).sum(-1))


def _activation(shape, dtype: str, g: torch.Generator, pattern: str = "mixed") -> torch.Tensor:
    """N(0, 1) with about 10% exact zeros ('mixed', the default); another pattern is a hidden case's sign
    pattern (reference/_hidden.py `relu_<pattern>`), applied to the same draws."""
    x = torch.randn(*shape, generator=g)
    x[torch.rand(*shape, generator=g) < 0.1] = 0.0  # exact zeros: relu'(0) is 0 here (the mask is x > 0)
    x.view(-1)[x.numel() // 2] = 0.0  # at least one, even in the smallest case
    if pattern != "mixed":
        x = hidden(f"relu_{pattern}")(x, g)
    return x.to(DTYPES[dtype])


def generate_input(rows: int, cols: int, dtype: str, seed: int, pattern: str = "mixed") -> tuple[list, dict]:
    """x [rows, cols] for the forward; dy [rows, cols] and mask (the packed mask of another x) for the backward.
    pattern (optional): the sign pattern of both activations, x and the one the mask is made from."""
    g = generator(seed)
    x = _activation((rows, cols), dtype, g, pattern)
    dy = torch.randn(rows, cols, generator=g).to(DTYPES[dtype])
    mask = pack_mask(_activation((rows, cols), dtype, g, pattern))
    if (pack_mask(x) == INT32_MIN).any():
        raise ValueError("an expected mask word equals the int32 poison: choose another seed")
    return [x, dy, mask], {}


def ref_kernel(args: list, kwargs: dict) -> tuple[torch.Tensor, ...]:
    x, dy, mask = args
    n = x.numel()
    bits = ((mask.to(torch.int64).unsqueeze(-1) >> torch.arange(32, dtype=torch.int64)) & 1).flatten()[:n]
    dx = torch.where(bits.reshape(dy.shape).bool(), dy, torch.zeros_like(dy))
    return x.clamp_min(0), pack_mask(x), dx
