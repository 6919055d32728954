"""Reading the configuration files: `load_task` (one task.yaml), `discover_tasks` (every task folder) and
`load_config` (config.yaml, checked against the tasks when they are given). Every key is declared and typed in
grader/config/files.py; loading fails with a `ConfigError` that names the file and the key."""

from __future__ import annotations

import ast
import datetime as _dt
import difflib
from pathlib import Path
from typing import Any

import yaml

from grader.config.course import SANDBOX_LIMITS, STALL_S, TIMEOUT_S, CourseConfig, Homework, SandboxConfig
from grader.config.files import CourseFile, GradingFile, LatePolicyFile, SandboxLimitsFile, TaskFile, validate
from grader.config.task import (
    AUTOTUNE_TEST,
    CASE_RESERVED_KEYS,
    CLOCKS,
    DEVICES,
    GATES,
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
from grader.protocol.torch_ops import DEFAULT_ALLOW, GROUPS

ROOT = Path(__file__).resolve().parents[2]
"""The repository root: tasks/, reference/ and config.yaml live here."""


class ConfigError(ValueError):
    """A configuration file is missing a key or has a bad value; the message says which file and key."""


def _need(data: dict, key: str, where: str, kind: type | tuple[type, ...] | None = None) -> Any:
    if not isinstance(data, dict) or key not in data:
        raise ConfigError(f"{where}: missing key '{key}'")
    value = data[key]
    if kind is not None and not isinstance(value, kind):
        raise ConfigError(f"{where}: key '{key}' must be {_kind_name(kind)}, got {type(value).__name__} {value!r}")
    return value


def _kind_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(k.__name__ for k in kinds)


def _load_yaml(path: Path) -> dict:
    try:
        data = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"{path}: file not found") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping")
    return data


