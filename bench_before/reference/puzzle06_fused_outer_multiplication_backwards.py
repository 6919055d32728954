"""Puzzle 6: the gradient of relu(x[j, i] * y[j]) with respect to x, given the upstream gradient dz."""

import torch

from reference._puzzles import as_double, notebook_inputs


def spec(x, y, dz):
    x = x.clone().requires_grad_(True)
    z = torch.relu(x * y[:, None])
    z.backward(dz)
    return x.grad


def generate_input(seed: int = 0, signed: bool = False, **scalars):
    """The notebook's inputs (torch.rand: in [0, 1), where x * y >= 0 and the ReLU never acts); with `signed`, the
    three inputs are moved to [-1, 1), so that it does."""
    n0, n1 = scalars["N0"], scalars["N1"]
    shapes = [([n1, n0], "float32"), ([n1], "float32"), ([n1, n0], "float32")]
    tensors = notebook_inputs(shapes, [n1, n0], seed)
    if signed:
        tensors[:3] = [t * 2 - 1 for t in tensors[:3]]
    return tensors, scalars


def ref_kernel(args, kwargs):
    return (spec(*as_double(args)),)
