"""The worker/judge contract (grader/protocol) and the runner's side of it: a typed job, a run folder that is
always new, the record stream's bounds, a worker that dies before its first case, a judging failure that stays
its job's, and grading trees left by killed runs."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grader import protocol
from grader.config import ROOT, SandboxConfig, load_config
from grader.pipeline import grading
from grader.pipeline.grading import Job, grade_jobs

SOLUTION = (ROOT / "tasks" / "10_quantize_global_int8" / "solution.py").read_text()


@pytest.fixture(scope="module")
def small10(task10):
    return task10.subset({"n1_fp32", "n127_fp16"}, autotune_points=0.0, timeout_s={"cpu": 60})


@pytest.fixture(scope="module")
def cfg():
    return load_config(ROOT / "config.yaml")


def _job(**changes) -> protocol.WorkerJob:
    fields = dict(run_id="0-0", submission="/s.py", entry="f", kernels=["k"], device="cpu",
                  inputs={0: "/c0.pt", 3: "/c3.pt"}, cases=[3, 0])
    return protocol.WorkerJob(**{**fields, **changes})


def test_a_worker_job_travels_whole_and_nothing_else_passes():
    job = _job(perf=[protocol.PerfItem(index=0, test="speed", case=3, baseline="b.py", warmup=1, reps=5)])
    assert protocol.WorkerJob.from_json(job.to_json()) == job
    data = json.loads(job.to_json())
    for bad, why in [({**data, "timeout": 30}, "unknown field"), ({**data, "cases": [7]}, "indices of its inputs"),
                     ({**data, "entry": 5}, "entry must be a str"), ({**data, "inputs": {"0": 5}}, "file names"),
                     ([1], "JSON object")]:
        with pytest.raises(ValueError, match=why):
            protocol.WorkerJob.from_json(json.dumps(bad))


def test_a_run_folder_is_always_new(tmp_path):
    """A name that exists already (a folder or a link a worker planted) is refused, never reused."""
    tree = protocol.GradingTree(tmp_path)
    folders = tree.job("job-0000")
    run = protocol.make_run_folder(folders, "0-0")
    assert run.is_dir() and not any(run.iterdir())
    with pytest.raises(FileExistsError):
        protocol.make_run_folder(folders, "0-0")
    os.symlink(tmp_path / "elsewhere", folders.run_folder("0-1"))
    with pytest.raises(FileExistsError):
        protocol.make_run_folder(folders, "0-1")
    assert oct(os.stat(tree.trusted).st_mode & 0o777) == oct(protocol.TRUSTED_MODE)
    os.symlink(tmp_path, folders.trusted / "records-0-2.bin")
    with pytest.raises(FileExistsError):  # the trusted side creates its files, never opens one that is there
        protocol.create_trusted(folders.trusted / "records-0-2.bin")


def _graded_alone(cfg, task, source: str, tmp_path: Path, sandbox_on: bool = True, **changes):
    path = tmp_path / "sub.py"
    path.write_text(source)
    cfg = dataclasses.replace(cfg, sandbox=SandboxConfig(enabled=sandbox_on), **changes)
    (result,) = grade_jobs([Job(task, path, "s")], cfg, "cpu", workers=1, static_checks=False)
    return result


def test_a_worker_that_dies_before_its_first_case_is_started_once_more(cfg, small10, tmp_path):
    """It dies at import the first time only (a marker file outside: the sandbox is off here to let it keep
    one): the second worker grades every case. Before, such a worker was never restarted (0 points)."""
    marker = tmp_path / "died-once"
    source = (f"import os\nif not os.path.exists({str(marker)!r}):\n    open({str(marker)!r}, 'w').close()\n"
              "    os.abort()\n" + SOLUTION)
    result = _graded_alone(cfg, small10, source, tmp_path, sandbox_on=False)
    assert marker.exists()
    assert result.score == result.max_score, [t.message for t in result.tests]
    assert result.staff["workers"] == 2 and "SIGABRT" in result.staff["worker_exit"]


def test_a_worker_that_always_dies_first_is_restarted_only_once(cfg, small10, tmp_path):
    result = _graded_alone(cfg, small10, "import os\nos.abort()\n" + SOLUTION, tmp_path)
    assert result.score == 0 and result.staff["workers"] == 2
    assert "the worker was killed by SIG" in {t.name: t.message for t in result.tests}["n1_fp32"]


def test_a_garbled_record_fails_its_own_job_only(cfg, small10, tmp_path):
    """The submission finds its record stream's descriptor and writes a LOAD frame of another shape after the
    worker's (the last frame of a kind wins): that job fails with a message; the one beside it is graded."""
    hostile = tmp_path / "hostile.py"
    hostile.write_text(SOLUTION.replace("def quantize_global(", '''def _forge():
    import json, os, struct
    for fd in map(int, os.listdir("/proc/self/fd")):
        try:
            if os.readlink(f"/proc/self/fd/{fd}").endswith(".bin"):
                body = json.dumps({"ok": True, "kernels": {}, "environment": 5, "where": 7}).encode()
                os.write(fd, struct.pack("<4sBxxxqQ", b"GRR1", 1, 0, len(body)) + body)
        except OSError:
            pass


def quantize_global(''', 1).replace("    n_elements = x.numel()\n", "    _forge()\n    n_elements = x.numel()\n", 1))
    good = tmp_path / "good.py"
    good.write_text(SOLUTION)
    cfg = dataclasses.replace(cfg, judges=1)
    bad_r, good_r = grade_jobs([Job(small10, hostile, "bad"), Job(small10, good, "good")], cfg, "cpu", workers=2,
                               static_checks=False)
    assert good_r.score == good_r.max_score
    assert bad_r.score == 0
    assert "unexpected shape" in {t.name: t.message for t in bad_r.tests}["n1_fp32"]


