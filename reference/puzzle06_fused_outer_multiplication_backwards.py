"""Puzzle 6: the gradient of relu(x[j, i] * y[j]) with respect to x, given the upstream gradient dz."""

import torch

from reference._puzzles import as_double, notebook_inputs


def spec(x, y, dz):
    x = x.clone().requires_grad_(True)
    z = torch.relu(x * y[:, None])
    z.backward(dz)
    return x.grad


def generate_input(seed: int = 0, **scalars):
    n0, n1 = scalars["N0"], scalars["N1"]
    shapes = [([n1, n0], "float32"), ([n1], "float32"), ([n1, n0], "float32")]
    return notebook_inputs(shapes, [n1, n0], seed), scalars


def ref_kernel(args, kwargs):
    return (spec(*as_double(args)),)
