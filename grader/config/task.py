"""A task as the grader reads it from `tasks/<id>/task.yaml` (`TaskSpec`), with its cases, outputs, kernels,
launch, wrong files and speed tests, and the names a task's tests may not take."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from grader.protocol.torch_ops import DEFAULT_ALLOW

DEVICES = ("cuda", "cpu")
GATES = ("imports", "signatures")
AUTOTUNE_TEST = "autotune"
CASE_RESERVED_KEYS = {"id", "points", "cpu", "visibility"}
VISIBILITIES = ("public", "hidden", "after_due_date")
"""Who sees a case's test and when: `public` (default; in the student kit, every message shown), `hidden` (only
staff grading runs it; students see passed or failed, never the case), `after_due_date` (as hidden until the
deadline; Gradescope then shows it)."""
GRADESCOPE_VISIBILITY = {"public": "visible", "hidden": "hidden", "after_due_date": "after_due_date"}
PERF_KEYS = {"baseline", "threshold", "devices", "warmup", "reps", "clock", "tests"}
CLOCKS = ("gpu", "wall")


@dataclass(frozen=True)
class OutputSpec:
    """One returned tensor and how it is compared with the oracle."""

    name: str
    dtype: str
    """int8 | int32 | float16 | float32 | bfloat16, or 'like:<i>' for the dtype of input argument i."""
    compare: str = "exact"
    """exact | rounded (integer codes of a real value, see `window`) | close (see rtol, atol)."""
    window: float = 1e-3
    rtol: float = 0.0
    atol: float = 0.0
    from_kernel: bool = True
    """The tensor must have been passed to a Triton kernel launched during the call."""
    scalar: bool = False
    """The statement calls it a scalar: shape () and (1,) are both right (the oracle returns one element)."""

    def shape_ok(self, got: tuple[int, ...], expected: tuple[int, ...]) -> bool:
        if self.scalar:
            return got in ((), (1,))
        return got == expected

    def shape_wanted(self, expected: tuple[int, ...]) -> str:
        return "a scalar: shape [] or [1]" if self.scalar else str(list(expected))


@dataclass(frozen=True)
class Case:
    id: str
    points: float
    params: dict[str, Any]
    """Arguments of the oracle's generate_input (CUDA sizes)."""
    cpu: dict[str, Any] = field(default_factory=dict)
    """Overrides of `params` for the CPU interpreter."""
    visibility: str = "public"
    """public | hidden | after_due_date (VISIBILITIES): the student kit ships only public cases."""

    def params_for(self, device: str) -> dict[str, Any]:
        return {**self.params, **self.cpu} if device == "cpu" else dict(self.params)


@dataclass(frozen=True)
class KernelSpec:
    name: str
    params: list[str]
    min_configs: int = 0
    """0: any @triton.jit kernel; N > 0: @triton.autotune with at least N configs."""


@dataclass(frozen=True)
class LaunchSpec:
    """The harness launches the task's kernel itself (no wrapper function): pointers first, in the order the
    oracle's generate_input returns the tensors (inputs, then one buffer per output, filled with poison), then the
    case's sizes and block sizes as keyword arguments, only those the kernel declares."""

    kernel: str
    grid: list[tuple[str, str]]
    """Per grid axis (size, block): cdiv(size, block), a name missing from the case counting as 1."""
    tiles: list[tuple[str, str] | None] = field(default_factory=list)
    """Per output dimension, the grid axis (its SIZE/BLOCK pair) whose programs walk it, or None: pictures label
    the tiles with a problem with the program id that owns them."""
    env: dict[str, str] = field(default_factory=dict)
    """Environment of the worker (e.g. TRITON_F32_DEFAULT=ieee, so tl.dot on CUDA is as exact as the interpreter)."""


