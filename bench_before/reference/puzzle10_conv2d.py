"""Puzzle 10: a batched single-channel 2-D correlation, z[i, a, b] = sum k[p, q] * x[i, a + p, b + q], with x read
as zero past its bottom and right edges (so z has x's shape)."""

import torch

from reference._puzzles import as_double, notebook_inputs


def spec(x, k):
    kh, kw = k.shape
    padded = torch.nn.functional.pad(x, (0, kw, 0, kh))
    z = torch.zeros_like(x)
    for p in range(kh):
        for q in range(kw):
            z += k[p, q] * padded[:, p : p + x.shape[1], q : q + x.shape[2]]
    return z


def generate_input(seed: int = 0, **scalars):
    n0, h, w, kh, kw = (scalars[k] for k in ("N0", "H", "W", "KH", "KW"))
    return notebook_inputs([([n0, h, w], "float32"), ([kh, kw], "float32")], [n0, h, w], seed), scalars


def ref_kernel(args, kwargs):
    return (spec(*as_double(args)),)
