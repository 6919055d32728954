"""Autograder for Triton GPU-kernel homework."""

__version__ = "0.1.0"
