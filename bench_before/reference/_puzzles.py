"""Helpers shared by the Triton Puzzles oracles (reference/puzzleNN_*.py).

The puzzles' harness launches the kernel itself. A puzzle's `generate_input(seed, **scalars)` returns
`(tensors, scalars)`: one tensor per pointer of the kernel, in order (the spec function's arguments, then the output
`z`, whose values the worker replaces with poison), and the sizes and block sizes, passed as keyword arguments.
Inputs are made as the puzzles' notebook makes them: float32 `torch.rand` for every pointer in turn (seed 0 in the
notebook), and for an int32 argument `torch.randint(-100000, 100000)` drawn right after that rand.
`ref_kernel` evaluates the spec function in float64.
"""

from __future__ import annotations

import torch

from reference._common import generator


def notebook_inputs(inputs: list[tuple[list[int], str]], out_shape: list[int], seed: int) -> list[torch.Tensor]:
    """`inputs`: (shape, 'float32' | 'int32') per spec argument; then the output buffer of `out_shape`."""
    g = generator(seed)
    tensors = []
    for shape, kind in [*inputs, (out_shape, "float32")]:
        t = torch.rand(*shape, generator=g)
        if kind == "int32":
            t = torch.randint(-100000, 100000, tuple(shape), generator=g, dtype=torch.int32)
        tensors.append(t)
    return tensors


def as_double(args: list) -> list[torch.Tensor]:
    """The spec's arguments (every tensor but the output buffer); floats in float64, integers unchanged."""
    return [a.double() if a.is_floating_point() else a for a in args[:-1]]