def test_a_failure_while_judging_fails_that_job_only(cfg, small10, tmp_path, monkeypatch):
    from grader.pipeline import result as pipeline_result

    real = pipeline_result.build_result

    def build(job, *args, **kwargs):
        if job.student == "unlucky":
            raise RuntimeError("boom")
        return real(job, *args, **kwargs)

    monkeypatch.setattr(pipeline_result, "build_result", build)
    good = tmp_path / "good.py"
    good.write_text(SOLUTION)
    other = tmp_path / "other.py"  # not the same bytes: identical files are graded once (test_identical_files...)
    other.write_text(SOLUTION + "\n# lucky's own copy\n")
    unlucky, lucky = grade_jobs([Job(small10, good, "unlucky"), Job(small10, other, "lucky")],
                                dataclasses.replace(cfg, judges=0), "cpu", workers=2)
    assert lucky.score == lucky.max_score
    assert unlucky.score == 0 and all(t.outcome == "error" for t in unlucky.tests)
    assert all(t.message.startswith("the grader could not judge this run: RuntimeError") for t in unlucky.tests)
    assert "boom" in unlucky.staff["grader_error"] and "boom" not in json.dumps(unlucky.student_json())


def test_trees_left_by_killed_runs_are_removed_at_the_next_start(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    (tmp_path / f"grader-{dead}-abc123").mkdir()
    (tmp_path / f"grader-{os.getpid()}-def456").mkdir()  # a run still going
    (tmp_path / "grader-notmine").mkdir()
    removed = grading.remove_leftovers(tmp_path)
    assert removed == [tmp_path / f"grader-{dead}-abc123"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([f"grader-{os.getpid()}-def456", "grader-notmine"])


def test_the_shared_triton_cache_gets_launchers_and_never_a_kernel(tmp_path, monkeypatch):
    """A trusted warm-up run of the reference compiles into a cache of its own; only entries of compiled C modules
    (Triton's launchers, its driver module) are copied to the cache every worker may read. Entries of an earlier
    grader that hold a kernel are pruned."""
    from grader.isolation.runner import JobSpec, cache_env
    from grader.worker import tritoncache

    monkeypatch.setenv(tritoncache.SHARED_ENV, str(tmp_path / "shared"))
    private = tmp_path / "private"
    launcher, kernel, linked = private / "a", private / "b", private / "c"
    for folder in (launcher, kernel, linked):
        folder.mkdir(parents=True)
    (launcher / "__triton_launcher.cpython-312-x86_64-linux-gnu.so").write_bytes(b"ELF")
    for name in ("_quantize.json", "_quantize.ttir", "_quantize.cubin", "__grp___quantize.json"):
        (kernel / name).write_text("the reference's kernel")
    os.symlink(kernel / "_quantize.cubin", linked / "x.so")
    assert tritoncache.publish_launchers(private) == 1
    assert sorted(p.name for p in (tmp_path / "shared").iterdir()) == ["a"]
    old = tmp_path / "shared" / "old-kernel"
    old.mkdir()
    (old / "k.cubin").write_text("x")
    assert tritoncache.prune_shared() == 1 and sorted(p.name for p in (tmp_path / "shared").iterdir()) == ["a"]
    spec = JobSpec(Path("s.py"), "f", [], "cuda", {}, 10.0, warm=True)
    assert cache_env(spec, "/job/cache")["TRITON_CACHE_DIR"] == "/job/cache"


def test_identical_files_are_graded_once(cfg, small10, tmp_path, monkeypatch):
    """The same bytes for the same task: one grading, recorded for every student who sent them, each under their
    own name; a different file is graded on its own."""
    started = []
    real = grading.run_shard

    def counting(folders, shard, spec, cases):
        started.append(spec.source_bytes())
        return real(folders, shard, spec, cases)

    monkeypatch.setattr(grading, "run_shard", counting)
    files = []
    for name, text in (("a.py", SOLUTION), ("b.py", SOLUTION), ("c.py", SOLUTION + "\n# mine\n")):
        files.append(tmp_path / name)
        files[-1].write_text(text)
    a, b, c = grade_jobs([Job(small10, files[0], "ann"), Job(small10, files[1], "bob"), Job(small10, files[2], "cy")],
                         cfg, "cpu", workers=2)
    mine = (SOLUTION + "\n# mine\n").encode()
    assert set(started) == {SOLUTION.encode(), mine}
    assert started.count(SOLUTION.encode()) == started.count(mine)  # ann's and bob's file: one grading's shards
    assert a.score == b.score == c.score == a.max_score
    assert (b.student, b.submission) == ("bob", str(files[1])) and b.tests == a.tests
    assert "ann/a.py" in b.staff["reuses"] and "reuses" not in a.staff and "reuses" not in c.staff


def test_printing_never_decides_a_verdict(cfg, small10, tmp_path, monkeypatch):
    """A file that prints megabytes at import and in each call gets the verdicts of the same file without the
    prints: a call's output is kept bounded for the student (and only under a failing test), and the runner cuts
    the worker's log back as it grows (runner.cap_log), so a print never meets the sandbox's file-size limit
    (here 48 MiB, with the log cut back past 1 MiB, and 24 MB printed a call, three calls a case; before, each
    print past the limit raised 'File too large'). The margin is the runner's: it looks every 20 ms here, and a
    look may come late on a busy machine (with an 8 MiB limit and 12 MB a call, CI once saw a case fail)."""
    from grader.isolation import runner

    monkeypatch.setattr(runner, "LOG_CAP", 1 << 20)
    monkeypatch.setattr(runner, "POLL_S", 0.02)
    printer = tmp_path / "printer.py"
    loud = ("    for _ in range(240):\n        print('x' * 100_000)\n        sum(range(20_000))\n"
            "    n_elements = x.numel()\n")
    # A call's prints are kept for the student, bounded (worker.Printed); what the module prints at import goes
    # to the log, which the runner cuts back
    at_import = "\nfor _ in range(240):\n    print('x' * 100_000)\n    sum(range(20_000))\n"
    printer.write_text(SOLUTION.replace("    n_elements = x.numel()\n", loud, 1) + at_import)
    quiet = tmp_path / "quiet.py"
    quiet.write_text(SOLUTION)
    small_files = dataclasses.replace(cfg, sandbox=SandboxConfig(limits={"file_size_mb": 48}))
    loud_r, quiet_r = grade_jobs([Job(small10, printer, "loud"), Job(small10, quiet, "quiet")], small_files, "cpu",
                                 workers=2)
    assert [(t.name, t.outcome) for t in loud_r.tests] == [(t.name, t.outcome) for t in quiet_r.tests]
    assert loud_r.score == quiet_r.score == quiet_r.max_score
    assert "the grader dropped" in loud_r.staff["worker_log"]


def test_the_layer_contracts_hold_and_can_fail(tmp_path):
    """pyproject.toml's import-linter contracts (make test runs them): kept by the tree, broken by a copy of it
    whose judge imports the runner (which starts workers) and the address check (worker side), whose authoring
    imports a class's operation, and whose class operation imports the selftest."""
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    lint = Path(sys.executable).parent / "lint-imports"
    if not lint.exists():
        pytest.skip("import-linter is not installed (make setup installs it)")
    root = Path(__file__).resolve().parent.parent
    kept = subprocess.run([str(lint), "--config", str(root / "pyproject.toml")], cwd=root, capture_output=True,
                          text=True, timeout=300)
    assert kept.returncode == 0, kept.stdout[-2000:]
    shutil.copytree(root / "grader", tmp_path / "grader", ignore=shutil.ignore_patterns("__pycache__"))
    judge = tmp_path / "grader" / "judge" / "__init__.py"
    judge.write_text(judge.read_text() + "\nfrom grader.isolation.runner import run_shard  # noqa\n"
                     "from grader.worker import address_check  # noqa\n")
    for module, line in (("authoring/taskcheck.py", "from grader.course import ledger"),
                         ("course/canvas.py", "from grader.authoring import selftest")):
        path = tmp_path / "grader" / module
        path.write_text(path.read_text() + f"\n{line}  # noqa\n")
    broken = subprocess.run([str(lint), "--config", str(root / "pyproject.toml"), "--no-cache"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=300, env={"PYTHONPATH": str(tmp_path),
                                                                              "PATH": "/usr/bin:/bin"})
    assert broken.returncode != 0, broken.stdout[-2000:] + broken.stderr[-2000:]
    assert "grader.judge -> grader.isolation.runner" in broken.stdout, broken.stdout[-2000:]
    assert "grader.judge is not allowed to import grader.worker.address_check" in broken.stdout, broken.stdout[-2000:]
    assert "grader.authoring.taskcheck -> grader.course.ledger" in broken.stdout, broken.stdout[-2000:]
    assert "grader.course.canvas -> grader.authoring.selftest" in broken.stdout, broken.stdout[-2000:]


def test_the_submission_is_read_once(cfg, small10, tmp_path):
    """The bytes a job was given (a batch passes those it hashed for the ledger) are what the static check, the
    worker and the result's sha256 see: here the file on disk is the skeleton, and the bytes the solution's, so
    a file changed mid-grading cannot get a verdict for one version and the hash of another."""
    import hashlib

    path = tmp_path / "q.py"
    path.write_bytes((ROOT / "tasks" / "10_quantize_global_int8" / "skeleton.py").read_bytes())
    (result,) = grade_jobs([Job(small10, path, "ann", SOLUTION.encode())], cfg, "cpu", workers=1)
    assert result.score == result.max_score > 0
    assert result.submission_sha256 == hashlib.sha256(SOLUTION.encode()).hexdigest()


def test_a_live_stream_is_read_on_from_where_the_last_look_stopped(tmp_path):
    """StatusTail: the last status so far, through other frames by their headers, a frame not yet whole left for
    the next look, a hostile status nested too deep passed over (it raised RecursionError, out of the runner's
    wait, before the worker was stopped), and a garbled frame ending the looking with the last status kept."""
    import os

    from grader.protocol import HEADER, MAGIC, Kind, RecordStream, RecordWriter, StatusTail

    path = tmp_path / "records"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    writer, tail = RecordWriter(fd), StatusTail(path)
    assert tail.latest() == {}
    writer.json(Kind.STATUS, {"case": "a", "index": 0})
    writer.tensors(Kind.CASE, 0, {"id": "a", "runs": []})
    assert tail.latest() == {"case": "a", "index": 0}
    body = b'{"case": "b", "auditing": true}'
    os.write(fd, HEADER.pack(MAGIC, int(Kind.STATUS), 0, len(body)) + body[:10])  # half a frame: not yet
    assert tail.latest() == {"case": "a", "index": 0}
    os.write(fd, body[10:])
    assert tail.latest() == {"case": "b", "auditing": True}
    deep = b"[" * 100_000  # nested past the JSON parser's recursion limit: no status, and no exception
    os.write(fd, HEADER.pack(MAGIC, int(Kind.STATUS), 0, len(deep)) + deep)
    assert tail.latest() == {"case": "b", "auditing": True}
    assert RecordStream(path).status == {"case": "b", "auditing": True}
    os.write(fd, b"\0" * HEADER.size)  # garbled: the looking ends there
    writer.json(Kind.STATUS, {"case": "c"})
    assert tail.latest() == {"case": "b", "auditing": True} and tail.garbled
    os.close(fd)


_QUIET_WORKER = """
import os, sys, time
from grader.protocol import Kind, RecordWriter
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND)
RecordWriter(fd).json(Kind.STATUS, {"case": "a", "index": 0, "auditing": sys.argv[2] == "audit"})
time.sleep(float(sys.argv[3]))
"""


@pytest.mark.parametrize("phase, quiet, expected", [("graded", 4.0, ("stalled", 1.5)), ("audit", 3.0, ("ended", 0.0)),
                                                    ("audit", 8.0, ("stalled", 5.0))])
def test_a_worker_is_stopped_after_the_stall_limit_of_what_it_says_it_is_doing(tmp_path, phase, quiet, expected):
    """grader/isolation/runner.py `_wait` on CUDA with the address check: a graded call that goes quiet is stopped
    after the stall limit (1.5 s here), the address check's interpreted re-run only after its own (5 s here: the
    CPU's); a quiet re-run that ends in time is not stopped."""
    import subprocess
    import sys

    from grader.config import ROOT
    from grader.isolation.runner import _Spawned, _wait

    records = tmp_path / "records"
    records.touch()
    proc = _Spawned(subprocess.Popen([sys.executable, "-c", _QUIET_WORKER, str(records), phase, str(quiet)],
                                     cwd=ROOT))
    try:
        ended, _quiet, limit, started = _wait(proc, 30.0, 1.5, records, audit_stall_s=5.0)
    finally:
        proc.popen.kill()
        proc.popen.wait()
    assert (ended, limit) == expected and started is not None


_SLOW_START = """
import os, sys, time
from grader.protocol import Kind, RecordWriter
time.sleep(float(sys.argv[2]))  # a fresh interpreter importing torch and triton on a loaded machine
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND)
RecordWriter(fd).json(Kind.STATUS, {"started": True})
time.sleep(float(sys.argv[3]))  # the submission's own time
"""


@pytest.mark.parametrize("start, own, expected", [(3.0, 1.5, "ended"), (0.0, 4.0, "stalled"), (8.0, 0.0, "timeout")])
def test_the_limits_count_from_the_workers_first_record(tmp_path, start, own, expected):
    """grader/isolation/runner.py `_wait`: the time limit (6 s here) and the stall limit (2 s) count from the
    worker's first record, so a start-up of 3 s followed by 1.5 s of the submission's own work ends in time (before,
    it was stopped at 2 s, having run nothing of the submission: the CI failure of stop 61); 4 s of its own work
    without a report is stopped at the stall limit; a worker that never writes a record is stopped once its
    start-up takes the time limit."""
    import subprocess
    import sys

    from grader.config import ROOT
    from grader.isolation.runner import _Spawned, _wait

    records = tmp_path / "records"
    records.touch()
    proc = _Spawned(subprocess.Popen([sys.executable, "-c", _SLOW_START, str(records), str(start), str(own)],
                                     cwd=ROOT))
    try:
        ended, _quiet, _limit, started = _wait(proc, 6.0, 2.0, records)
    finally:
        proc.popen.kill()
        proc.popen.wait()
    assert ended == expected
    if start < 6.0:
        assert started is not None and started >= start
    else:
        assert started is None


def test_a_job_is_judged_without_waiting_for_another_tasks_oracle(cfg, small10, monkeypatch):
    """The oracle answers each task in a thread of its own, in job order: a job is judged once its runs and its
    own task's answers are there. Here task 11's oracle takes 25 s; the task-10 job before it is judged (and
    handed to on_result) while that oracle still works. Before, every task's answers came first, in the main
    thread, and no result could come before all of them."""
    from grader.config import load_task
    from grader.pipeline import oracle

    t11 = load_task(ROOT / "tasks" / "11_quantize_rowwise_int8")
    small11 = t11.subset({t11.cases[0].id}, autotune_points=0.0)
    slow_done = []
    answer_cases = oracle.answer_cases

    def slow(task, cases):
        answer_cases(task, cases)
        if task.id == small11.id:
            time.sleep(25)
            slow_done.append(time.monotonic())

    monkeypatch.setattr(oracle, "answer_cases", slow)
    given = []
    jobs = [Job(small10, ROOT / "tasks" / small10.id / "solution.py", "a"),
            Job(small11, ROOT / "tasks" / small11.id / "solution.py", "b")]
    first, second = grade_jobs(jobs, cfg, "cpu", workers=2,
                               on_result=lambda r: given.append((r.task, time.monotonic())))
    assert first.score == first.max_score and second.score == second.max_score
    when = dict(given)
    assert when[small10.id] < slow_done[0] <= when[small11.id], (given, slow_done)


def test_compile_passed_keeps_only_a_short_list_of_digests():
    """What a worker says its GPU compile check passed is read as digests and nothing else: a garbled list is no
    list (its job's later workers then compile everything again)."""
    good = ["a" * 64, "0123456789abcdef" * 4]
    assert protocol.compile_passed({"compile_passed": good + good}) == sorted(good)
    for garbled in (["A" * 64], ["a" * 63], ["a" * 64 + "\n"], [1], "a" * 64, {"x": 1},
                    ["a" * 64] * (protocol.records.COMPILE_PASSED_MAX + 1)):
        assert protocol.compile_passed({"compile_passed": garbled}) == []
    assert protocol.compile_passed({}) == [] and protocol.compile_passed("done") == []
    with pytest.raises(ValueError, match="compile_passed"):
        protocol.WorkerJob.from_json(json.dumps({"run_id": "r", "submission": "s", "entry": "f", "kernels": [],
                                                 "device": "cpu", "inputs": {}, "cases": [],
                                                 "compile_passed": [3]}))


def test_worker_stages_keep_only_known_names_with_plausible_numbers():
    """A worker's stage seconds are its word, for staff statistics only: any name not in STAGES, any value that is
    not a plain number in [0, 1e6), and a `stages` that is no dict are dropped, and the job is judged as before."""
    good = {"load_cuda": 0.5, "timing_warm_baseline": 1.25, "parallel_compiles": 7}
    garbled = {"unknown": 1.0, "load": -1.0, "cases": float("inf"), "twin": float("nan"), "import": True,
               "compile": "3", "timing": [1.0], "address": 1e6, "records": {"x": 1}, "<b>x</b>": 2.0}
    assert protocol.worker_stages({"stages": {**good, **garbled}}) == good
    for status in ({"stages": "load"}, {"stages": [("load", 1.0)]}, {}, "done", None, {"stages": None}):
        assert protocol.worker_stages(status) == {}


def test_a_hidden_shard_does_not_compile_again_what_its_public_shard_compiled(cfg, tmp_path):
    """On the CPU, a job's hidden shard starts after its public one (one worker here) and is told the GPU compile
    check's keys that the public one passed: it compiles none of them again (task 20's hidden cases use the public
    ones' kernels and configs), and the verdict is the one a shard that checks everything gets."""
    from grader.config import load_task

    task = load_task(ROOT / "tasks" / "20_lowbit_pack")
    seen = []

    def runner(folders, shard, spec, cases, strip=False):
        if strip:
            spec = dataclasses.replace(spec, compile_passed=())
        runs = grading.run_shard(folders, shard, spec, cases)
        seen.append((strip, spec.sees_hidden, list(spec.compile_passed),
                     sum((r.status().get("stages") or {}).get("gpu_checks", 0) for r in runs),
                     [d for r in runs for d in protocol.compile_passed(r.status())]))
        return runs

    scores = []
    for strip in (False, True):
        (tmp_path / f"tree{int(strip)}").mkdir()
        tree = protocol.GradingTree(tmp_path / f"tree{int(strip)}")
        result = grading.GradingRun([Job(task, task.folder / "solution.py", "alice")], cfg, "cpu", tree, 1, 0,
                                    lambda *a, s=strip: runner(*a, strip=s)).grade()[0]
        scores.append((result.score, [(t.name, t.outcome) for t in result.tests]))
    (_, pub_hidden, _, pub_checks, passed), (_, hidden, told, hidden_checks, _) = seen[:2]
    assert not pub_hidden and hidden and pub_checks > 0 and passed
    assert told == sorted(set(passed)) and hidden_checks == 0
    assert seen[3][1] and seen[3][2] == [] and seen[3][3] > 0  # told nothing, it compiles them
    assert scores[0] == scores[1] and scores[0][0] > 0 and all(o == "passed" for _, o in scores[0][1])
