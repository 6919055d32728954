"""Puzzle 12: a product with 4-bit weights, z = dequant(weight, scale, offset) @ activation.

The layout, read off the notebook's spec function (the ground truth), with FPINT = 8 nibbles per int32 and
GROUP = 8 weights per scale:
* weight  (N0, MID / 8) int32: weight l of row j is nibble l % 8 (bits 4 (l % 8) .. 4 (l % 8) + 3) of
  weight[j, l // 8];
* scale   (N0, MID / 8) float32: one scale per group of 8 consecutive weights, scale[j, l // 8];
* offset  (N0,) int32: the shift of group g of row j is nibble g of offset[j] (so MID <= 64);
* z[j, k] = sum_l scale[j, l // 8] * (w[j, l] - shift[j, l // 8]) * activation[l, k].
Nibbles are (value >> 4 n) & 15, so the sign of an int32 does not matter.
"""

import torch

from reference._puzzles import as_double, notebook_inputs

FPINT = 8
GROUP = 8


def nibbles(x: torch.Tensor) -> torch.Tensor:
    """(..., ) int32 -> (..., 8): nibble n of each value, least significant first."""
    return (x[..., None].long() >> (4 * torch.arange(FPINT))) & 15


def spec(scale, offset, weight, activation):
    n0, mid = weight.shape[0], weight.shape[1] * FPINT
    w = nibbles(weight).reshape(n0, mid)
    shift = nibbles(offset)[:, : mid // GROUP].repeat_interleave(GROUP, dim=1)
    sc = scale.repeat_interleave(GROUP, dim=1)
    return (sc * (w - shift).to(sc.dtype)) @ activation


def generate_input(seed: int = 0, **scalars):
    n0, n1, mid = scalars["N0"], scalars["N1"], scalars["MID"]
    if mid % GROUP or mid > GROUP * FPINT:
        raise ValueError("MID must be a multiple of 8, at most 64")
    shapes = [([n0, mid // GROUP], "float32"), ([n0], "int32"), ([n0, mid // FPINT], "int32"),
              ([mid, n1], "float32")]
    return notebook_inputs(shapes, [n0, n1], seed), scalars


def ref_kernel(args, kwargs):
    return (spec(*as_double(args)),)
