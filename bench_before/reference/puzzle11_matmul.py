"""Puzzle 11: a batched matrix product, z[b] = x[b] @ y[b], x of shape (N2, N0, MID) and y of (N2, MID, N1)."""

from reference._puzzles import as_double, notebook_inputs


def spec(x, y):
    return x @ y


def generate_input(seed: int = 0, **scalars):
    n0, n1, n2, mid = (scalars[k] for k in ("N0", "N1", "N2", "MID"))
    return notebook_inputs([([n2, n0, mid], "float32"), ([n2, mid, n1], "float32")], [n2, n0, n1], seed), scalars


def ref_kernel(args, kwargs):
    return (spec(*as_double(args)),)
