"""Puzzle 2: z = x + 10, in blocks of B0 (the last one partial)."""

from reference._puzzles import as_double, notebook_inputs


def spec(x):
    return x + 10.0


def generate_input(seed: int = 0, **scalars):
    n0 = scalars["N0"]
    return notebook_inputs([([n0], "float32")], [n0], seed), scalars


def ref_kernel(args, kwargs):
    return (spec(*as_double(args)),)
