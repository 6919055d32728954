"""Task 20: bit packing of low-bit codes into int32 words, and back."""

from __future__ import annotations

import torch

from reference._common import generator
from reference._lowbit import INT32_MIN, pack, unpack, vpw


def generate_input(rows: int, n: int, bits: int, seed: int,
                   words_shape: list[int] | None = None) -> tuple[list, dict]:
    """codes [rows, n] int32 in [0, 2^bits) (n a multiple of 32/bits) to pack, and words [rows, n*bits/32] int32
    (every bit pattern, negative words included) to unpack.

    words_shape (optional, added later): [R2, W], the shape of the words to unpack, which the statement lets differ
    from the codes' packed shape; None (the default) keeps [rows, n*bits/32] and draws exactly what it drew
    before."""
    if n % vpw(bits):
        raise ValueError(f"n={n} is not a multiple of {vpw(bits)} codes per word")
    g = generator(seed)
    codes = torch.randint(0, 1 << bits, (rows, n), generator=g, dtype=torch.int32)
    packed = pack(codes, bits)
    hit = packed == INT32_MIN  # would read as never written: change its lowest code
    if hit.any():
        codes.view(rows, -1, vpw(bits))[..., 0][hit] = 1
    shape = (rows, n // vpw(bits)) if words_shape is None else tuple(int(d) for d in words_shape)
    words = torch.randint(-(1 << 31), 1 << 31, shape, generator=g, dtype=torch.int64)
    return [codes, words.to(torch.int32)], {"bits": bits}


def ref_kernel(args: list, kwargs: dict) -> tuple[torch.Tensor, torch.Tensor]:
    codes, words = args
    bits = kwargs["bits"]
    return pack(codes, bits), unpack(words, bits)
