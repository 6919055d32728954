"""Puzzle 5: z[j, i] = relu(x[i] * y[j]), over a 2-D grid of blocks."""

import torch

from reference._puzzles import as_double, notebook_inputs


def spec(x, y):
    return torch.relu(x[None, :] * y[:, None])


def generate_input(seed: int = 0, signed: bool = False, **scalars):
    """The notebook's inputs (torch.rand: in [0, 1), where x * y >= 0 and the ReLU never acts); with `signed`, the
    two inputs are moved to [-1, 1), so that it does."""
    n0, n1 = scalars["N0"], scalars["N1"]
    tensors = notebook_inputs([([n0], "float32"), ([n1], "float32")], [n1, n0], seed)
    if signed:
        tensors[:2] = [t * 2 - 1 for t in tensors[:2]]
    return tensors, scalars


def ref_kernel(args, kwargs):
    return (spec(*as_double(args)),)
