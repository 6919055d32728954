"""The shapes of config.yaml and task.yaml, as pydantic models: every key declared with its type, its default and
what it means, and no other key accepted (`extra="forbid"`: a typo such as `timeout: 30` is an error, not a
silently ignored line). grader/config validates each file against its model first, then builds the grader's
own objects (CourseConfig, TaskSpec) and checks what spans keys (points against tasks, files on disk, ids).

An error names the file and the key's path: `config.yaml: grading.workers: Input should be a valid integer,
unable to parse string as an integer (got 'many')`, `config.yaml: grading.timeout: unknown key; known: device,
timeout_s, ...`.
"""

from __future__ import annotations

import datetime as _dt
import re
import types
import typing
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, ValidationError

Device = Literal["cuda", "cpu"]
Count = Annotated[int, Field(ge=0)]
Seconds = Annotated[float, Field(ge=0)]
Points = Annotated[float, Field(ge=0)]


class _File(BaseModel):
    model_config = ConfigDict(extra="forbid")


# ------------------------------------------------------------------------------------------------ config.yaml


class SandboxLimitsFile(_File):
    """`grading.sandbox` as a mapping (grader/worker/sandbox.py Limits); `true`/`false` switch it with the defaults."""

    enabled: StrictBool = True
    memory_mb: Count | None = Field(None, description="address space of a worker's children, MiB (not CUDA's)")
    processes: Count | None = Field(None, description="processes and threads of the worker's user")
    open_files: Count | None = Field(None, description="open file descriptors")
    file_size_mb: Count | None = Field(None, description="largest file a worker may write, MiB")
    cpu_s: Count | None = Field(None, description="CPU seconds (0: 4 x timeout_s + 60)")


class GradingFile(_File):
    """`grading:` how a run grades (grader/config CourseConfig says what each does)."""

    device: Literal["auto", "cuda", "cpu"] = Field("auto", description="cpu = Triton's interpreter")
    timeout_s: dict[Device, Seconds] = Field(default_factory=dict, description="a worker's wall-clock limit")
    stall_s: dict[Device, Seconds] = Field(default_factory=dict, description="stop a worker silent this long")
    workers: Count = Field(0, description="submissions graded at once; 0 = by the cores")
    judges: Literal["auto"] | Count = Field("auto", description="judge processes; 0 = in the main process")
    fork_server: StrictBool = Field(True, description="fork workers from a process that imported torch once")
    specialize: StrictBool = Field(False, description="Triton's integer and alignment specializations")
    results_dir: str = Field("results", description="where batch writes")
    gpu_compile: StrictBool = Field(True, description="compile interpreted kernels for CUDA too (CPU)")
    compile_processes: Literal["auto"] | Count = Field("auto", description="child processes compiling a kernel's "
                                                       "autotune configs side by side (CUDA); 1 = one by one")
    bounds: StrictBool = Field(True, description="the address check")
    writes: StrictBool = Field(True, description="the write check")
    provenance: StrictBool = Field(True, description="the provenance check (a differential replay of each case)")
    informational_speed: StrictBool = Field(True, description="run the 0-point speed tests")
    sandbox: StrictBool | SandboxLimitsFile | None = Field(True, description="the worker's sandbox")


class LatePolicyFile(_File):
    penalty_per_day: Annotated[float, Field(ge=0, le=1)] = Field(1.0, description="share lost per started day")
    max_days: Count = Field(0, description="days after which late work earns nothing (0: no such limit)")


class CanvasFile(_File):
    """`homeworks.<id>.canvas:` how `canvas.csv` (grader/course/canvas.py) names the homework's column for Canvas's
    gradebook import."""

    assignment_id: Annotated[StrictInt, Field(ge=1)] | None = Field(
        None, description="the Canvas assignment's id (its URL's .../assignments/ID): the column is `Title (ID)`, "
        "which Canvas matches to that assignment; null: the bare title")


class HomeworkFile(_File):
    """`homeworks.<id>:` a homework's tasks and rules."""

    title: str | None = None
    deadline: str | _dt.datetime | None = Field(None, description="ISO 8601 with a UTC offset")
    max_attempts: Count = Field(0, description="0 = unlimited")
    counts: Literal["best", "last"] = "best"
    late_policy: LatePolicyFile | None = None
    tasks: dict[str, Points] = Field(description="task id -> points (the task's own total)")
    speed_points: dict[str, dict[str, Points]] | None = Field(None, description="points for 0-point speed tests")
    leaderboard: list[Annotated[str, Field(pattern=r"^[^/\s]+/[^/\s]+$")]] | None = Field(
        None, description="the speed tests ranked, as TASK/TEST (default: every speed test of the homework)")
    leaderboard_names: Literal["pseudonym", "student"] = Field(
        "pseudonym", description="how batch's leaderboard names a student (student: the course opts in)")
    canvas: CanvasFile | None = Field(None, description="the Canvas gradebook export (canvas.csv)")


Version = Annotated[str, Field(pattern=r"^\d+(\.\d+){0,2}$")]


class ToolchainFile(_File):
    """The versions whose verdicts are the course's (its grading box); the kit's and Gradescope's set-up install
    them. Another version grades too, and its results say so."""

    torch: Version = Field(description="torch release, e.g. 2.11.0 (a local build tag such as +cu130 is ignored)")
    triton: Version = Field(description="triton release, e.g. 3.6.0")


class CourseFile(_File):
    """config.yaml."""

    course: str = "course"
    toolchain: ToolchainFile | None = Field(None, description="the torch and triton the course grades with")
    grading: GradingFile | None = None
    always_allowed_imports: list[str] = Field(default_factory=list)
    homeworks: dict[str, HomeworkFile] = Field(default_factory=dict)


# -------------------------------------------------------------------------------------------------- task.yaml


