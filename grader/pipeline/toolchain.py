"""Which torch and triton graded a result, against the ones the course grades with (config.yaml `toolchain`).

A verdict can depend on the toolchain: a task-12 kernel written with `tl.make_block_ptr` earns full marks under
triton 3.6 (the H100 box) and nothing under triton 3.9 (CI, a laptop's kit), which raises NotImplementedError for
block pointers. So every result graded with other versions than the course's says so, in the student's report,
the student and staff JSON and Gradescope's output; and a test that failed with an error that one of the
supported versions raises and the other does not (`KNOWN`) says which versions differ and what to write instead.
The versions compared are the trusted side's own (the workers run the same interpreter): nothing here reads a
worker's word.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from grader.results import TaskResult
from grader.results.outcome import Outcome

GUIDE = "README: Toolchain"
FAILING = (Outcome.FAILED.label, Outcome.ERROR.label)


@dataclass(frozen=True)
class ApiDifference:
    """An API that one supported triton version has and another raises on, as a failing test shows it."""

    api: str
    """What a student writes."""
    error: str
    """Text of the error the version without it raises (matched in a failing test's message)."""
    works_with: tuple[str, ...]
    """Triton releases where it works (each names its patch releases too: `3.6` is every 3.6.x)."""
    instead: str
    """What works on every supported version."""


KNOWN: tuple[ApiDifference, ...] = (
    ApiDifference(api="block pointers (tl.make_block_ptr, tl.advance)",
                  error="Block pointers have been removed",
                  works_with=("3.6",),
                  instead="pointer arithmetic: offsets from tl.arange and a mask for the edges"),
)
"""Known differences between the triton versions the grader supports (3.6 on the GPU box, 3.9 in CI and the
kits). README's toolchain table has a row for each."""


def release(version: str | None) -> tuple[int, ...]:
    """The numeric release of a version string: `2.11.0+cu130` -> (2, 11, 0), `3.9.0` -> (3, 9, 0)."""
    found = re.match(r"\d+(?:\.\d+)*", str(version or ""))
    return tuple(int(p) for p in found.group(0).split(".")) if found else ()


def same_release(installed: str | None, named: str) -> bool:
    """True when `installed` is the release `named` names (`3.6` names every 3.6.x; `3.6.0` only 3.6.0)."""
    want = release(named)
    return bool(want) and release(installed)[:len(want)] == want


def differences(environment: dict, course: dict[str, str]) -> dict[str, tuple[str, str]]:
    """package -> (installed, the course's) for each of torch and triton whose release differs."""
    return {name: (str(environment.get(name)), want) for name, want in course.items()
            if not same_release(environment.get(name), want)}


def note(environment: dict, course: dict[str, str]) -> str:
    """One line for a result graded with other versions than the course's; "" when they agree (or the course
    names none)."""
    differ = differences(environment, course)
    if not differ:
        return ""
    graded = ", ".join(f"{name} {have}" for name, (have, _) in differ.items())
    theirs = ", ".join(f"{name} {want}" for name, (_, want) in differ.items())
    return (f"graded with {graded}; the course grades with {theirs}: where these versions differ, so may a verdict "
            f"({GUIDE})")


def explain(message: str, triton_version: str | None) -> str:
    """The line a failing test's `message` gains when a known API difference caused it, naming the versions."""
    for diff in KNOWN:
        if diff.error in message and not any(same_release(triton_version, v) for v in diff.works_with):
            return (f"triton {triton_version} has no {diff.api}: they work with triton {' and '.join(diff.works_with)} "
                    f"only. To pass on every supported version, use {diff.instead} ({GUIDE}).")
    return ""


def annotate(result: TaskResult, course: dict[str, str]) -> TaskResult:
    """`result` with the course's toolchain and, where it differs, a note in its environment, and each failing
    test that a known API difference explains with a line that names the versions."""
    env = dict(result.environment)
    if course:
        env["course_toolchain"] = dict(course)
        line = note(env, course)
        if line:
            env["toolchain_note"] = line
    tests = []
    for t in result.tests:
        extra = explain(t.message or "", env.get("triton")) if t.outcome in FAILING else ""
        tests.append(replace(t, message=f"{t.message}\n{extra}") if extra and extra not in t.message else t)
    return replace(result, environment=env, tests=tests)
