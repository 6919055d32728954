"""The course as the grader reads it from `config.yaml` (`CourseConfig`): its homeworks, the worker's sandbox, and
the limits and checks grading runs with."""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field, replace

from grader.config.task import TaskSpec

TIMEOUT_S = {"cuda": 90.0, "cpu": 240.0}
STALL_S = {"cuda": 30.0, "cpu": 120.0}


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
    canvas_assignment_id: int | None = None
    """config.yaml `canvas.assignment_id`: the Canvas assignment the homework's column of canvas.csv goes to
    (grader/course/canvas.py); None: the column is named by the title alone."""

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
    compile_processes: int = 0
    """On CUDA, how many child processes of a worker compile an autotuned kernel's configs side by side at a case's
    first launch (grader/worker/parallel_compile.py); 0 (`auto` in config.yaml) = the worker's cores, at most 8;
    1 = one after another in the worker, as Triton does."""
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