@dataclass(frozen=True)
class WrongSpec:
    file: str
    why: str
    fails: list[str]
    """fnmatch patterns over test names ('!pattern' excludes); the failing tests must be exactly the matches."""
    diagnosis: str = ""
    """Text the result's diagnosis line must contain (grader/judge/diagnosis.py), checked by selftest; "" none."""
    fails_on: dict[str, list[str]] = field(default_factory=dict)
    """Per device, more patterns that hold there only: a mistake that a case shows at its CUDA sizes and hides at
    its smaller `cpu:` ones (task 12's bias_after_round.py: 9 of large_pc_bias's 4.2 million elements on CUDA)."""

    def expected_failures(self, test_names: list[str], device: str | None = None) -> set[str]:
        """The tests it must fail; on `device`, with that device's `fails_on` patterns too (None: `fails` alone)."""
        patterns = [*self.fails, *self.fails_on.get(device, [])] if device else self.fails
        include = [p for p in patterns if not p.startswith("!")]
        exclude = [p[1:] for p in patterns if p.startswith("!")]
        return {t for t in test_names
                if any(fnmatch.fnmatchcase(t, p) for p in include)
                and not any(fnmatch.fnmatchcase(t, p) for p in exclude)}

    def unmatched(self, test_names: list[str]) -> list[str]:
        """Its patterns (`fails` and every device's `fails_on`, exclusions too) that match none of `test_names`: a
        typo that declares nothing (`tasks --check`)."""
        patterns = [*self.fails, *(p for device in sorted(self.fails_on) for p in self.fails_on[device])]
        return [p for p in patterns if not any(fnmatch.fnmatchcase(t, p.removeprefix("!")) for t in test_names)]


@dataclass(frozen=True)
class PerfTest:
    """A speed test: the submission against a staff baseline on one case's inputs, timed in the same worker.

    It passes when the case passes, the timed calls' outputs are right, the baseline ran as fast beside the
    submission as in the staff's own timing run (grader/judge/speed.py STAFF_SLACK), and baseline / submission >=
    threshold (medians). A test worth 0 points is informational: the threshold is reported, not applied. It runs only on
    `devices`; elsewhere it is reported as not run, with 0 of 0 points."""

    id: str
    points: float
    case: str
    """The case whose inputs are timed; its correctness test must pass too."""
    baseline: str
    """A file in the task folder defining the same entry function (staff code, trusted)."""
    threshold: float = 1.0
    devices: tuple[str, ...] = ("cuda",)
    warmup: int = 10
    """Untimed calls of each side first (compilation, autotuning)."""
    reps: int = 50
    """Timed calls of each side, interleaved; the verdict uses the medians."""
    clock: str = "gpu"
    """What a call's time is on CUDA: "gpu", the span of its GPU work over all streams (first kernel start to last
    kernel end, from the profiler), or "wall", the host clock from the call to the synchronize after it, which also
    counts the Python before the first launch. On the CPU it is always the host clock."""


@dataclass(frozen=True)
class Withheld:
    """What a released copy of a task leaves out (task.yaml `withheld`, written by `python -m grader release`):
    the student is told these tests exist and are graded after submission."""

    cases: int = 0
    """Cases that are not public (hidden or after_due_date)."""
    speed_tests: int = 0
    """Speed tests (their staff baseline stays with the staff)."""
    points: float = 0.0

    def sentence(self) -> str:
        parts = [f"{n} {what}{'s' if n != 1 else ''}" for n, what in
                 ((self.cases, "hidden case"), (self.speed_tests, "speed test")) if n]
        return (f"not in this kit: {' and '.join(parts)} ({self.points:g} point(s)), graded after you submit "
                f"(the score here is out of the public points)")


