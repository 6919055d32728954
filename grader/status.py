"""Outcomes of a test, ordered from best to worst."""

from __future__ import annotations

from enum import IntEnum


class Outcome(IntEnum):
    PASSED = 0
    FAILED = 1
    ERROR = 2
    """The grader itself failed on this test (staff see the traceback); counts as failed for the student."""

    @property
    def label(self) -> str:
        return self.name.lower()
