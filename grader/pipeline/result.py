"""Judging and results: a job (the submission's bytes, read once), the judging context the pytest suite reads
(grader/judge/suite.py), the suite's run, and the result built from its report."""

from __future__ import annotations

import collections
import contextlib
import cProfile
import dataclasses
import datetime as dt
import functools
import hashlib
import io
import json
import os
import platform
import re
import time
import traceback
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import pytest
import torch

from grader import judge
from grader.config import AUTOTUNE_TEST, GATES, TaskSpec
from grader.gates import static
from grader.gates.notebook import Extraction, Notebook, is_notebook
from grader.judge import known_errors, speed
from grader.judge.diagnosis import diagnose
from grader.judge.known_errors import Tritons
from grader.protocol import (
    JobFolders,
    WorkerRun,
    worker_stages,
)
from grader.results import TaskResult, TestResult
from grader.results.outcome import Outcome

JUDGE_CACHE = 12
"""The most tasks' cases a judge process keeps (a homework has up to 12 tasks): a server judging for weeks holds
at most these, however many submissions and grading runs it sees."""
_JUDGE_CASES: collections.OrderedDict[tuple, list[judge.CaseData]] = collections.OrderedDict()

SUITE = Path(__file__).parents[1] / "judge" / "suite.py"
AUTOLOAD_ENV = "PYTEST_DISABLE_PLUGIN_AUTOLOAD"
PROFILE_ENV = "GRADER_PROFILE_JUDGE"
"""A folder: each job's judging is profiled (cProfile) into it, a file per job (scripts/bench_class.py
--profile-judge)."""
TIMER_OWN = ("load", "load_inputs", "load_sandbox", "load_cuda", "import", "compile")
"""Stages also summed apart for a job's timing worker, as `timing_load`, `timing_import`, `timing_compile` and so
on (the staff JSON's `stages`): what the speed tier costs beyond its `timing` stage."""


def judge_job(job: Job, folders: JobFolders, ctx: GradingContext, runs: list[WorkerRun],
              staff_records: Path | None = None) -> TaskResult:
    """Read the workers' record streams, run the pytest suite over them, build the result. Never raises: a
    failure of the grader's own while judging becomes this job's failed verdict (`grader_failure`)."""
    start = time.perf_counter()
    profile_dir = os.environ.get(PROFILE_ENV)
    profiler = cProfile.Profile() if profile_dir else None
    try:
        if profiler:
            profiler.enable()
        if ctx.static.ok:
            ctx.results = judge.WorkerResults.read(runs, staff_records, [c.id for c in ctx.task.cases])
        entries, out = run_suite(ctx, folders)
        result = build_result(job, ctx, entries, out, runs)
    except Exception as exc:  # noqa: BLE001 - one job's failure stays that job's
        return grader_failure(job, ctx.device, exc, runs)
    finally:
        if profiler:
            profiler.disable()
            profiler.dump_stats(Path(profile_dir) / f"{job.student}-{job.task.id}-{os.getpid()}.prof")
    result.staff["judge_seconds"] = round(time.perf_counter() - start, 2)
    result.staff.setdefault("stages", {})["judge"] = round(time.perf_counter() - start, 4)
    return result


def judge_job_apart(job: Job, folders: JobFolders, report: static.StaticReport, device: str,
                    runs: list[WorkerRun], backend: str, case_files: dict[int, Path], answers: Path,
                    staff_records: Path | None = None, tritons: Tritons | None = None,
                    speed_pending: bool = False, answers_key: str = "") -> TaskResult:
    """`judge_job` in a judge process of a pool: it reads the inputs the workers got and the oracle's answers
    (once per content and process: `answers_key`, the answers file's sha256, else its path; the JUDGE_CACHE most
    recent kept). Like the main process, it never imports a submission."""
    try:
        key = (job.task.id, device, answers_key or str(answers))
        if key in _JUDGE_CASES:
            _JUDGE_CASES.move_to_end(key)
        else:
            saved = torch.load(answers, weights_only=True)
            cases = []
            for i in range(len(case_files)):
                sent = torch.load(case_files[i], weights_only=True)
                expected = tuple(saved["expected"][i])
                judge.keep_ranges(expected, saved["ranges"][i])
                twin, answer = sent.get("twin"), (saved.get("twins") or [None] * len(case_files))[i]
                if twin is not None and answer is not None:
                    judge.keep_ranges(tuple(answer["expected"]), answer["ranges"])
                    twin = judge.CaseData(sent["id"], list(twin["args"]), dict(twin["kwargs"]),
                                          tuple(answer["expected"]))
                cases.append(judge.CaseData(sent["id"], list(sent["args"]), dict(sent["kwargs"]), expected,
                                            twin=twin if answer is not None else None))
            _JUDGE_CASES[key] = cases
            while len(_JUDGE_CASES) > JUDGE_CACHE:
                _JUDGE_CASES.popitem(last=False)
    except Exception as exc:  # noqa: BLE001
        return grader_failure(job, device, exc, runs)
    ctx = GradingContext(job.task, device, report, _JUDGE_CASES[key], None, backend, tritons or Tritons(),
                         speed_pending=speed_pending)
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


