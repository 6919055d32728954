"""Which torch and triton graded a result, against the ones the course grades with (config.yaml `toolchain`).

A verdict can depend on the toolchain: a task-12 kernel written with `tl.make_block_ptr` earns full marks under
triton 3.6 (the H100 box) and nothing under triton 3.9 (CI, a laptop's kit), which raises NotImplementedError for
block pointers. So every result graded with other versions than the course's says so, in the student's report,
the student and staff JSON and Gradescope's output. A test that failed on an API one supported version lacks
says so in its own message: the worker names the API from a table (grader/protocol/known_errors.py) and the
judge words it (grader/judge/known_errors.py). The versions compared are the trusted side's own (the workers run
the same interpreter): nothing here reads a worker's word.
"""

from __future__ import annotations

from dataclasses import replace

from grader.protocol.known_errors import release, same_release
from grader.results import TaskResult

GUIDE = "docs/course-staff.md: Toolchain"
__all__ = ["annotate", "differences", "note", "release", "same_release"]


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


def annotate(result: TaskResult, course: dict[str, str]) -> TaskResult:
    """`result` with the course's toolchain and, where it differs, a note in its environment."""
    env = dict(result.environment)
    if course:
        env["course_toolchain"] = dict(course)
        line = note(env, course)
        if line:
            env["toolchain_note"] = line
    return replace(result, environment=env)
