"""What the judge works on and what it gives: a case as the judge prepared it (`CaseData`) and the verdict of one
test (`Verdict`)."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from grader.protocol import guards


@dataclass
class CaseData:
    """A case as the judge prepared it: the inputs it sent and the oracle's answer."""

    id: str
    args: list
    kwargs: dict
    expected: tuple
    twin: CaseData | None = None
    """The same case with its inputs' elements in another order, and the oracle's answer for them (the provenance
    check, grader/judge/provenance.py); None where the check is off or the harness launches the kernel."""
    _digests: dict = field(default_factory=dict, repr=False)

    def digest(self, t: torch.Tensor) -> str:
        """The sha256 of an input as sent (computed once)."""
        if id(t) not in self._digests:
            self._digests[id(t)] = guards.digest(t)
        return self._digests[id(t)]


class Caught(str):
    """A problem that shows the task's work done outside the student's kernels (the provenance, memory and write
    checks; torch work past the task's policy). A file caught so in any case earns no correctness points for the
    task: every case of it fails (grader/pipeline/result.py `GradingContext.case_verdict`)."""


@dataclass
class Verdict:
    ok: bool
    message: str = ""
    staff: str = ""
    """Tracebacks and logs: for staff only."""
    picture: bytes | None = None
    """PNG of the first failing output (tasks with `pictures: true`)."""
    note: str = ""
    """Something the student should know even when the test passes (many autotune configs make grading slow)."""
    printed: str = ""
    """What the student's code printed during the first failing call (theirs: shown to them, marked, under the
    test; it decides nothing)."""
    caught: str = ""
    """The first `Caught` problem of a failing case: why the task's correctness points are withheld."""
    metric: dict[str, float] | None = None
    """A speed test's measurement, for the leaderboard (grader/course/leaderboard.py): `speedup` over the baseline,
    `vs_reference` (that speedup over the reference's in the staff's run) and `ms` (the submission's median)."""