def load_task(folder: Path) -> TaskSpec:
    """Parse and validate `folder/task.yaml`."""
    path = folder / "task.yaml"
    data = _load_yaml(path)
    where = str(path)
    # Every key declared and typed (grader/config/files.py): what follows reads the model and checks only what
    # spans keys (ids, names, files on disk) and the free-form cases.
    tf = validate(TaskFile, data, where, ConfigError)
    task_id = tf.id
    if task_id != folder.name:
        raise ConfigError(f"{where}: id '{task_id}' must equal the folder name '{folder.name}'")

    functions = {name: list(params) for name, params in (tf.functions or {}).items()}
    kernels = {name: KernelSpec(name=name, params=list(k.params), min_configs=k.min_configs)
               for name, k in (tf.kernels or {}).items()}
    outputs = [OutputSpec(name=o.name, dtype=o.dtype, compare=o.compare, window=o.window, rtol=o.rtol, atol=o.atol,
                          from_kernel=o.from_kernel, scalar=o.scalar) for o in tf.outputs]

    cases, seen = [], set()
    for i, raw in enumerate(_need(data, "cases", where, list)):
        cw = f"{where}: cases[{i}]"
        case_id = _need(raw, "id", cw, str)
        if case_id in seen or case_id in (*GATES, AUTOTUNE_TEST):
            raise ConfigError(f"{cw}: duplicate or reserved case id '{case_id}'")
        seen.add(case_id)
        visibility = raw.get("visibility", "public")
        if visibility not in VISIBILITIES:
            raise ConfigError(f"{cw}: visibility must be one of {', '.join(VISIBILITIES)}, got {visibility!r}")
        cases.append(
            Case(
                id=case_id,
                points=float(_need(raw, "points", cw, (int, float))),
                params={k: v for k, v in raw.items() if k not in CASE_RESERVED_KEYS},
                cpu=dict(raw.get("cpu") or {}),
                visibility=visibility,
            )
        )

    wrong = {file: WrongSpec(file=file, why=w.why, fails=list(w.fails), diagnosis=w.diagnosis or "",
                             fails_on={d: list(p) for d, p in w.fails_on.items()})
             for file, w in (tf.wrong or {}).items()}

    launch = None
    if data.get("launch") is not None:
        lw = f"{where}: launch"
        raw = _need(data, "launch", where, dict)
        grid = []
        for axis in _need(raw, "grid", lw, list):
            parts = str(axis).split("/")
            if len(parts) != 2 or not all(p.strip().isidentifier() for p in parts):
                raise ConfigError(f"{lw}.grid: each axis is 'SIZE/BLOCK' (two names), got {axis!r}")
            grid.append((parts[0].strip(), parts[1].strip()))
        tiles = []
        for axis in raw.get("tiles") or []:
            pair = tuple(p.strip() for p in str(axis).split("/"))
            if axis is not None and pair not in grid:
                raise ConfigError(f"{lw}.tiles: each entry is null or one of the grid's axes, got {axis!r}")
            tiles.append(None if axis is None else pair)
        launch = LaunchSpec(kernel=_need(raw, "kernel", lw, str), grid=grid, tiles=tiles,
                            env={str(k): str(v) for k, v in (raw.get("env") or {}).items()})
        if launch.kernel not in kernels:
            raise ConfigError(f"{lw}.kernel: '{launch.kernel}' must be listed under kernels")
    entry = launch.kernel if launch and "entry" not in data else _need(data, "entry", where, str)
    perf = _load_perf(data.get("perf"), folder, where, seen)

    task = TaskSpec(
        id=task_id,
        title=tf.title,
        folder=folder,
        entry=entry,
        allowed_imports=list(tf.allowed_imports),
        functions=functions,
        kernels=kernels,
        reference=tf.reference,
        outputs=outputs,
        cases=cases,
        autotune_points=float(tf.autotune_points),
        timeout_s=dict(tf.timeout_s or {}),
        wrong=wrong,
        specialize=tf.specialize,
        launch=launch,
        pictures=tf.pictures,
        perf=perf,
        torch_ops=_torch_ops(data.get("torch_ops"), where),
        python_reads=tf.python_reads,
        withheld=Withheld(**tf.withheld.model_dump()) if tf.withheld else None,
        right=sorted(p.name for p in (folder / "right").glob("*.py")),
    )
    if launch and task.entry != launch.kernel:
        raise ConfigError(f"{where}: with launch, entry (if given) must be the launched kernel '{launch.kernel}'")
    if not launch and task.entry not in task.functions:
        raise ConfigError(f"{where}: entry '{task.entry}' must be listed under functions")
    for out in task.outputs:
        if out.scalar and out.compare == "rounded":
            raise ConfigError(f"{where}: output {out.name}: scalar applies to exact and close outputs")
    on_disk = {p.name for p in (folder / "wrong").glob("*.py")}
    if on_disk != set(wrong):
        raise ConfigError(
            f"{where}: 'wrong' must describe exactly the files in wrong/ "
            f"(undescribed: {sorted(on_disk - set(wrong))}, missing: {sorted(set(wrong) - on_disk)})"
        )
    return task


def _torch_ops(raw: Any, where: str) -> tuple[str, ...]:
    """The `torch_ops` list: groups of grader/protocol/torch_ops.py and op names (ATen names: abs, amax, round, ...)."""
    if raw is None:
        return DEFAULT_ALLOW
    if not isinstance(raw, list) or not all(isinstance(x, str) and x.isidentifier() for x in raw):
        raise ConfigError(f"{where}: torch_ops must be a list of op groups ({', '.join(sorted(GROUPS))}, scalar) "
                          f"and op names, got {raw!r}")
    return tuple(raw)