def refused_result(task: TaskSpec, student: str, submission: str, device: str, why: str) -> TaskResult:
    """The result of a submission the intake refused (a link, a file that is not regular or is too large, one that
    cannot be read): every test failed with `why`, 0 points. Its sha256 is that of the refusal, so a rerun of the
    batch finds it graded (resume) until the student hands in something else."""
    message = f"not graded: {why}"
    points = task.test_points(device)
    tests = [TestResult(name, Outcome.FAILED.label, 0.0, points[name], message, visibility=task.visibility(name))
             for name in task.test_names]
    return TaskResult(task=task.id, student=student, submission=submission, score=0.0,
                      max_score=task.points_on(device), tests=tests, checks={}, environment=dict(environment(device)),
                      submission_sha256=hashlib.sha256(f"refused: {why}".encode()).hexdigest(), graded_at=_now(),
                      staff={"intake": why})


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
    version and the hash of another. A batch passes the bytes it hashed for the ledger. For a notebook: the
    source extracted for this task (grader/gates/notebook.py), never the notebook's own bytes."""
    notebook: Extraction | None = None
    """Set when the submission is a notebook (`.ipynb`): where each line of `source` comes from, so that the
    result's messages cite the notebook's cells (`build_result`). Passed with `source`, or made by `read`."""

    def read(self) -> bytes:
        if self.source is None:
            data = self.submission.read_bytes()
            if is_notebook(self.submission):
                self.notebook = Notebook(data, self.submission.name).extract(self.task)
                data = self.notebook.source
            self.source = data
        return self.source

    @property
    def module_path(self) -> Path:
        """What the worker's copy is named after: the submission, or for a notebook its extracted `.py`."""
        return self.submission.with_suffix(".py") if is_notebook(self.submission) else self.submission

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
    tritons: Tritons = field(default_factory=Tritons)
    """The triton grading here and the course's: what a known error's message names (grader/judge/known_errors.py)."""
    _verdicts: dict[int, judge.Verdict] = field(default_factory=dict)
    caught_at: int | None = None
    """The first case that caught the file doing the task's work outside its kernels (`case_verdict`)."""
    speed_pending: bool = False
    """The first pass of a job with speed tests: its cases are judged while its timing worker runs; the speed
    tests say so (grader/pipeline/grading.py `first_pass`)."""

    def pending(self) -> list[str]:
        """The speed tests this judgment leaves for the second pass."""
        return [p.id for p in self.task.perf if self.device in p.devices] if self.speed_pending else []

    def _not_run(self) -> str | None:
        if not self.static.imports and not self.static.signatures:
            if self.results is None:
                return "not run"
            if self.results.problem:
                return self.results.problem
            load = self.results.load
            if not load.get("ok"):
                where = "; ".join(load.get("where") or [])
                missing = known_errors.unsupported_api(load, self.tritons, where)
                if missing:
                    return f"not run: importing the submission failed: {missing}"
                err = str(load.get("error", "unknown error")).splitlines()[0]
                note = known_errors.cuda_assert_note(load, self.device)
                return f"not run: importing the submission failed: {err}" + (f" ({where})" if where else "") + \
                    (f"\n{note}" if note else "")
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
        note = long_config_note(self.results.load["kernels"], self.task)
        # The configs must also work: points for autotuning go to a kernel that passes at least one case
        # under every one of its configs (each case runs every config).
        if self.task.cases and not any(self.case_verdict(i).ok for i in range(len(self.task.cases))):
            if not seen:  # nothing to autotune: the test only asks for a working kernel
                return judge.Verdict(False, "no case passes: no kernel of this task must be autotuned, so this test "
                                            "only asks for one passing case (the case tests say what fails)")
            return judge.Verdict(False, "; ".join(seen) + ", but no case passes under all of them "
                                 "(autotune points need a working autotuned kernel)", note=note)
        return judge.Verdict(True, "; ".join(seen) or "no kernel of this task must be autotuned", note=note)

    def case_verdict(self, index: int) -> judge.Verdict:
        """Case `index`'s verdict. Every case is judged at the first call: a file caught doing the task's work
        outside its kernels in any case (`Verdict.caught`) earns no correctness points for the task, so each
        other case fails too, saying where it was caught."""
        if not self._verdicts:
            verdicts = {i: self._case_verdict(i) for i in range(len(self.cases))}
            self.caught_at = next((i for i, v in verdicts.items() if v.caught), None)
            if self.caught_at is not None:
                case = self.task.cases[self.caught_at]
                where = f"case {case.id}" if case.visibility == "public" else "a hidden case"
                for i, v in verdicts.items():
                    if i != self.caught_at:
                        verdicts[i] = withheld(v, where, verdicts[self.caught_at].caught)
            self._verdicts.update(verdicts)
        return self._verdicts[index]

    def _case_verdict(self, index: int) -> judge.Verdict:
        why = self._not_run()
        if why:
            staff = ""
            if self.results and self.results.load:
                staff = self.results.load.get("traceback", "")
            return judge.Verdict(False, why, staff=staff)
        return judge.judge_case(self.task, index, self.cases[index], self.results, self.device, self.tritons)


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
    # Only the plugins the suite uses: the ones installed beside pytest (hypothesis, anyio, ... in the H100 box's
    # image) are not loaded (PYTEST_DISABLE_PLUGIN_AUTOLOAD), so none can change a verdict, and no module is
    # rewritten for assertions (the suite fails with its own messages). Measured on the H100 box, 47 INT8 jobs:
    # plugin start-up and assertion rewriting were 1.5 of the 5.0 seconds a job took to judge.
    args = [str(SUITE), "-q", "--assert=plain", "-p", "pytest_jsonreport.plugin",
            *[a for name in unused for a in ("-p", f"no:{name}")], "--rootdir", str(workdir),
            "-c", str(ini), "--json-report", f"--json-report-file={report_path}",
            "--json-report-omit", "collectors", "log", "warnings", "keywords"]
    ini.write_text("[pytest]\n")
    out = io.StringIO()
    autoload = os.environ.get(AUTOLOAD_ENV)
    os.environ[AUTOLOAD_ENV] = "1"
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            pytest.main(args, plugins=[_SuitePlugin(ctx)])
    finally:
        if autoload is None:
            os.environ.pop(AUTOLOAD_ENV, None)
        else:
            os.environ[AUTOLOAD_ENV] = autoload
    try:
        report = json.loads(report_path.read_text())
        entries = {_test_name(t["nodeid"]): t for t in report.get("tests", [])}
    except (OSError, ValueError, KeyError):
        entries = {}
    return entries, out.getvalue()