class KernelFile(_File):
    params: list[str]
    min_configs: Count = Field(0, description="autotune configs the kernel must have (0: no autotune test)")


class OutputFile(_File):
    name: str
    dtype: str = Field(description="a dtype name, or `like ARG` / `of ARG` (grader/judge)")
    compare: Literal["exact", "rounded", "close"] = "exact"
    window: float = Field(1e-3, description="rounded: how far from the exact value a rounded code may come")
    rtol: float = 0.0
    atol: float = 0.0
    from_kernel: StrictBool = Field(True, description="a Triton kernel must write it (not torch)")
    scalar: StrictBool = Field(False, description="shape [] and [1] both accepted")


class WrongFile(_File):
    why: str = ""
    fails: list[str] = Field(description="the tests it must fail (globs, `!name` excepts)")
    fails_on: dict[Device, list[str]] = Field(
        default_factory=dict, description="more tests it must fail on one device only (a case whose `cpu:` sizes "
        "hide the mistake there)")
    diagnosis: str | None = Field(None, description="text its result's diagnosis line must contain (selftest)")


class LaunchFile(_File):
    kernel: str
    grid: list[str] = Field(description="one `SIZE/BLOCK` per axis")
    tiles: list[str | None] = Field(default_factory=list)
    env: dict[str, Any] = Field(default_factory=dict)


class WithheldFile(_File):
    cases: Count = 0
    speed_tests: Count = 0
    points: Points = 0.0


class TaskFile(_File):
    """task.yaml. Cases are free-form (their keys are the reference's parameters) and `perf` is checked by
    grader/config `_load_perf`; everything else is declared here."""

    id: str
    title: str
    entry: str | None = None
    allowed_imports: list[str]
    functions: dict[str, list[str]] | None = None
    kernels: dict[str, KernelFile] | None = None
    reference: str
    outputs: list[OutputFile]
    cases: list[dict[str, Any]]
    autotune_points: Points = 0.0
    timeout_s: dict[Device, Seconds] | None = None
    wrong: dict[str, WrongFile] | None = None
    specialize: StrictBool | None = None
    launch: LaunchFile | None = None
    pictures: StrictBool = False
    perf: dict[str, Any] | None = None
    torch_ops: list[str] | None = None
    python_reads: Count = Field(0, description="elements of input data a call may hand to Python")
    withheld: WithheldFile | None = None


# --------------------------------------------------------------------------------------------------- errors


_TAGS = ("bool", "int", "float", "str", "dict", "list", "none")


def _is_tag(part) -> bool:
    """A union member's name in an error's location (`bool`, `SandboxLimitsFile`, `literal['auto']`), not a key."""
    return isinstance(part, str) and (part in _TAGS or part[:1].isupper() or part.startswith(
        ("literal[", "function-", "constrained-", "json-", "lax-", "strict-", "tagged-union")))


def _unwrap(annotation: Any) -> Any:
    """Of an `X | Y | None` annotation, the model among them (else a dict or list type), else the annotation."""
    args = typing.get_args(annotation) if typing.get_origin(annotation) in (typing.Union, types.UnionType) else ()
    if not args:
        return annotation
    models = [a for a in args if isinstance(a, type) and issubclass(a, BaseModel)]
    containers = [a for a in args if typing.get_origin(a) in (dict, list)]
    return (models or containers or [annotation])[0]


def _fields_at(model: type[BaseModel], loc: tuple) -> list[str] | None:
    """The keys allowed in the mapping that holds `loc`'s last key, read from the models' annotations."""
    current: Any = model
    for part in (p for p in loc[:-1] if not _is_tag(p)):
        current = _unwrap(current)
        if isinstance(current, type) and issubclass(current, BaseModel):
            field = current.model_fields.get(str(part))
            if field is None:
                return None
            current = field.annotation
        elif typing.get_origin(current) in (dict, list):
            current = typing.get_args(current)[-1]
        else:
            return None
    current = _unwrap(current)
    return list(current.model_fields) if isinstance(current, type) and issubclass(current, BaseModel) else None


def explain(exc: ValidationError, model: type[BaseModel], where: str) -> str:
    """A validation error as lines `FILE: key.path: what`, at most 10. A union's members each report on the same
    value: where one of them found something deeper (a key of a mapping), that says more and the others' lines go;
    otherwise their messages are joined with "or"."""
    found: dict[str, list[dict]] = {}
    for err in exc.errors(include_url=False):
        loc = tuple(err["loc"])
        is_key = loc[-1:] == ("[key]",)  # the key of a mapping is wrong, not its value
        loc = loc[:-1] if is_key else loc
        path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc if not _is_tag(p)).lstrip(".")
        msg = re.sub(r" or instance of \w+", "", err["msg"])
        found.setdefault(path, []).append({**err, "loc": loc, "msg": ("this key: " if is_key else "") + msg})
    lines = []
    for path, errs in found.items():
        if any(other != path and other.startswith((path + ".", path + "[")) for other in found):
            continue
        first = errs[0]
        if first["type"] == "extra_forbidden":
            known = _fields_at(model, first["loc"])
            lines.append(f"{where}: {path}: unknown key" + (f"; known: {', '.join(known)}" if known else ""))
        elif first["type"] == "missing":
            lines.append(f"{where}: {path}: missing key")
        else:
            what = "; or ".join(dict.fromkeys(e["msg"] for e in errs))
            lines.append(f"{where}: {path}: {what} (got {first.get('input')!r:.80})")
    return "\n".join(lines[:10])


def validate(model: type[BaseModel], data: dict, where: str, error: type[Exception]) -> BaseModel:
    """`data` checked against `model`; `error` (ConfigError) with every problem found, else the model."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise error(explain(exc, model, where)) from None
