"""Puzzle 4: z[j, i] = x[i] + y[j], over a 2-D grid of blocks."""

from reference._puzzles import as_double, notebook_inputs


def spec(x, y):
    return x[None, :] + y[:, None]


def generate_input(seed: int = 0, **scalars):
    n0, n1 = scalars["N0"], scalars["N1"]
    return notebook_inputs([([n0], "float32"), ([n1], "float32")], [n1, n0], seed), scalars


def ref_kernel(args, kwargs):
    return (spec(*as_double(args)),)