def withheld(verdict: judge.Verdict, where: str, caught: str) -> judge.Verdict:
    """A case's verdict when the case `where` ("case ID", or "a hidden case") caught the file doing the task's work
    outside its kernels."""
    line = (f"points withheld: in {where} this file did the task's work outside its kernels (that case's test says "
            "how); a file caught so in any case earns no points for the task's cases")
    message = line if verdict.ok else f"{verdict.message}\n{line}"
    return dataclasses.replace(verdict, ok=False, message=message, caught=caught)


def _metric(value: object) -> dict[str, float]:
    """A speed test's metric as the judge wrote it (numbers by name), or nothing."""
    if not isinstance(value, dict):
        return {}
    return {str(k): float(v) for k, v in value.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}


MANY_CONFIGS = 8
"""More autotune configs than this on a kernel get a note: every case runs under each config (on the CPU interpreter
too), so 30 configs graded task 10 in 158 s where 2 took 9 s, and the student was told nothing."""


def long_config_note(kernels: dict, task: TaskSpec) -> str:
    """A note for a submission whose autotuned kernels have many configs: how much longer its grading takes."""
    counts = {name: len((info or {}).get("configs") or []) for name, info in kernels.items()
              if isinstance(info, dict) and info.get("kind") == "autotune"}
    many = {name: n for name, n in counts.items() if n > MANY_CONFIGS}
    if not many:
        return ""
    need = max([k.min_configs for k in task.autotuned_kernels] + [2])
    return ("; ".join(f"{name} has {n} autotune configs" for name, n in many.items())
            + f": every case runs under each of them, so grading takes about {max(many.values()) / need:.0f}x as "
            f"long as with {need} (what this task asks for), and on a GPU autotuning at first call takes as much "
            "longer; a few well-chosen configs are enough")


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
        if entry.get("outcome") == "skipped" and (name in job.task.not_run_on(ctx.device) or name in ctx.pending()):
            outcome = Outcome.NOT_RUN  # only a test the task says is not run here, or not yet; any other skip fails
        if message is None:  # the judge itself raised: students get a short line, staff the traceback
            outcome = Outcome.ERROR
            message = "internal grader error while judging this test (staff see the traceback)"
            staff = json.dumps(entry.get("call") or entry.get("setup") or {})[-20000:]
        printed = meta.get("printed") if not passed and isinstance(meta.get("printed"), str) else ""
        tests.append(TestResult(name, outcome.label, max_points if passed else 0.0, max_points, message, staff,
                                visibility=job.task.visibility(name), metric=_metric(meta.get("metric")),
                                printed=printed[:judge.PRINTED_CHARS + 100],
                                note=meta["note"][:500] if isinstance(meta.get("note"), str) else ""))
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
                      # the longest start-up (spawn to first record), which no limit counts against the submission
                      "worker_start_s": max(r.started_s or 0.0 for r in runs),
                      "workers": len(runs)})
        if any(r.node for r in runs):  # the Ray backend: which nodes ran this job's workers
            staff["nodes"] = sorted({r.node for r in runs if r.node})
        stages: dict[str, float] = {"judge": 0.0}
        for r in runs:  # where the workers' time went (the worker's word: statistics for the class benchmark)
            kind = "timing_worker" if r.perf else "case_worker"
            stages[f"{kind}_wall"] = round(stages.get(f"{kind}_wall", 0.0) + r.seconds, 4)
            for name, value in worker_stages(r.status()).items():
                stages[name] = round(stages.get(name, 0.0) + value, 4)
                if r.perf and name in TIMER_OWN:  # the timing worker's share (its compile: what its case
                    key = f"timing_{name}"        # workers left for it to compile)
                    stages[key] = round(stages.get(key, 0.0) + value, 4)
        staff["stages"] = stages
    if job.notebook is not None:  # the lines every message cites, as the notebook's cells (gates/notebook.py)
        for t in tests:
            t.message = job.notebook.translate(t.message)
        for gate in ("imports", "signatures"):
            if isinstance(checks[gate], list):
                checks[gate] = [job.notebook.translate(m) for m in checks[gate]]
        staff["notebook"] = {"cells": list(job.notebook.cells),
                             "graded_source": job.notebook.source.decode(errors="replace")[-20000:]}
    pictures = {job.task.cases[i].id: v.picture for i, v in ctx._verdicts.items() if v.picture}
    at = ctx.caught_at
    caught = {"case": job.task.cases[at].id, "why": ctx._verdicts[at].caught} if at is not None else {}
    outcome = {t.name: t.outcome for t in tests}
    diagnosis = diagnose([(c.params_for(ctx.device), outcome[c.id] == Outcome.PASSED.label) for c in job.task.cases
                          if c.visibility == "public" and outcome.get(c.id) in (Outcome.PASSED.label,
                                                                               Outcome.FAILED.label)])
    return TaskResult(
        diagnosis=diagnosis or "",
        pictures=pictures,
        task=job.task.id, student=job.student, submission=str(job.submission),
        score=round(sum(t.points for t in tests), 6), max_score=job.task.points_on(ctx.device), tests=tests,
        checks=checks,
        environment=env, submission_sha256=job.sha256, graded_at=_now(), staff=staff,
        withheld={**asdict(job.task.withheld), "message": job.task.withheld.sentence()} if job.task.withheld else {},
        pending=ctx.pending(),
        caught=caught,
    )