def _load_perf(raw: Any, folder: Path, where: str, case_ids: set[str]) -> list[PerfTest]:
    """The `perf` block: shared settings (baseline, threshold, devices, warmup, reps, clock) and its tests."""
    if raw is None:
        return []
    pw = f"{where}: perf"
    if not isinstance(raw, dict):
        raise ConfigError(f"{pw}: must be a mapping")
    unknown = set(raw) - PERF_KEYS
    if unknown:
        raise ConfigError(f"{pw}: unknown key(s) {sorted(unknown)}; known: {sorted(PERF_KEYS)}")
    baseline = _need(raw, "baseline", pw, str)
    if "/" in baseline or not (folder / baseline).is_file():
        raise ConfigError(f"{pw}.baseline: no file {baseline!r} in {folder}")
    threshold = float(_need(raw, "threshold", pw, (int, float)))
    devices = tuple(raw.get("devices") or ("cuda",))
    if not set(devices) <= set(DEVICES):
        raise ConfigError(f"{pw}.devices: must be a list of {' / '.join(DEVICES)}, got {list(devices)}")
    warmup, reps = int(raw.get("warmup", 10)), int(raw.get("reps", 50))
    if warmup < 1 or reps < 5:
        raise ConfigError(f"{pw}: warmup must be >= 1 and reps >= 5 (a median of a few runs is noise)")
    clock = raw.get("clock", "gpu")
    if clock not in CLOCKS:
        raise ConfigError(f"{pw}.clock: must be one of {' / '.join(CLOCKS)}, got {clock!r}")
    tests, seen = [], set()
    for i, t in enumerate(_need(raw, "tests", pw, list)):
        tw = f"{pw}.tests[{i}]"
        test_id = _need(t, "id", tw, str)
        if test_id in seen or test_id in case_ids or test_id in (*GATES, AUTOTUNE_TEST):
            raise ConfigError(f"{tw}: duplicate or reserved test id '{test_id}'")
        case = _need(t, "case", tw, str)
        if case not in case_ids:
            raise ConfigError(f"{tw}: case '{case}' is not one of the task's cases")
        seen.add(test_id)
        tests.append(PerfTest(id=test_id, points=float(_need(t, "points", tw, (int, float))), case=case,
                              baseline=baseline, threshold=threshold, devices=devices, warmup=warmup, reps=reps,
                              clock=clock))
    return tests


def discover_tasks(root: Path = ROOT) -> tuple[dict[str, TaskSpec], dict[str, str]]:
    """Every folder of tasks/ with a task.yaml: (valid tasks by id, error message by folder name).

    One broken task folder does not stop the grading of the others; the CLI reports it.
    """
    tasks, broken = {}, {}
    for path in sorted((root / "tasks").glob("*/task.yaml")):
        try:
            tasks[path.parent.name] = load_task(path.parent)
        except ConfigError as exc:
            broken[path.parent.name] = str(exc)
    return tasks, broken


def _sandbox(value: bool | SandboxLimitsFile | None) -> SandboxConfig:
    if value is None or isinstance(value, bool):
        return SandboxConfig(enabled=value is not False)
    limits = {k: getattr(value, k) for k in SANDBOX_LIMITS if getattr(value, k) is not None}
    return SandboxConfig(enabled=value.enabled, limits=limits)


def tasks_dir_has(task_id: str, root: Path = ROOT) -> bool:
    return (root / "tasks" / task_id / "task.yaml").is_file()


def _per_device(given: dict[str, float], defaults: dict[str, float]) -> dict[str, float]:
    """Seconds per device (cuda, cpu), over their defaults."""
    return {**defaults, **{k: float(v) for k, v in given.items()}}


def _deadline(raw: str | _dt.datetime | None, where: str) -> _dt.datetime | None:
    if raw is None:
        return None
    if isinstance(raw, _dt.datetime):
        deadline = raw
    else:
        try:
            deadline = _dt.datetime.fromisoformat(str(raw))
        except ValueError:
            raise ConfigError(f"{where}.deadline: not an ISO 8601 time: {raw!r}") from None
    if deadline.tzinfo is None:
        raise ConfigError(f"{where}.deadline: give a UTC offset, e.g. +03:00")
    return deadline


def _check_course_tasks(cfg: CourseConfig, tasks: dict[str, TaskSpec], where: str) -> None:
    """Every homework's tasks exist, its speed points name the tasks' speed tests, and its points are the
    tasks' totals as the course grades them (speed points included)."""
    graded = cfg.course_tasks(tasks)
    for hw_id, hw in cfg.homeworks.items():
        hw_where = f"{where}: homeworks.{hw_id}"
        for task_id, tests in hw.speed_points.items():
            if task_id not in hw.tasks:
                raise ConfigError(f"{hw_where}.speed_points.{task_id}: not one of this homework's tasks")
            task = tasks.get(task_id)
            unknown = set(tests) - {p.id for p in task.perf} if task else set()
            if unknown:
                raise ConfigError(f"{hw_where}.speed_points.{task_id}: {sorted(unknown)} not among the task's speed "
                                  f"tests ({', '.join(p.id for p in task.perf) or 'none'})")
        for entry in hw.leaderboard or []:
            task_id, test = entry.split("/", 1)
            if task_id not in hw.tasks or (task_id in tasks and test not in {p.id for p in tasks[task_id].perf}):
                raise ConfigError(f"{hw_where}.leaderboard: {entry!r} is not a speed test of this homework's tasks")
        for task_id, points in hw.tasks.items():
            if task_id not in tasks and tasks_dir_has(task_id):
                continue  # the folder exists but is broken: discover_tasks reported it
            if task_id not in tasks:
                guess = difflib.get_close_matches(task_id, list(tasks), n=1, cutoff=0.6)
                raise ConfigError(f"{hw_where}.tasks: no folder tasks/{task_id}"
                                  + (f"; did you mean {guess[0]}?" if guess else ""))
            total = graded[task_id].points  # leaving out 0-point speed tests changes no total
            if abs(total - points) > 1e-9:
                raise ConfigError(
                    f"{hw_where}.tasks.{task_id}: {points} points here, but tasks/{task_id}/task.yaml "
                    f"adds up to {total}"
                )


