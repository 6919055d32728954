"""Outcomes of a test, ordered from best to worst."""

from __future__ import annotations

from enum import IntEnum


class Outcome(IntEnum):
    PASSED = 0
    NOT_RUN = 1
    """Not run on this device (a speed test on the CPU interpreter): 0 of 0 points, neither passed nor failed."""
    FAILED = 2
    ERROR = 3
    """The grader itself failed on this test (staff see the traceback); counts as failed for the student."""

    @property
    def label(self) -> str:
        return self.name.lower()