@dataclass(frozen=True)
class TaskSpec:
    id: str
    title: str
    folder: Path
    entry: str
    allowed_imports: list[str]
    functions: dict[str, list[str]]
    kernels: dict[str, KernelSpec]
    reference: str
    outputs: list[OutputSpec]
    cases: list[Case]
    autotune_points: float = 0.0
    timeout_s: dict[str, float] = field(default_factory=dict)
    wrong: dict[str, WrongSpec] = field(default_factory=dict)
    specialize: bool | None = None
    """Overrides config.yaml's grading.specialize for this task's cases (speed tests always specialize)."""
    pictures: bool = False
    """Draw a PNG of the output for each failing case (grader/judge/pictures.py)."""
    launch: LaunchSpec | None = None
    """Set when the harness launches `launch.kernel` itself (see LaunchSpec); `entry` is then that kernel."""
    perf: list[PerfTest] = field(default_factory=list)
    torch_ops: tuple[str, ...] = DEFAULT_ALLOW
    """The torch work the task's wrapper may do: groups and op names (grader/protocol/torch_ops.py); anything else on
    data of the output's size fails the call."""
    python_reads: int = 0
    """Elements of input data a call may hand to Python (`.item()`, `.tolist()`, `int(t)` of an input element or a
    copy of one; grader/protocol/torch_ops.py READS); past it, the call fails whatever the size of the outputs."""
    withheld: Withheld | None = None
    """In a released copy (the student kit): the tests left out, which still count in `points`."""
    right: list[str] = field(default_factory=list)
    """Files in right/: other correct ways of writing the answer, each of which must earn full marks (selftest)."""

    @property
    def points(self) -> float:
        """The task's points where every test runs (what config.yaml states), withheld tests included."""
        held = self.withheld.points if self.withheld else 0.0
        return round(self.autotune_points + sum(c.points for c in self.cases) + sum(p.points for p in self.perf)
                     + held, 6)

    def points_on(self, device: str) -> float:
        """The most a submission can earn on `device`: tests not run there (or withheld) count neither way."""
        return round(sum(self.test_points(device).values()), 6)

    @property
    def has_autotune_test(self) -> bool:
        """Whether the task grades autotuning: a kernel that must be autotuned, or points for it. A task with
        neither (the puzzles) has no autotune test: it used to show one, failing whenever no case passed."""
        return bool(self.autotuned_kernels) or self.autotune_points > 0

    @property
    def test_names(self) -> list[str]:
        return [*GATES, *([AUTOTUNE_TEST] if self.has_autotune_test else []), *(c.id for c in self.cases),
                *(p.id for p in self.perf)]

    def visibility(self, test_name: str) -> str:
        """A test's visibility (VISIBILITIES): its case's, or public for the gates, autotune and speed tests."""
        return next((c.visibility for c in self.cases if c.id == test_name), "public")

    def case_index(self, case_id: str) -> int:
        """The position of case `case_id` among the task's cases."""
        return next(i for i, c in enumerate(self.cases) if c.id == case_id)

    def subset(self, case_ids: list[str] | set[str], **changes: Any) -> TaskSpec:
        """This task with only the cases `case_ids` (and the speed tests that time one of them), and `changes`."""
        return replace(self, cases=[c for c in self.cases if c.id in case_ids],
                       perf=[p for p in self.perf if p.case in case_ids], **changes)

    def not_run_on(self, device: str) -> set[str]:
        """Tests that are reported as not run on `device` (speed tests outside their devices)."""
        return {p.id for p in self.perf if device not in p.devices}

    def test_points(self, device: str | None = None) -> dict[str, float]:
        """Points per test; with a device, 0 for the tests not run there."""
        skip = self.not_run_on(device) if device else set()
        autotune = {AUTOTUNE_TEST: self.autotune_points} if self.has_autotune_test else {}
        return {**{g: 0.0 for g in GATES}, **autotune, **{c.id: c.points for c in self.cases},
                **{p.id: 0.0 if p.id in skip else p.points for p in self.perf}}

    @property
    def autotuned_kernels(self) -> list[KernelSpec]:
        return [k for k in self.kernels.values() if k.min_configs > 0]
