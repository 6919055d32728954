"""Parsed configuration: the course (`config.yaml`) and each task (`tasks/<id>/task.yaml`).

Every key has a description and a default here; loading fails with a message that names the file and the key
when a value is missing or of the wrong kind.
"""

from __future__ import annotations

import datetime as _dt
import difflib
import fnmatch
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from grader.config.files import CourseFile, GradingFile, LatePolicyFile, SandboxLimitsFile, TaskFile, validate
from grader.protocol.torch_ops import DEFAULT_ALLOW, GROUPS

ROOT = Path(__file__).resolve().parents[2]
"""The repository root: tasks/, reference/ and config.yaml live here."""

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


# ----------------------------------------------------------------------------------------------- task.yaml


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


# --------------------------------------------------------------------------------------------- config.yaml


@dataclass(frozen=True)
class Homework:
    id: str
    title: str
    tasks: dict[str, float]
    """task id -> points; must equal the task's own total."""
    deadline: _dt.datetime | None = None
    max_attempts: int = 0
    """0 = unlimited. A new file past the limit is not graded."""
    late_penalty_per_day: float = 1.0
    """Share of the points lost per started day after the deadline (1.0: late work earns nothing)."""
    late_max_days: int = 0
    """Days after which late work earns nothing."""
    counts: str = "best"
    """Which graded attempt the gradebook counts: best | last."""
    speed_points: dict[str, dict[str, float]] = field(default_factory=dict)
    """task id -> {speed test id: points}: what the course gives the speed tests task.yaml leaves at 0
    (CourseConfig.course_tasks applies it)."""
    leaderboard: list[str] | None = None
    """The speed tests ranked on the leaderboard, as "task/test"; None: every speed test of the homework
    (grader/course/leaderboard.py)."""
    leaderboard_names: str = "pseudonym"
    """How batch's leaderboard names students: `pseudonym` (stable, from a secret kept in the results folder) or
    `student` (their folder names: the course opts in)."""

    def ranks(self, task_id: str, test: str) -> bool:
        """Whether the leaderboard ranks this speed test."""
        return self.leaderboard is None or f"{task_id}/{test}" in self.leaderboard


@dataclass(frozen=True)
class SandboxConfig:
    """config.yaml `grading.sandbox`: `true` / `false`, or a mapping with `enabled` and any of the limits of
    grader/worker/sandbox.py's Limits (memory_mb, processes, open_files, file_size_mb, cpu_s)."""

    enabled: bool = True
    limits: dict[str, int] = field(default_factory=dict)

    def job(self) -> dict | None:
        """What a worker's job file carries: None when the sandbox is off."""
        return {"limits": dict(self.limits)} if self.enabled else None


SANDBOX_LIMITS = ("memory_mb", "processes", "open_files", "file_size_mb", "cpu_s")


def _sandbox(value: bool | SandboxLimitsFile | None) -> SandboxConfig:
    if value is None or isinstance(value, bool):
        return SandboxConfig(enabled=value is not False)
    limits = {k: getattr(value, k) for k in SANDBOX_LIMITS if getattr(value, k) is not None}
    return SandboxConfig(enabled=value.enabled, limits=limits)


