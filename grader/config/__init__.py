"""Parsed configuration: the course (`config.yaml`) and each task (`tasks/<id>/task.yaml`).

Every key has a description and a default here; loading fails with a message that names the file and the key
when a value is missing or of the wrong kind.

What each module is for:
- `task`: a task as the grader reads it (`TaskSpec`, with `Case`, `OutputSpec`, `KernelSpec`, `LaunchSpec`,
  `WrongSpec`, `PerfTest`, `Withheld`) and the names of its tests (`GATES`, `AUTOTUNE_TEST`, `VISIBILITIES`);
- `course`: the course as the grader reads it (`CourseConfig`, with `Homework` and `SandboxConfig`) and the
  workers' default limits (`TIMEOUT_S`, `STALL_S`);
- `loading`: reading and checking the files (`load_task`, `discover_tasks`, `load_config`, `ConfigError`), the
  repository root they are found under (`ROOT`), and the `reference/` modules a task's oracle needs
  (`reference_modules`);
- `files`: every key of the two files, declared and typed (pydantic models), and `validate`.
"""

from __future__ import annotations

from grader.config.course import SANDBOX_LIMITS, STALL_S, TIMEOUT_S, CourseConfig, Homework, SandboxConfig
from grader.config.loading import (
    ROOT,
    ConfigError,
    discover_tasks,
    load_config,
    load_task,
    reference_modules,
    tasks_dir_has,
)
from grader.config.task import (
    AUTOTUNE_TEST,
    CASE_RESERVED_KEYS,
    CLOCKS,
    DEVICES,
    GATES,
    GRADESCOPE_VISIBILITY,
    PERF_KEYS,
    VISIBILITIES,
    Case,
    KernelSpec,
    LaunchSpec,
    OutputSpec,
    PerfTest,
    TaskSpec,
    Withheld,
    WrongSpec,
)

__all__ = [
    "AUTOTUNE_TEST",
    "CASE_RESERVED_KEYS",
    "CLOCKS",
    "DEVICES",
    "GATES",
    "GRADESCOPE_VISIBILITY",
    "PERF_KEYS",
    "ROOT",
    "SANDBOX_LIMITS",
    "STALL_S",
    "TIMEOUT_S",
    "VISIBILITIES",
    "Case",
    "ConfigError",
    "CourseConfig",
    "Homework",
    "KernelSpec",
    "LaunchSpec",
    "OutputSpec",
    "PerfTest",
    "SandboxConfig",
    "TaskSpec",
    "Withheld",
    "WrongSpec",
    "discover_tasks",
    "load_config",
    "load_task",
    "reference_modules",
    "tasks_dir_has",
]
