"""What the runner saw of one worker run (`WorkerRun`): the runner's half of the runner/judge contract."""

from __future__ import annotations

import signal
from dataclasses import dataclass, field
from pathlib import Path

from grader.protocol.records import RecordStream


@dataclass
class WorkerRun:
    """What the runner saw of one worker run, for the judge: where its record stream is, how it ended. The
    runner's half of the runner/judge contract (the judge never starts or supervises a worker)."""

    records: Path | None
    """The run's record stream, in the job's trusted folder (None: no worker was started)."""
    returncode: int | None
    timed_out: bool
    seconds: float
    log: str
    run_id: str = "0-0"
    cases: list[int] = field(default_factory=list)
    crashed: dict[int, str] = field(default_factory=dict)
    """Case index -> how the worker died while running it (the runner's word: the worker wrote no record)."""
    perf: bool = False
    """A timing worker's run (speed tests, no cases)."""
    sees_hidden: bool = False
    """Whether the run held the inputs of a case that is not public (its LOAD report is used for messages only
    when no run of the job held none)."""
    problem: str = ""
    """Why the runner could not start or supervise the worker (a grader error: fails this job only)."""
    stalled_s: float = 0.0
    """Set when the worker was stopped for making no progress: the stall limit it exceeded."""
    quiet_s: float = 0.0
    """The longest stretch without a progress report, as the runner saw it (with a stall limit only): what a
    right worker needs of `grading.stall_s` (scripts/bench_class.py reports it over a class)."""
    stopped: str = ""
    """Set when the grader stopped the worker because nothing it could still record would change a verdict
    (a timing worker whose speed tests' cases had failed meanwhile): why, in the grader's words."""
    limit_s: float = 0.0
    """The time limit the worker ran under (0: not known)."""
    node: str = ""
    """The Ray node the worker ran on (the Ray backend; "" for a local worker)."""
    started_s: float | None = 0.0
    """Seconds from its spawn to its first record, after which both limits count (None: it never wrote one)."""

    def status(self) -> dict:
        """The run's last progress report (empty if none)."""
        return RecordStream(self.records).status if self.records else {}

    def describe_exit(self) -> str:
        if self.problem:
            return f"the grader could not run the worker ({self.problem})"
        if self.stopped:
            return f"the grader stopped the worker after {self.seconds:.0f} s: {self.stopped}"
        if self.stalled_s:
            return (f"the worker was stopped after {self.seconds:.0f} s: it made no progress for "
                    f"{self.stalled_s:.0f} s (grading.stall_s)")
        if self.timed_out and self.started_s is None:
            return (f"the worker did not start within {self.limit_s or self.seconds:.0f} s (the grader's start-up, "
                    f"before the submission was read)")
        if self.timed_out:
            return f"the worker was stopped at its time limit ({self.limit_s or self.seconds:.0f} s)"
        if self.returncode is not None and self.returncode < 0:
            try:
                name = signal.Signals(-self.returncode).name
            except ValueError:
                name = f"signal {-self.returncode}"
            return f"the worker was killed by {name}"
        return f"the worker exited with code {self.returncode}"
