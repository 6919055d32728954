"""Checks of a submission's source before anything runs (static.py)."""
