"""Grading one or many (submission, task) pairs.

Stage by stage:
1. static checks on the source (judge process, nothing executed);
2. the judge generates each case's inputs and the oracle's answer (`reference/`), once per task and device;
3. a worker process imports and runs the submission on those inputs (in parallel across pairs);
4. pytest, with pytest-json-report, runs grader/judge/suite.py in the judge process over the worker's results;
5. the JSON report becomes a result: per-test outcome, points and message (students), plus logs (staff).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import functools
import hashlib
import importlib
import io
import itertools
import json
import multiprocessing
import os
import platform
import re
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import pytest
import torch

from grader import judge
from grader.config import AUTOTUNE_TEST, GATES, ROOT, CourseConfig, TaskSpec
from grader.gates import static
from grader.isolation.runner import ForkServer, JobSpec, run_shard, worker_env
from grader.isolation.schedule import Scheduler
from grader.judge import speed
from grader.protocol import (
    GradingTree,
    JobFolders,
    Kind,
    PerfItem,
    RecordStream,
    WorkerRun,
    create_trusted,
    worker_stages,
)
from grader.results import TaskResult, TestResult
from grader.results.status import Outcome
from grader.worker import tritoncache

SUITE = Path(__file__).parents[1] / "judge" / "suite.py"


def resolve_device(requested: str) -> str:
    if requested == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if requested == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: no CUDA GPU is visible to torch on this machine")
    return requested


# ------------------------------------------------------------------------------------------- prepared inputs


class Prepared:
    """Each task's inputs and oracle answers for one device, computed once and shared by every job.

    Inputs come first (workers need them: one file per case in the trusted tree, so that a worker is handed only
    its own cases'); the oracle's answers are computed later, while the workers run.
    """

    def __init__(self, device: str, tree: GradingTree, save_answers: bool = False, audit: bool = False) -> None:
        self.device = device
        self.tree = tree
        self.save_answers = save_answers
        """Also write the answers to a file, for judge processes (see `judge_job_apart`)."""
        self.audit = audit and device == "cuda"
        """Also write the inputs the CPU grades, for the address check's interpreted calls on CUDA."""
        self._cases: dict[str, list[judge.CaseData]] = {}
        self._answered: set[str] = set()

    @staticmethod
    def _oracle(task: TaskSpec):
        if str(ROOT) not in sys.path:
            sys.path.insert(0, str(ROOT))
        return importlib.import_module(f"reference.{task.reference}")

    def cases(self, task: TaskSpec) -> list[judge.CaseData]:
        """The cases with their inputs (written to `case_paths` for the workers); `expected` not yet filled."""
        if task.id not in self._cases:
            oracle = self._oracle(task)
            data = []
            for i, case in enumerate(task.cases):
                args, kwargs = oracle.generate_input(**case.params_for(self.device))
                data.append(judge.CaseData(case.id, list(args), dict(kwargs), ()))
                # On CUDA, the address check (grader/worker/address_check.py) runs the kernels in the interpreter, on
                # the inputs the CPU grades: the case's own where it has no `cpu:` sizes, else those.
                audit = None
                if self.audit and case.params_for("cpu") != case.params_for("cuda"):
                    a_args, a_kwargs = oracle.generate_input(**case.params_for("cpu"))
                    audit = {"args": list(a_args), "kwargs": dict(a_kwargs)}
                path = self.tree.case_file(task.id, i)
                path.parent.mkdir(parents=True, exist_ok=True)
                torch.save({"id": case.id, "args": list(args), "kwargs": dict(kwargs),
                            **({"audit": audit} if audit else {})}, path)
            self._cases[task.id] = data
        return self._cases[task.id]

    def answer(self, task: TaskSpec) -> None:
        """Fill every case's `expected` with the oracle's answer (once per task)."""
        if task.id not in self._answered:
            answer_cases(task, self.cases(task))
            if self.save_answers:
                path = self.tree.answers_file(task.id)
                path.parent.mkdir(parents=True, exist_ok=True)
                torch.save([list(c.expected) for c in self.cases(task)], path)
            self._answered.add(task.id)

    def case_paths(self, task: TaskSpec) -> dict[int, Path]:
        return {i: self.tree.case_file(task.id, i) for i in range(len(task.cases))}


def answer_cases(task: TaskSpec, cases: list[judge.CaseData]) -> None:
    oracle = Prepared._oracle(task)
    for case in cases:
        expected = tuple(oracle.ref_kernel(case.args, case.kwargs))
        if len(expected) != len(task.outputs):
            raise ValueError(f"reference/{task.reference}.py returned {len(expected)} outputs for case "
                             f"{case.id}; tasks/{task.id}/task.yaml declares {len(task.outputs)}")
        case.expected = expected


_JUDGE_CASES: dict[tuple, list[judge.CaseData]] = {}


def judge_job(job: Job, folders: JobFolders, ctx: GradingContext, runs: list[WorkerRun],
              staff_records: Path | None = None) -> TaskResult:
    """Read the workers' record streams, run the pytest suite over them, build the result. Never raises: a
    failure of the grader's own while judging becomes this job's failed verdict (`grader_failure`)."""
    start = time.perf_counter()
    try:
        if ctx.static.ok:
            ctx.results = judge.WorkerResults.read(runs, staff_records, [c.id for c in ctx.task.cases])
        entries, out = run_suite(ctx, folders)
        result = build_result(job, ctx, entries, out, runs)
    except Exception as exc:  # noqa: BLE001 - one job's failure stays that job's
        return grader_failure(job, ctx.device, exc, runs)
    result.staff["judge_seconds"] = round(time.perf_counter() - start, 2)
    result.staff.setdefault("stages", {})["judge"] = round(time.perf_counter() - start, 4)
    return result


def judge_job_apart(job: Job, folders: JobFolders, report: static.StaticReport, device: str,
                    runs: list[WorkerRun], backend: str, case_files: dict[int, Path], answers: Path,
                    staff_records: Path | None = None) -> TaskResult:
    """`judge_job` in a judge process of a pool: it reads the inputs the workers got and the oracle's answers
    (once per task and process). Like the main process, it never imports a submission."""
    try:
        key = (job.task.id, device, str(answers))
        if key not in _JUDGE_CASES:
            expected = torch.load(answers, weights_only=True)
            cases = []
            for i in range(len(case_files)):
                sent = torch.load(case_files[i], weights_only=True)
                cases.append(judge.CaseData(sent["id"], list(sent["args"]), dict(sent["kwargs"]),
                                            tuple(expected[i])))
            _JUDGE_CASES[key] = cases
    except Exception as exc:  # noqa: BLE001
        return grader_failure(job, device, exc, runs)
    ctx = GradingContext(job.task, device, report, _JUDGE_CASES[key], None, backend)
    return judge_job(job, folders, ctx, runs, staff_records)


def grader_failure(job: Job, device: str, exc: BaseException, runs: list[WorkerRun] | None = None) -> TaskResult:
    """The result of a job the grader could not judge: every test failed with the reason, 0 points, and the
    traceback for staff. Nothing of it comes from the worker."""
    why = f"the grader could not judge this run: {type(exc).__name__} (staff see the traceback)"
    points = job.task.test_points(device)
    tests = [TestResult(name, Outcome.ERROR.label, 0.0, points[name], why, visibility=job.task.visibility(name))
             for name in job.task.test_names]
    staff = {"grader_error": "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-20000:]}
    if runs:
        staff["worker_exit"] = "; ".join(f"{r.run_id}: {r.describe_exit()}" for r in runs)
    return TaskResult(task=job.task.id, student=job.student, submission=str(job.submission), score=0.0,
                      max_score=job.task.points_on(device), tests=tests, checks={},
                      environment=dict(environment(device)), submission_sha256=job.sha256,
                      graded_at=_now(), staff=staff)


def reused(result: TaskResult, job: Job, first: Job) -> TaskResult:
    """`result`, graded for `first`, as the result of `job`, which sent the same file for the same task."""
    return replace(result, student=job.student, submission=str(job.submission),
                   staff={**result.staff, "reuses": f"the run of {first.student}/{first.submission.name} "
                                                    "(the same file for the same task, graded once)"})


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


@functools.lru_cache(maxsize=4)
def environment(device: str) -> dict:
    """What graded the submission, as the trusted side knows it (a worker's word is not copied into a result):
    the workers run this interpreter, with this torch and triton."""
    env = {"device": device, "gpu": None, "torch": torch.__version__, "python": platform.python_version(),
           "interpreter": device == "cpu"}
    with contextlib.suppress(ImportError):
        import triton

        env["triton"] = triton.__version__
    if device == "cuda":  # from the driver's own files: this process starts no CUDA context
        for info in sorted(Path("/proc/driver/nvidia/gpus").glob("*/information")):
            with contextlib.suppress(OSError):
                model = re.search(r"^Model:\s*(.+)$", info.read_text(), re.M)
                if model:
                    env["gpu"] = model.group(1).strip()
                    break
    return env


# ---------------------------------------------------------------------------------------------------- results


@dataclass
class Job:
    task: TaskSpec
    submission: Path
    student: str
    source: bytes | None = None
    """The submission's bytes, read once (`read`): what the static check, the worker's copy, the identical-file
    check and the result's sha256 all see, so a file changed while a class grades cannot get a verdict for one
    version and the hash of another. A batch passes the bytes it hashed for the ledger."""

    def read(self) -> bytes:
        if self.source is None:
            self.source = self.submission.read_bytes()
        return self.source

    @property
    def sha256(self) -> str:
        """The sha256 of those bytes; "" when the file cannot be read (that job's failure says why)."""
        try:
            return hashlib.sha256(self.read()).hexdigest()
        except OSError:
            return ""


@dataclass
class GradingContext:
    """What the tests in grader/judge/suite.py see."""

    task: TaskSpec
    device: str
    static: static.StaticReport
    cases: list[judge.CaseData]
    results: judge.WorkerResults | None
    backend: str = "local"
    _verdicts: dict[int, judge.Verdict] = field(default_factory=dict)

    def _not_run(self) -> str | None:
        if not self.static.imports and not self.static.signatures:
            if self.results is None:
                return "not run"
            if self.results.problem:
                return self.results.problem
            if not self.results.load.get("ok"):
                where = "; ".join(self.results.load.get("where") or [])
                err = str(self.results.load.get("error", "unknown error")).splitlines()[0]
                return f"not run: importing the submission failed: {err}" + (f" ({where})" if where else "")
            return None
        gate = "imports" if self.static.imports else "signatures"
        problems = self.static.imports or self.static.signatures
        return f"not run: the {gate} check failed ({problems[0].splitlines()[0]}; the {gate} test says more)"

    def autotune_verdict(self) -> judge.Verdict:
        why = self._not_run()
        if why:
            return judge.Verdict(False, why)
        problems, seen = [], []
        for spec in self.task.autotuned_kernels:
            info = self.results.load["kernels"].get(spec.name) or {"kind": "missing", "configs": []}
            deco = self.static.decorators.get(spec.name, {})
            line = deco.get("autotune_line") or deco.get("line")
            where = f"{self.static.filename}:{line}: " if self.static.filename else f"line {line}: "
            at = where if line else ""
            configs = info.get("configs") or []
            if info.get("kind") != "autotune":
                problems.append(f"{at}{spec.name} is not decorated with @triton.autotune (found {info.get('kind')}); "
                                f"this task requires at least {spec.min_configs} configs")
            elif len(configs) < spec.min_configs:
                problems.append(f"{at}@triton.autotune on {spec.name} has {len(configs)} config(s); this task "
                                f"requires at least {spec.min_configs}: " + " | ".join(configs))
            else:
                seen.append(f"{spec.name}: {len(configs)} configs")
        if problems:
            return judge.Verdict(False, "\n".join(problems))
        # The configs must also work: points for autotuning go to a kernel that passes at least one case
        # under every one of its configs (each case runs every config).
        if self.task.cases and not any(self.case_verdict(i).ok for i in range(len(self.task.cases))):
            if not seen:  # nothing to autotune: the test only asks for a working kernel
                return judge.Verdict(False, "no case passes: no kernel of this task must be autotuned, so this test "
                                            "only asks for one passing case (the case tests say what fails)")
            return judge.Verdict(False, "; ".join(seen) + ", but no case passes under all of them "
                                 "(autotune points need a working autotuned kernel)")
        return judge.Verdict(True, "; ".join(seen) or "no kernel of this task must be autotuned")

    def case_verdict(self, index: int) -> judge.Verdict:
        if index not in self._verdicts:
            self._verdicts[index] = self._case_verdict(index)
        return self._verdicts[index]

    def _case_verdict(self, index: int) -> judge.Verdict:
        why = self._not_run()
        if why:
            staff = ""
            if self.results and self.results.load:
                staff = self.results.load.get("traceback", "")
            return judge.Verdict(False, why, staff=staff)
        return judge.judge_case(self.task, index, self.cases[index], self.results, self.device)


    def perf_verdict(self, index: int) -> judge.Verdict:
        why = self._not_run()
        if why:
            return judge.Verdict(False, why)
        test = self.task.perf[index]
        case_index = self.task.case_index(test.case)
        return speed.judge_perf(self.task, index, self.cases[case_index], self.case_verdict(case_index),
                                self.results)


class _SuitePlugin:
    def __init__(self, ctx: GradingContext) -> None:
        self.ctx = ctx

    @pytest.fixture
    def grading(self) -> GradingContext:
        return self.ctx

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        if "gate" in metafunc.fixturenames:
            metafunc.parametrize("gate", list(GATES), ids=list(GATES))
        if "case_index" in metafunc.fixturenames:
            cases = self.ctx.task.cases
            metafunc.parametrize("case_index", range(len(cases)), ids=[c.id for c in cases])
        if "perf_index" in metafunc.fixturenames:
            perf = self.ctx.task.perf
            metafunc.parametrize("perf_index", range(len(perf)), ids=[p.id for p in perf])


def _test_name(nodeid: str) -> str:
    func = nodeid.split("::")[-1]
    if "[" in func:
        return func[func.index("[") + 1 : -1]
    return AUTOTUNE_TEST if func == "test_autotune" else func


def run_suite(ctx: GradingContext, folders: JobFolders) -> tuple[dict[str, dict], str]:
    """Run grader/judge/suite.py under pytest; returns {test name: json-report entry} and pytest's output. Its
    configuration and report live in the job's trusted folder (no worker can put anything there)."""
    ini, report_path = folders.pytest_files()
    workdir = folders.trusted
    # Plugins the suite does not use cost time per job: unraisableexception alone runs gc.collect() twice per
    # session (0.19 s of the 0.6 s a task-12 job took to judge, with this process holding every case's tensors).
    unused = ("cacheprovider", "randomly", "unraisableexception", "threadexception", "faulthandler", "doctest",
              "junitxml", "pastebin", "stepwise", "warnings", "logging")  # not legacypath: pytest-json-report uses it
    args = [str(SUITE), "-q", *[a for name in unused for a in ("-p", f"no:{name}")], "--rootdir", str(workdir),
            "-c", str(ini), "--json-report", f"--json-report-file={report_path}",
            "--json-report-omit", "collectors", "log", "warnings", "keywords"]
    ini.write_text("[pytest]\n")
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        pytest.main(args, plugins=[_SuitePlugin(ctx)])
    try:
        report = json.loads(report_path.read_text())
        entries = {_test_name(t["nodeid"]): t for t in report.get("tests", [])}
    except (OSError, ValueError, KeyError):
        entries = {}
    return entries, out.getvalue()


def build_result(job: Job, ctx: GradingContext, entries: dict[str, dict], pytest_out: str,
                 runs: list[WorkerRun]) -> TaskResult:
    tests = []
    points = job.task.test_points(ctx.device)
    for name in job.task.test_names:
        entry = entries.get(name)
        max_points = points[name]
        if entry is None:  # fail closed: a test with no result is a failed test
            tests.append(TestResult(name, Outcome.ERROR.label, 0.0, max_points,
                                    "no result for this test (internal grader error; staff see the log)",
                                    visibility=job.task.visibility(name)))
            continue
        meta = entry.get("metadata") or {}
        passed = entry.get("outcome") == "passed"
        message = meta.get("message")
        staff = meta.get("staff", "")
        outcome = Outcome.PASSED if passed else Outcome.FAILED
        if entry.get("outcome") == "skipped" and name in job.task.not_run_on(ctx.device):
            outcome = Outcome.NOT_RUN  # only a test the task says is not run here; any other skip fails
        if message is None:  # the judge itself raised: students get a short line, staff the traceback
            outcome = Outcome.ERROR
            message = "internal grader error while judging this test (staff see the traceback)"
            staff = json.dumps(entry.get("call") or entry.get("setup") or {})[-20000:]
        tests.append(TestResult(name, outcome.label, max_points if passed else 0.0, max_points, message, staff,
                                visibility=job.task.visibility(name)))
    env = dict(environment(ctx.device))
    if ctx.device == "cpu":  # what the interpreter cannot show: the CUDA sizes of the shrunk cases
        env["smaller_on_cpu"] = {c.id: {k: f"{v} (CUDA: {c.params.get(k)})" for k, v in c.cpu.items()}
                                 for c in job.task.cases if c.cpu}
    kernels = ctx.results.load.get("kernels", {}) if ctx.results and ctx.results.load else {}
    checks = {"imports": ctx.static.imports or "ok", "signatures": ctx.static.signatures or "ok",
              "autotune": {k: len((kernels.get(k) or {}).get("configs") or []) for k in job.task.kernels}}
    staff = {"pytest": pytest_out[-20000:], "backend": ctx.backend}
    if ctx.results and ctx.results.load:  # which layers of the sandbox were on, in the worker's words
        staff["sandbox"] = ctx.results.load.get("sandbox")
    if runs:
        staff.update({"worker_log": ctx.results.log if ctx.results else "",
                      "worker_exit": "; ".join(f"{r.run_id}: {r.describe_exit()}" for r in runs),
                      "worker_seconds": round(max(r.seconds for r in runs), 2),
                      "worker_quiet_s": max(r.quiet_s for r in runs),
                      "workers": len(runs)})
        stages: dict[str, float] = {"judge": 0.0}
        for r in runs:  # where the workers' time went (the worker's word: statistics for the class benchmark)
            kind = "timing_worker" if r.perf else "case_worker"
            stages[f"{kind}_wall"] = round(stages.get(f"{kind}_wall", 0.0) + r.seconds, 4)
            for name, value in worker_stages(r.status()).items():
                stages[name] = round(stages.get(name, 0.0) + value, 4)
        staff["stages"] = stages
    pictures = {job.task.cases[i].id: v.picture for i, v in ctx._verdicts.items() if v.picture}
    return TaskResult(
        pictures=pictures,
        task=job.task.id, student=job.student, submission=str(job.submission),
        score=round(sum(t.points for t in tests), 6), max_score=job.task.points_on(ctx.device), tests=tests,
        checks=checks,
        environment=env, submission_sha256=job.sha256, graded_at=_now(), staff=staff,
        withheld={**asdict(job.task.withheld), "message": job.task.withheld.sentence()} if job.task.withheld else {},
    )


def specialization_key(case: judge.CaseData, specialize: bool = True) -> tuple:
    """Cases with equal keys most likely reuse one compiled kernel: Triton specializes integer arguments on
    divisibility by 16 and on equality to 1 (unless `specialize` is off), and constexpr flags come from
    non-tensor arguments."""
    key = []
    for value in [*case.args, *case.kwargs.values()]:
        if isinstance(value, torch.Tensor) and not specialize:
            key.append(str(value.dtype))
        elif isinstance(value, torch.Tensor):
            key.append((str(value.dtype), tuple((d % 16 == 0, d == 1) for d in value.shape),
                        tuple(st % 16 == 0 for st in value.stride())))
        else:
            key.append(repr(value))
    return tuple(key)


def plan_shards(cases_per_job: dict[int, list[judge.CaseData]], workers: int,
                specialize: dict[int, bool] | None = None,
                classes: dict[int, list[str]] | None = None) -> dict[int, list[list[int]]]:
    """Split each job's cases over workers when there are more cores than jobs (a student checking one file, a
    few tasks on a big box). Compilation is the slow part, so cases that share a specialization stay together
    and a shard costs about its number of distinct specializations. Cases of different `classes` (per job, a
    label per case: its visibility) never share a shard, so a worker grading public cases never holds a hidden
    case's inputs; every job gets one shard per class it has. Spare workers go one at a time to the job whose
    heaviest shard is heaviest, so the shards fit the workers and the slowest is as short as it can be (with
    Triton's specializations on, the five INT8 solutions made 24 shards of at most 2 specializations on 24
    workers, where the plan before made 25, one waiting for a free worker; both graded them in 24.5-29 s cold
    on the H100, compilation keeping all 16 cores busy. With them off, the default, there are 12
    specializations in all, and it took 16-17 s)."""
    groups = {}
    minimum = {}
    for n, cases in cases_per_job.items():
        labels = (classes or {}).get(n) or [""] * len(cases)
        by_key: dict[tuple, list[int]] = {}
        for i, case in enumerate(cases):
            by_key.setdefault((labels[i], specialization_key(case, (specialize or {}).get(n, True))), []).append(i)
        groups[n] = sorted(by_key.items(), key=lambda kv: len(kv[1]), reverse=True)
        minimum[n] = len({label for label, _ in by_key})
    shards = {n: max(1, minimum[n]) for n in groups}
    for _ in range(workers - sum(shards.values())):
        splittable = [n for n in groups if shards[n] < len(groups[n])]
        if not splittable:
            break
        worst = max(splittable, key=lambda n: (-(-len(groups[n]) // shards[n]), len(groups[n])))
        shards[worst] += 1
    plan = {}
    for n, job_groups in groups.items():
        labels = sorted({label for (label, _), _ in job_groups})
        # each class gets its own bins: at least one, and the job's other shards in proportion to its groups
        per_class = {label: 1 for label in labels}
        for _ in range(shards[n] - len(labels)):
            free = [c for c in labels if per_class[c] < sum(1 for (lab, _), _ in job_groups if lab == c)]
            if not free:
                break
            fullest = max(free, key=lambda c: sum(1 for (lab, _), _ in job_groups if lab == c) / per_class[c])
            per_class[fullest] += 1
        job_plan = []
        for label in labels:
            bins: list[list[list[int]]] = [[] for _ in range(per_class[label])]
            for (lab, _), group in job_groups:  # largest first, into the bin with the fewest specializations
                if lab == label:
                    min(bins, key=lambda b: (len(b), sum(map(len, b)))).append(group)
            job_plan += [b for b in bins if b]
        job_plan.sort(key=len, reverse=True)  # the heaviest shard first
        plan[n] = [sorted(i for group in b for i in group) for b in job_plan]
    return plan


def shard_cost(cases: list[judge.CaseData], indices: list[int], specialize: bool = True) -> int:
    """About how many compilations a shard costs: its number of distinct specializations."""
    return len({specialization_key(cases[i], specialize) for i in indices})


TREE_PREFIX = "grader-"


def remove_leftovers(parent: Path | None = None) -> list[Path]:
    """Remove the grading trees that killed runs left behind (`grader-<pid>-*` whose process is gone); returns
    them. A tree of a run still going (its pid alive) is left alone."""
    removed = []
    parent = parent or Path(tempfile.gettempdir())
    for path in parent.glob(f"{TREE_PREFIX}*-*"):
        match = re.fullmatch(rf"{TREE_PREFIX}(\d+)-\w+", path.name)
        if not match or path.is_symlink() or not path.is_dir():
            continue
        try:
            os.kill(int(match.group(1)), 0)
            continue  # still running
        except ProcessLookupError:
            pass
        except PermissionError:
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed


def grade_jobs(jobs: list[Job], cfg: CourseConfig, device: str, workers: int = 0,
               keep: Path | None = None, on_result=None, benchmark_autotune: bool = False,
               backend: str = "local", address: str | None = None, static_checks: bool = True) -> list[TaskResult]:
    """Grade every job. Workers run in parallel (here, or as Ray tasks with backend='ray'); each job is judged
    here as soon as its workers are done, and handed to `on_result` then. A job whose grading fails in the
    grader itself gets a failed result of its own (`grader_failure`); every other job is graded as usual.
    `static_checks=False` skips the static policy (every file counts as passing it): only for tests that prove
    the layers behind it (the op audit, the sandbox) on their own."""
    shard_runner = run_shard
    if backend == "ray":
        from grader.isolation.ray_backend import RayShards

        shard_runner = RayShards(address, device)
    # Workers spend much of their time starting up and waiting on the compiler's subprocesses: on CUDA, 1.5
    # per core graded the five INT8 solutions in 40 s cold on a 16-core H100 box, against 57 s with one per core.
    cores = max(1, _cpu_count())
    workers = workers or cfg.workers or (cores + cores // 2 if device == "cuda" else cores)
    if cfg.fork_server and backend == "local":  # its imports overlap with the inputs being made below
        ForkServer.get(device, worker_env(device))
    remove_leftovers()
    base = Path(tempfile.mkdtemp(prefix=f"{TREE_PREFIX}{os.getpid()}-"))
    # grader/protocol: a trusted half no worker can reach, and a scratch half with a folder per worker run.
    tree = GradingTree(base)
    try:
        judges = (cfg.judges if cfg.judges >= 0 else cores // 2) if len(jobs) > 1 else 0  # judge processes: below
        prepared = Prepared(device, tree, save_answers=bool(judges), audit=cfg.bounds)
        contexts: list[tuple[Job, JobFolders, GradingContext]] = []
        results: dict[int, TaskResult] = {}
        # Identical files for one task are graded once: every later copy gets the first one's result under its
        # own name (`reused`), and its staff JSON says whose run it was.
        first_of: dict[tuple[str, int], int] = {}
        copies: dict[int, list[int]] = {}
        static_s: dict[int, float] = {}
        oracle_s: dict[str, float] = {}
        for n, job in enumerate(jobs):
            folders = tree.job(f"job-{n:04d}")
            try:
                source = job.read()
                # the task object, not only its id: a test may grade one file against two variants of a task
                same = first_of.setdefault((hashlib.sha256(source).hexdigest(), id(job.task)), n)
                if same != n:
                    copies.setdefault(same, []).append(n)
                    contexts.append((job, folders, GradingContext(job.task, device, static.StaticReport(), [],
                                                                  None, backend)))
                    continue
                t_static = time.perf_counter()
                report = static.check_source(source.decode(errors="replace"), job.task,
                                             cfg.always_allowed_imports, job.submission.name)
                static_s[n] = time.perf_counter() - t_static
                if not static_checks:
                    report.imports = []
                t_oracle = time.perf_counter()
                cases = prepared.cases(job.task)
                oracle_s[job.task.id] = oracle_s.get(job.task.id, 0.0) + time.perf_counter() - t_oracle
            except Exception as exc:  # noqa: BLE001 - this job's failure, not the class's
                results[n] = grader_failure(job, device, exc)
                report, cases = static.StaticReport(), []
            contexts.append((job, folders, GradingContext(job.task, device, report, cases, None, backend)))
        later = {d for ds in copies.values() for d in ds}
        per_task = {t: sum(1 for n, (j, _, _) in enumerate(contexts) if j.task.id == t and n not in later)
                    for t in {j.task.id for j, _, _ in contexts}}

        runnable = [n for n, (_, _, ctx) in enumerate(contexts) if ctx.static.ok and n not in results
                    and n not in later]
        specialize = {n: cfg.specialize if job.task.specialize is None else job.task.specialize
                      for n, (job, _, _) in enumerate(contexts)}
        visibility = {n: [c.visibility for c in contexts[n][0].task.cases] for n in runnable}
        plan = plan_shards({n: contexts[n][2].cases for n in runnable}, workers, specialize, visibility)
        runs: dict[int, list[WorkerRun]] = {n: [] for n in range(len(contexts))}
        pending = {n: 0 for n in range(len(contexts))}
        staff_records: dict[int, Path | None] = {}

        # Judging costs up to a second or two a job at CUDA sizes. Here it runs in a pool of judge processes (one
        # thread each, reading the oracle's answers that this process computed): config.yaml's grading.judges,
        # by default one per two cores, so a class's judging keeps up with its workers (on the 16-core H100 box,
        # 40 students: 132 s with 8 judges, 139-152 s with 4, when the machine's CPU was 86% and 66-74% busy).
        # With 0, or a single job, it runs here, one job at a time.
        judge_pool = ProcessPoolExecutor(judges, mp_context=multiprocessing.get_context("spawn"),
                                         initializer=torch.set_num_threads, initargs=(1,)) if judges else None
        judging: dict = {}

        def done(n: int, result: TaskResult) -> None:
            job, folders, _ = contexts[n]
            if n not in later:  # what the trusted side spent on this file before any worker (staff only)
                stages = result.staff.setdefault("stages", {})
                stages["static"] = round(static_s.get(n, 0.0), 4)
                stages["oracle"] = round(oracle_s.get(job.task.id, 0.0) / max(1, per_task.get(job.task.id, 1)), 4)
            results[n] = result
            progress.step(f"{job.student}/{job.task.id}")
            if on_result:
                on_result(result)
            if keep is not None:  # the trusted files: job descriptions, record streams, logs, the suite's report
                shutil.copytree(folders.trusted, keep / folders.trusted.name, symlinks=True, dirs_exist_ok=True)
            shutil.rmtree(folders.scratch, ignore_errors=True)
            for d in copies.pop(n, []):
                done(d, reused(result, contexts[d][0], job))

        def finish(n: int) -> None:
            job, folders, ctx = contexts[n]
            try:
                if judge_pool is None:
                    prepared.answer(job.task)
                    done(n, judge_job(job, folders, ctx, runs[n], staff_records.get(n)))
                else:
                    judging[judge_pool.submit(judge_job_apart, job, folders, ctx.static, device, runs[n], backend,
                                              prepared.case_paths(job.task), tree.answers_file(job.task.id),
                                              staff_records.get(n))] = n
            except Exception as exc:  # noqa: BLE001
                done(n, grader_failure(job, device, exc, runs[n]))

        def drain(block: bool) -> None:
            for future in [f for f in judging if block or f.done()]:
                n = judging.pop(future)
                try:
                    result = future.result()
                except Exception as exc:  # noqa: BLE001 - a judge process that died, or could not send its result
                    result = grader_failure(contexts[n][0], device, exc, runs[n])
                done(n, result)

        gpus = visible_gpus() if device == "cuda" else []
        progress = Progress(len(contexts))
        for n in sorted(results):  # refused before anything ran
            done(n, results[n])
        # grader/isolation/schedule.py: one pool runs the staff's timing runs, the case shards and the timing workers,
        # by priority; a job is judged as soon as its last item is done.
        pool = Scheduler(workers, {"timing": max(1, workers // 3)})
        gpu_turn = itertools.count()

        def on_gpu() -> dict:
            """The next GPU of the round, and its gate (every CUDA worker uses the GPU through it)."""
            if device != "cuda":
                return {}
            gpu = gpus[next(gpu_turn) % len(gpus)] if len(gpus) > 1 else None
            return {"gpu": gpu, "gate": tree.gate(gpu)}

        staff_runs: dict[str, tuple[Path | None, Path | None]] = {}
        finished: dict[tuple[int, int], list[WorkerRun]] = {}
        """(job, shard) -> its runs, as soon as the shard is done (a timing worker looks at its speed cases)."""
        try:
            if device == "cuda" and cfg.sandbox.enabled:
                warm_shared_cache([contexts[n][0].task for n in runnable], device, cfg, prepared, tree, pool)
            for n in runnable:
                job, folders, _ = contexts[n]
                timeout_s, stall_s = cfg.limits(job.task, device)
                base_spec = JobSpec(job.submission, job.task.entry, list(job.task.kernels), device,
                                    prepared.case_paths(job.task), timeout_s, benchmark_autotune,
                                    fork_server=cfg.fork_server, specialize=specialize[n],
                                    launch=launch_job(job.task), stall_s=stall_s,
                                    sandbox=cfg.sandbox.job(), gpu_compile=cfg.gpu_compile, bounds=cfg.bounds,
                                    writes=cfg.writes, source=job.read())
                public = [("shard", n, k) for k, indices in enumerate(plan[n])
                          if all(job.task.cases[i].visibility == "public" for i in indices)]
                for k, indices in enumerate(plan[n]):
                    hidden = any(job.task.cases[i].visibility != "public" for i in indices)
                    spec = replace(base_spec, sees_hidden=hidden, **on_gpu())
                    cost = shard_cost(contexts[n][2].cases, indices, specialize[n])
                    # The heaviest shards first (longest job first); a hidden shard after its job's public ones,
                    # ahead of new jobs' shards (its job is nearly done), or early on an idle thread.
                    pool.add(("shard", n, k), functools.partial(_shard_into, finished, (n, k), shard_runner,
                                                                folders, k, spec, indices),
                             priority=(1 if hidden else 2, -cost, n), after=public if hidden else (), early=True)
                    pending[n] += 1
                perf = [PerfItem(index=i, test=p.id, case=job.task.case_index(p.case),
                                 baseline=_portable(job.task.folder / p.baseline), warmup=p.warmup, reps=p.reps,
                                 clock=p.clock) for i, p in enumerate(job.task.perf) if device in p.devices]
                if not perf:
                    continue
                # One timing worker per job, compiling as Triton does (its specializations on). It starts once no
                # case shard waits for a thread (a student's few files: at once), and only its timed calls hold
                # the GPU alone (GpuGate): before them, the case workers still inside finish their call, so a
                # timer beside a full class of case workers waits seconds for the room and holds every case
                # worker up meanwhile (measured on the H200 box with timers started first: 17 files in 279 s).
                # Each task's reference is timed first, the same way, by the staff's run (grader/judge/speed.py: what
                # it proves; kept between grading runs), whose Inductor cache each timing worker starts from.
                task = job.task
                if task.id not in staff_runs:
                    staff_runs[task.id] = (None, None)
                    staff_spec = replace(base_spec, perf=perf, specialize=True, sees_hidden=True, **on_gpu())
                    pool.add(("staff", task.id),
                             functools.partial(_staff_timing_into, staff_runs, task, staff_spec, tree, shard_runner),
                             priority=(0, 0, n), kind="timing")
                timing_spec = replace(base_spec, perf=perf, specialize=True, sees_hidden=True, **on_gpu())
                speed_shards = {item.index: next(((n, k) for k, indices in enumerate(plan[n]) if item.case in indices),
                                                 None) for item in perf}
                pool.add(("timing", n), functools.partial(_timed_run, staff_runs, task.id, shard_runner, folders,
                                                          len(plan[n]), timing_spec, finished, speed_shards),
                         priority=(3, 0, n), kind="timing", after=[("staff", task.id)])
                pending[n] += 1
            pool.start()  # every item is known: the threads take them best first
            for n in range(len(contexts)):  # the oracle works (once per task) while the workers run
                if n in results or n in later:
                    continue
                try:
                    t_oracle = time.perf_counter()
                    prepared.answer(contexts[n][0].task)
                    oracle_s[contexts[n][0].task.id] = oracle_s.get(contexts[n][0].task.id, 0.0) \
                        + time.perf_counter() - t_oracle
                except Exception as exc:  # noqa: BLE001 - a staff error: that task's jobs fail, with the reason
                    results.setdefault(n, grader_failure(contexts[n][0], device, exc))
            for n in range(len(contexts)):
                if not pending[n] and n not in results and n not in later:
                    finish(n)
            for key, result in pool.results():
                if key[0] not in ("shard", "timing"):
                    continue  # a warm-up or the staff's timing run: its job waits for it through the pool
                n = key[1]
                if isinstance(result, BaseException):  # run_shard never raises; a scheduling error might
                    result = [WorkerRun(records=None, returncode=None, timed_out=False, seconds=0.0, log="",
                                        run_id=f"{key[0]}-{n}", problem=f"{type(result).__name__}: {result}")]
                if key[0] == "timing":
                    staff_records[n] = staff_runs[contexts[n][0].task.id][0]
                runs[n] += result
                pending[n] -= 1
                if not pending[n] and n not in results:
                    finish(n)
                drain(block=False)
        finally:
            pool.close()
        drain(block=True)
        if os.environ.get("GRADER_TRACE"):  # when each item of the pool ran (scripts/bench_class.py, staff)
            for key, start, end in sorted(pool.trace, key=lambda t: t[1]):
                print(f"trace {start:8.2f} {end:8.2f} {end - start:7.2f}  {key}", file=sys.stderr)
        if judge_pool is not None:
            judge_pool.shutdown()
        return [results[n] for n in range(len(contexts))]
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _staff_timing_into(into: dict, task: TaskSpec, spec: JobSpec, tree: GradingTree, shard_runner) -> None:
    into[task.id] = staff_timing(task, spec, tree, shard_runner)


def _shard_into(finished: dict, key: tuple[int, int], shard_runner, folders: JobFolders, shard: int,
                spec: JobSpec, cases: list[int]) -> list[WorkerRun]:
    runs = shard_runner(folders, shard, spec, cases)
    finished[key] = runs
    return runs


def case_never_ran(runs: list[WorkerRun], case: int) -> bool:
    """True when a finished shard's runs hold no record of `case`: its worker hung, crashed or ran out of time at
    or before it (a hang is not restarted), so the case fails whatever else happens. A stream that cannot be read
    says nothing: the speed test is then timed, and the judge decides from the same records as ever."""
    try:
        return not any(run.records is not None and RecordStream(run.records).has(Kind.CASE, case) for run in runs)
    except Exception:  # noqa: BLE001 - the worker's records: unreadable means unknown here, never an error
        return False


def _timed_run(staff_runs: dict, task_id: str, shard_runner, folders: JobFolders, shard: int,
               spec: JobSpec, finished: dict | None = None, speed_shards: dict | None = None) -> list[WorkerRun]:
    """A job's timing worker, started from the staff run's Inductor cache. A speed test whose case is already
    known to fail (its shard is done and never recorded it: a hang, a crash) is not timed: the judge says "not
    timed: case ... fails" for it either way (grader/judge/speed.py), and a submission that hangs would hang its timing
    worker too, for a whole stall limit. With no speed test left, no worker starts."""
    perf = [item for item in spec.perf
            if not ((key := (speed_shards or {}).get(item.index)) in (finished or {})
                    and case_never_ran(finished[key], item.case))]
    if not perf:
        return []
    return shard_runner(folders, shard, replace(spec, perf=perf, inductor_from=staff_runs[task_id][1]), [])


def staff_timing(task: TaskSpec, spec: JobSpec, tree: GradingTree,
                 shard_runner: Callable[[JobFolders, int, JobSpec, list[int]], list[WorkerRun]]
                 ) -> tuple[Path | None, Path | None]:
    """Time the task's reference solution as `spec` times a submission (same baselines, cases, clock and sandbox),
    in a job of its own. Returns its record stream and its Inductor cache (None, None when the task has no
    solution.py: every speed test of the task then fails closed, with nothing to check the submission's run
    against)."""
    solution = task.folder / "solution.py"
    if not solution.is_file():
        return None, None
    folders = tree.job(f"staff-timing-{task.id}")
    kept = staff_cache_dir() / staff_key(task, spec)
    if (kept / "records.bin").is_file():  # timed before, with these files, versions and GPU: its record again
        records = folders.records("kept")
        with os.fdopen(create_trusted(records), "wb") as fh:
            fh.write((kept / "records.bin").read_bytes())
        # Not its Inductor cache: Inductor's entries name the folders of the run that made them, which a worker
        # of another grading run may not read (the baseline then raised PermissionError); each timing worker
        # compiles the baseline itself (a few seconds, beside the case workers).
        return records, None
    runs = shard_runner(folders, 0, replace(spec, submission=solution), [])
    run = runs[-1] if runs else None
    inductor = folders.run_folder(run.run_id) / "inductor" if run else None
    if run and run.records and _timed_well(RecordStream(run.records), spec) and not run.timed_out:
        with contextlib.suppress(OSError):  # kept for the next grading run (a cache: losing it costs a run)
            kept.parent.mkdir(parents=True, exist_ok=True)
            new = Path(tempfile.mkdtemp(prefix=".new-", dir=kept.parent))
            shutil.copyfile(run.records, new / "records.bin")
            os.rename(new, kept)
    return (run.records if run else None), inductor


def _timed_well(stream: RecordStream, spec: JobSpec) -> bool:
    """Whether a staff timing run is worth keeping: it finished, and every speed test has a record without an
    error that was timed with the GPU alone (a failure, perhaps passing, is timed again next time)."""
    if not stream.status.get("done") or stream.problem:
        return False
    for item in spec.perf:
        try:
            record = stream.tensors(Kind.PERF, item.index)
        except Exception:  # noqa: BLE001 - unreadable: not kept
            return False
        if not isinstance(record, dict) or record.get("error") or record.get("gate", "alone") != "alone":
            return False
    return True


STAFF_CACHE_ENV = "GRADER_STAFF_TIMING"


def staff_cache_dir() -> Path:
    """Where the staff's timing runs are kept between grading runs: $GRADER_STAFF_TIMING, else a folder of the
    grader's user's own cache. Not the shared Triton cache: a staff record holds the reference's outputs, and no
    worker may read it (the sandbox lets workers read the shared cache only)."""
    return Path(os.environ.get(STAFF_CACHE_ENV) or Path.home() / ".cache" / "triton-grader-staff")


def staff_key(task: TaskSpec, spec: JobSpec) -> str:
    """What a staff timing run depends on: the task's files that define it (statement data, solution, baselines,
    oracle), the grader's timing code, the worker's settings, torch, Triton and the GPU. The same key: the same
    run, timed once (on a course's GPU box, the first grading run of a task times it; every later one, a student's
    check of five files too, reuses it)."""
    h = hashlib.sha256()
    files = [task.folder / "task.yaml", task.folder / "solution.py", ROOT / "reference" / f"{task.reference}.py",
             *(ROOT / p.baseline for p in spec.perf),
             *(Path(__file__).parents[1] / n for n in ("worker/timing.py", "worker/main.py", "protocol/__init__.py",
                                                       "judge/speed.py"))]
    for f in files:
        h.update(str(f.name).encode())
        with contextlib.suppress(OSError):
            h.update(f.read_bytes())
    env = environment("cuda" if spec.device == "cuda" else spec.device)
    h.update(json.dumps([env.get("torch"), env.get("triton"), env.get("gpu"), spec.device, spec.specialize,
                         [dataclasses.asdict(p) for p in spec.perf], spec.sandbox, sys.version], sort_keys=True,
                        default=str).encode())
    return f"{task.id}-{h.hexdigest()[:24]}"


def warm_shared_cache(tasks: list[TaskSpec], device: str, cfg: CourseConfig, prepared: Prepared, tree: GradingTree,
                      pool: Scheduler) -> None:
    """Start a warm-up run of each task's staff solution (trusted: not sandboxed), one config on one case per
    specialization, compiling into a cache of its own. What it builds that only depends on a kernel's signature,
    Triton's C launchers (a C compiler run of about a second each), is then copied into the grader's shared Triton
    cache, where the sandboxed workers of that task find it instead of building it in their job's own cache; the
    reference's compiled kernels are not (every worker can read the shared cache). The runs go first in the pool
    and are not waited for: a worker that starts before a launcher is published builds its own."""
    tritoncache.prune_shared()
    seen = set()
    for task in tasks:
        solution = task.folder / "solution.py"
        if task.id in seen or not solution.is_file():
            continue
        seen.add(task.id)
        specialize = cfg.specialize if task.specialize is None else task.specialize
        first: dict[tuple, int] = {}
        for i, case in enumerate(prepared.cases(task)):
            first.setdefault(specialization_key(case, specialize), i)
        spec = JobSpec(solution, task.entry, list(task.kernels), device, prepared.case_paths(task),
                       cfg.limits(task, device, address_check=False)[0], fork_server=cfg.fork_server,
                       specialize=specialize, launch=launch_job(task), warm=True, bounds=False)
        pool.add(("warm", task.id), functools.partial(_warm_and_publish, tree.job(f"warm-{task.id}"), spec,
                                                      sorted(first.values())), priority=(0, -1))


def _warm_and_publish(folders: JobFolders, spec: JobSpec, cases: list[int]) -> None:
    run_shard(folders, 0, spec, cases)
    tritoncache.publish_launchers(folders.cache)


def launch_job(task: TaskSpec) -> dict | None:
    """What a worker needs to launch a task's kernel itself (tasks with `launch` in task.yaml)."""
    if task.launch is None:
        return None
    return {"kernel": task.launch.kernel, "grid": [list(axis) for axis in task.launch.grid],
            "env": dict(task.launch.env), "outputs": len(task.outputs)}


def _portable(path: Path) -> str:
    """A path under the repository as relative to it (a Ray node has the repository elsewhere), else absolute."""
    path = path.resolve()
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def visible_gpus() -> list[int]:
    """GPU indices the workers may be pinned to (one worker sees one GPU)."""
    return list(range(torch.cuda.device_count())) if torch.cuda.is_available() else []


class Progress:
    """How far a grading run is, on stderr: at a terminal, a progress bar with an estimate of the time left (tqdm,
    when installed: `make setup` and the kit's setup.sh install it); elsewhere (a log, CI, Gradescope) a line per
    finished job with the same estimate. Nothing for a single job."""

    def __init__(self, total: int, stream=None) -> None:
        self.total, self.done, self.start = total, 0, time.monotonic()
        self.stream = stream or sys.stderr
        self.bar = None
        if total >= 2 and getattr(self.stream, "isatty", lambda: False)():
            try:
                from tqdm import tqdm
            except ImportError:
                tqdm = None
            if tqdm is not None:
                self.bar = tqdm(total=total, unit="file", file=self.stream, dynamic_ncols=True, smoothing=0.1,
                                bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}] {postfix}")

    def step(self, label: str) -> None:
        self.done += 1
        if self.bar is not None:
            self.bar.set_postfix_str(label, refresh=False)
            self.bar.update(1)
            if self.done >= self.total:
                self.bar.close()
            return
        if self.total < 2:
            return
        elapsed = time.monotonic() - self.start
        eta = elapsed / self.done * (self.total - self.done)
        print(f"[{self.done}/{self.total}] {label}  {elapsed:.0f} s elapsed, about {eta:.0f} s left",
              file=self.stream, flush=True)


def _cpu_count() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
