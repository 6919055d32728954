"""Helpers shared by the oracles."""

from __future__ import annotations

import torch

DTYPES = {"float16": torch.float16, "float32": torch.float32, "bfloat16": torch.bfloat16}


def generator(seed: int) -> torch.Generator:
    """A CPU generator: the same seed gives the same inputs on every machine and device."""
    return torch.Generator().manual_seed(int(seed))


def randn(shape: list[int], dtype: str, seed: int, scale: float = 1.0) -> torch.Tensor:
    """Normal floats, drawn in float32 on the CPU and then cast (so fp16 and fp32 cases share values)."""
    return (torch.randn(*shape, generator=generator(seed)) * scale).to(DTYPES[dtype])


def randint8(shape: list[int], seed: int) -> torch.Tensor:
    """Uniform int8 codes in [-127, 127] (symmetric quantization never produces -128)."""
    return torch.randint(-127, 128, tuple(shape), generator=generator(seed), dtype=torch.int8)


def hidden(name: str):
    """A hidden case's value pattern or layout, from reference/_hidden.py, which the student kit does not have.
    Imported by name (not by an import statement), so `release` never counts it among what a kit needs."""
    import importlib

    try:
        module = importlib.import_module("reference._hidden")
    except ImportError:
        raise ValueError(f"{name!r} belongs to a hidden case, graded after you submit") from None
    if not hasattr(module, name):
        raise ValueError(f"unknown pattern {name!r}")
    return getattr(module, name)