@dataclass(frozen=True)
class CourseConfig:
    course: str = "course"
    device: str = "auto"
    """auto | cuda | cpu."""
    timeout_s: dict[str, float] = field(default_factory=lambda: dict(TIMEOUT_S))
    """Wall-clock limit of one worker, per device."""
    stall_s: dict[str, float] = field(default_factory=lambda: dict(STALL_S))
    """Stop a worker that reports no progress (no run of a case finished) for this long, per device; 0: off.
    It must cover the slowest single run: the worker's start, one compilation, one call."""
    workers: int = 0
    """Submissions graded at once; 0 = one per CPU core (1.5 per core on CUDA)."""
    judges: int = -1
    """Judge processes (one thread each) beside the workers; 0 = judge in the main process; -1 (`auto` in
    config.yaml) = one per two CPU cores when more than one job is graded."""
    fork_server: bool = True
    """Fork workers from a server that imported torch and triton once (grader/isolation/forkserver.py); false = start
    each worker as a fresh interpreter."""
    specialize: bool = False
    """Let Triton specialize the submissions' kernels on their integer arguments (divisible by 16, equal to 1)
    and pointer alignment, as it does by default. Off: one compilation per autotune config serves every shape,
    where the INT8 cases needed one per divisibility pattern (41 specializations of the five solutions become
    12). The values computed are the same either way; only the speed differs, and grading is not timing."""
    results_dir: str = "results"
    sandbox: SandboxConfig = field(default_factory=lambda: SandboxConfig())
    """The worker's sandbox (grader/worker/sandbox.py): on by default."""
    gpu_compile: bool = True
    """On the CPU interpreter, also compile every launched kernel for CUDA targets (sm_90, sm_80) and fail a case
    whose kernel would not compile for a GPU (grader/worker/gpu_compile.py)."""
    bounds: bool = True
    """Check every address a kernel loads, stores or updates against the tensors of its launch, and fail a case
    that touches memory outside them, even when the value read is never used (grader/worker/address_check.py): on the
    CPU as the interpreter runs; on CUDA by running each call again with its kernels interpreted, on the CPU's
    inputs."""
    writes: bool = True
    """The write check (grader/worker/write_check.py): fail an output that a kernel must write when it held values other
    than an allocation's or a fill's before the first launch that received it, or changed outside every kernel after
    one (values placed with torch, numpy or Python do not count)."""
    provenance: bool = True
    """The provenance check (grader/worker/provenance.py, grader/judge/provenance.py): call each case once more with
    its inputs' elements in another order, judge that call's outputs too, and fail a case in which a tensor or number
    that reached a kernel or a torch operation by no route the grader follows differs between the two calls (input
    data read into Python through str(), a buffer, a file, and handed back)."""
    informational_speed: bool = True
    """Run the speed tests worth 0 points (the speed tier of tasks 10-14). Each costs a timing worker (8-13 s of a
    core, beside the case workers) and under a second of the GPU alone; false leaves them out of the tasks (no
    score changes)."""
    always_allowed_imports: list[str] = field(default_factory=list)
    homeworks: dict[str, Homework] = field(default_factory=dict)
    toolchain: dict[str, str] = field(default_factory=dict)
    """The torch and triton releases the course grades with (config.yaml `toolchain`: {torch, triton}); a result
    graded with others says so (grader/pipeline/toolchain.py), and the kit's and Gradescope's set-up install
    them. Empty: the course names none."""

    def homework_of(self, task_id: str) -> Homework | None:
        return next((hw for hw in self.homeworks.values() if task_id in hw.tasks), None)

    def course_tasks(self, tasks: dict[str, TaskSpec]) -> dict[str, TaskSpec]:
        """The tasks as this course grades them, in a new dict (`tasks` is left as it is): the speed points a
        homework gives its tasks' 0-point speed tests, and without `informational_speed` the 0-point speed tests
        left out."""
        out = dict(tasks)
        for hw in self.homeworks.values():
            for task_id, tests in hw.speed_points.items():
                if task_id in out:
                    out[task_id] = replace(out[task_id], perf=[replace(p, points=tests.get(p.id, p.points))
                                                               for p in out[task_id].perf])
        if not self.informational_speed:
            out = {k: replace(t, perf=[p for p in t.perf if p.points > 0]) for k, t in out.items()}
        return out

    def limits(self, task: TaskSpec, device: str, address_check: bool | None = None,
               timing: bool = False) -> tuple[float, float, float]:
        """A worker's (time limit, stall limit, stall limit in the address check's re-run) in seconds for `task` on
        `device`, resolved here and nowhere else: the task's own time limit over the course's; on CUDA with the
        address check (`address_check`, default `bounds`), whose interpreted re-run runs the CPU's inputs as well,
        the CPU's time limit is added, and while the re-run runs (the worker says so) the CPU's stall limit holds
        if longer; elsewhere the third is 0 (the stall limit throughout). A `timing` worker (a job's speed tests,
        or the staff's) has no re-run but keeps the longer limit throughout: torch.compile's first call of a
        staff baseline may go quiet for as long."""
        timeout_s = task.timeout_s.get(device) or self.timeout_s[device]
        stall_s = self.stall_s.get(device, 0.0)
        audit_stall_s = 0.0
        if device == "cuda" and (self.bounds if address_check is None else address_check):
            timeout_s += task.timeout_s.get("cpu") or self.timeout_s["cpu"]
            if stall_s:
                audit_stall_s = max(stall_s, self.stall_s.get("cpu", 0.0))
        if timing:
            return timeout_s, max(stall_s, audit_stall_s), 0.0
        return timeout_s, stall_s, audit_stall_s


def tasks_dir_has(task_id: str, root: Path = ROOT) -> bool:
    return (root / "tasks" / task_id / "task.yaml").is_file()


TIMEOUT_S = {"cuda": 90.0, "cpu": 240.0}
STALL_S = {"cuda": 30.0, "cpu": 120.0}


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