def load_config(path: Path = ROOT / "config.yaml", tasks: dict[str, TaskSpec] | None = None) -> CourseConfig:
    """Parse `config.yaml` (grader/config/files.py CourseFile says every key); when `tasks` is given, check that
    every homework's tasks exist with those points. `tasks` is not changed: `cfg.course_tasks(tasks)` gives them
    as the course grades them."""
    data = _load_yaml(path)
    where = str(path)
    course = validate(CourseFile, data, where, ConfigError)
    grading = course.grading or GradingFile()
    homeworks = {}
    for hw_id, raw in course.homeworks.items():
        hw_where = f"{where}: homeworks.{hw_id}"
        late = raw.late_policy or LatePolicyFile()
        homeworks[hw_id] = Homework(
            id=hw_id,
            title=raw.title or hw_id,
            tasks={str(k): float(v) for k, v in raw.tasks.items()},
            deadline=_deadline(raw.deadline, hw_where),
            max_attempts=raw.max_attempts,
            late_penalty_per_day=late.penalty_per_day,
            late_max_days=late.max_days,
            counts=raw.counts,
            speed_points={str(t): {str(k): float(v) for k, v in tests.items()}
                          for t, tests in (raw.speed_points or {}).items()},
            leaderboard=list(raw.leaderboard) if raw.leaderboard is not None else None,
            leaderboard_names=raw.leaderboard_names,
            canvas_assignment_id=raw.canvas.assignment_id if raw.canvas else None,
        )
    cfg = CourseConfig(
        course=course.course,
        device=grading.device,
        timeout_s=_per_device(grading.timeout_s, TIMEOUT_S),
        stall_s=_per_device(grading.stall_s, STALL_S),
        workers=grading.workers,
        judges=-1 if grading.judges == "auto" else grading.judges,
        fork_server=grading.fork_server,
        specialize=grading.specialize,
        results_dir=grading.results_dir,
        sandbox=_sandbox(grading.sandbox),
        gpu_compile=grading.gpu_compile,
        compile_processes=0 if grading.compile_processes == "auto" else grading.compile_processes,
        bounds=grading.bounds,
        writes=grading.writes,
        provenance=grading.provenance,
        informational_speed=grading.informational_speed,
        always_allowed_imports=list(course.always_allowed_imports),
        homeworks=homeworks,
        toolchain=course.toolchain.model_dump() if course.toolchain else {},
    )
    if tasks is not None:
        _check_course_tasks(cfg, tasks, where)
    return cfg


def reference_modules(tasks: dict[str, TaskSpec], root: Path = ROOT) -> list[str]:
    """The `reference/` modules the tasks' oracles need: each task's module and what it imports from
    `reference.`, transitively (read from the source, never imported)."""
    needed, todo = set(), [t.reference for t in tasks.values()]
    while todo:
        name = todo.pop()
        if name in needed:
            continue
        needed.add(name)
        tree = ast.parse((root / "reference" / f"{name}.py").read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("reference."):
                todo.append(node.module.split(".", 1)[1])
            elif isinstance(node, ast.ImportFrom) and node.module == "reference":
                todo += [a.name for a in node.names]
            elif isinstance(node, ast.Import):
                todo += [a.name.split(".", 1)[1] for a in node.names if a.name.startswith("reference.")]
    return sorted(needed)
