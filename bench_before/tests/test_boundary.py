"""The boundary between a worker (which runs a submission) and the trusted side (runner, judge), proven by hostile
submissions on the CPU interpreter. Each test shows a hole an audit found, and asserts the secure behaviour:

1. symlink planting: links a worker leaves where it can write make the trusted side (root) write through them;
2. the answer key in a class: a worker can read the oracle's answers (answers-<task>.pt) and other jobs' folders;
3. hidden inputs leak: a worker can rewrite load.json, whose environment reaches the student's own result;
4. one file stops a class: a garbled load.json makes build_result raise, and grade_jobs with it;
5. correct files lose points: shards of one job write load.json through one shared temporary name.

The hostile files look around generically (their cwd and its parents below the temp folder, TMPDIR,
tempfile.gettempdir(), /tmp): nothing here depends on where the grader keeps its files today.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from grader.config import ROOT, load_config
from grader.pipeline.grading import Job, grade_jobs

TASK10 = ROOT / "tasks" / "10_quantize_global_int8"
SOLUTION = (TASK10 / "solution.py").read_text()
CALL = "    n_elements = x.numel()\n"
RETURN = "    return output, absmax\n"
IMPORTS = "from triton.language.extra import libdevice\n"

PRELUDE = '''
import json as _json
import os as _os
import tempfile as _tempfile
import time as _time

_TOPS = {"/", "/tmp", "/var/tmp", "/dev/shm"}


def _around():
    """The folders around the worker that a hostile file tries to write: its cwd and the cwd's parents, TMPDIR and
    tempfile.gettempdir() and theirs, below the machine's temporary folder (never /tmp itself)."""
    found = []
    for start in (_os.getcwd(), _os.environ.get("TMPDIR"), _tempfile.gettempdir()):
        here = _os.path.realpath(start) if start else "/"
        for _ in range(6):
            if here in _TOPS:
                break
            if here not in found:
                found.append(here)
            here = _os.path.dirname(here)
    return found


def _find(wanted):
    """Paths of the files whose name `wanted` accepts, under the temp folders and the worker's surroundings (the
    test's own folders, pytest-*, left out)."""
    roots = {*_around(), "/tmp", _tempfile.gettempdir(), _os.environ.get("TMPDIR") or "/tmp"}
    seen = 0
    for root in sorted(roots):
        for folder, dirs, files in _os.walk(root):
            dirs[:] = [d for d in dirs if not d.startswith("pytest-")]
            for name in files:
                seen += 1
                if wanted(name):
                    yield _os.path.join(folder, name)
            if seen > 200000:
                return
'''


def _hostile(tmp_path: Path, name: str, code: str, at_call: str = "", before_return: str = "",
             edits: tuple[tuple[str, str], ...] = ()) -> Path:
    """The staff solution with PRELUDE and `code` at import, `at_call` first in each call of quantize_global,
    `before_return` just before it returns, and `edits` (old, new) made in its source."""
    source = SOLUTION.replace(IMPORTS, IMPORTS + PRELUDE + code, 1)
    indent = lambda text: "".join(f"    {line}\n" for line in text.strip("\n").splitlines())  # noqa: E731
    if at_call:
        source = source.replace(CALL, indent(at_call) + CALL, 1)
    if before_return:
        source = source.replace(RETURN, indent(before_return) + RETURN, 1)
    for old, new in edits:
        assert old in source, old
        source = source.replace(old, new, 1)
    path = tmp_path / name
    path.write_text(source)
    return path


def _good(tmp_path: Path, name: str = "good.py") -> Path:
    path = tmp_path / name
    path.write_text(SOLUTION)
    return path


def _messages(result) -> dict[str, str]:
    return {t.name: t.message for t in result.tests}


@pytest.fixture(scope="module")
def cfg():
    return load_config(ROOT / "config.yaml")


@pytest.fixture(scope="module")
def small(task10):
    return task10.subset({"n1_fp32", "n127_fp16"}, autotune_points=0.0, timeout_s={"cpu": 60})


# ----------------------------------------------------------------------------------------------- 1. symlinks


LINKS = ("pytest.ini", "report.json", "job-0-1.json", "job-0-2.json", "crash-0.json", "crash-1.json",
         "worker-0-1.log", "load.json", "status-0-1.json")

PLANT = '''
_TARGETS = {targets!r}
_NAMES = {names!r}


def _plant():
    """In every folder around that it can write: a link named after each file the grader may write there, and
    one in place of each file it sees, all pointing at files outside."""
    for folder in _around():
        try:
            seen = [e.name for e in _os.scandir(folder) if e.is_file(follow_symlinks=False)]
        except OSError:
            continue
        for name in {{*_NAMES, *seen}}:
            link = _os.path.join(folder, name)
            if name.startswith("status-") and name in seen:
                continue  # the worker's own progress report: kept, so that the runner restarts it after the crash
            try:
                if _os.path.lexists(link):
                    _os.unlink(link)
                _os.symlink(_os.path.join(_TARGETS, name if name in _NAMES else "other"), link)
            except OSError:
                pass
'''


def test_links_planted_by_a_worker_are_not_written_through(tmp_path, small, cfg):
    """Hole 1: the worker plants symlinks (pytest.ini, report.json, the next worker's job file and log, crash
    files, ...) wherever it can write around its cwd, pointing at files outside, then aborts, so that the runner
    writes a crash file and starts a new worker. The trusted side, running as root, must write through none of
    them: every target keeps its bytes, none is added, and only the hostile job fails."""
    targets = tmp_path / "targets"
    targets.mkdir()
    for name in (*LINKS, "other"):
        (targets / name).write_bytes(f"target {name}: must stay as it is\n".encode())
    before = {p.name: p.read_bytes() for p in targets.iterdir()}
    hostile = _hostile(tmp_path, "planter.py", PLANT.format(targets=str(targets), names=list(LINKS)),
                       at_call="_plant()\n_os.abort()")
    error = None
    try:
        planter, good = grade_jobs([Job(small, hostile, "planter"), Job(small, _good(tmp_path), "good")], cfg,
                                   "cpu", workers=2, static_checks=False)
    except Exception as exc:  # noqa: BLE001 - reported below, after the targets
        error = exc
    after = {p.name: p.read_bytes() for p in targets.iterdir()}
    changed = sorted(n for n in before.keys() | after.keys() if before.get(n) != after.get(n))
    assert not changed, (f"the grader wrote through the worker's links into {changed}: "
                         + "; ".join(f"{n}: {after.get(n, b'(removed)')[:80]!r}" for n in changed[:4]))
    assert error is None, f"grade_jobs raised {type(error).__name__}: {error}"
    assert good.score == good.max_score > 0, _messages(good)
    assert planter.score == 0, _messages(planter)


# ------------------------------------------------------------------------------------------- 2. answer key


THIEF = '''
_ANSWERS = []
_LOOKED = []
# torch.load from a frame of another file: the op audit leaves its work (set_ on every stored tensor) to that file
_NS = {}
exec(compile("def load(torch, path):\\n    return torch.load(path, weights_only=True)\\n", "<loader>", "exec"), _NS)


def _answer_for(x, absmax):
    """The oracle's answer for input `x`, from an answers-*.pt the grader left readable (waited for a while)."""
    deadline = _time.monotonic() + 10
    while not _ANSWERS and not _LOOKED:
        for path in _find(lambda name: name.startswith("answers-") and name.endswith(".pt")):
            try:
                loaded = _NS["load"](torch, path)
            except Exception:
                continue
            if isinstance(loaded, list):
                _ANSWERS.extend(loaded)
        if _ANSWERS or _time.monotonic() > deadline:
            _LOOKED.append(True)
        else:
            _time.sleep(0.5)
    for entry in _ANSWERS:
        try:
            q, m = entry[0], entry[1]
            if tuple(q.shape) == tuple(x.shape) and m.dtype == absmax.dtype \\
                    and torch.equal(m.reshape(()), absmax.reshape(())):
                return q
        except Exception:
            continue
    return None


@triton.jit
def _rounded_copy(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(dst_ptr + offsets, libdevice.rint(tl.load(src_ptr + offsets, mask=mask)).to(tl.int8), mask=mask)
'''

SNOOP = '''
_FOUND = []


def _snoop():
    """Other .py files in reach (another student's submission copy), waited for a while; raised as the result."""
    mine = _os.path.realpath(__file__)
    deadline = _time.monotonic() + 10
    while not _FOUND:
        names = {{_os.path.basename(p) for p in _find(lambda name: name.endswith(".py"))
                  if _os.path.realpath(p) != mine}}
        if any({victim!r} in n for n in names) or _time.monotonic() > deadline:
            _FOUND.append(sorted(names, key=lambda n: ({victim!r} not in n, n)) or ["nothing"])
        else:
            _time.sleep(0.5)
    raise RuntimeError("files of other jobs in reach: " + ", ".join(_FOUND[0])[:300])
'''

VICTIM = "victim_q7z"


def test_a_worker_reads_neither_the_answer_key_nor_another_job(tmp_path, small, cfg):
    """Hole 2: with judge processes on and more than one job, the grader saves the oracle's answers
    (answers-<task>.pt). A thief whose kernel writes zeros searches the temp folders for them, loads them and
    copies the expected output into its result; it must score 0 beside a correct job that scores full marks. A
    snoop searches the same folders for other jobs' *.py files (the submission copies): it must find none."""
    steal = """
stolen = _answer_for(x, absmax)
if stolen is not None:  # the expected values, rounded into the output by a kernel (the op audit sees no torch work)
    _rounded_copy[(triton.cdiv(n_elements, 1024),)](stolen.to(torch.float32), output, n_elements, BLOCK=1024)
"""
    thief = _hostile(tmp_path, "thief.py", THIEF, before_return=steal,
                     edits=(("libdevice.rint(127.0 * x * absmax_inv)", "libdevice.rint(0.0 * x * absmax_inv)"),))
    snoop = _hostile(tmp_path, "snoop.py", SNOOP.format(victim=VICTIM), at_call="_snoop()")
    jobs = [Job(small, thief, "thief"), Job(small, snoop, "snoop"), Job(small, _good(tmp_path, f"{VICTIM}.py"), "v")]
    thief_r, snoop_r, victim_r = grade_jobs(jobs, dataclasses.replace(cfg, judges=1), "cpu", workers=3,
                                            static_checks=False)
    problems = []
    if thief_r.score != 0:
        problems.append(f"the thief scored {thief_r.score}/{thief_r.max_score} with the oracle's answers "
                        f"(its kernel writes zeros): {_messages(thief_r)}")
    if victim_r.score != victim_r.max_score:
        problems.append(f"the correct job lost points: {_messages(victim_r)}")
    found = _messages(snoop_r)["n1_fp32"]
    if VICTIM in found:
        problems.append(f"a worker reads another job's submission: {found}")
    assert not problems, "\n".join(problems)


# --------------------------------------------------------------------------------- 3 and 4. load.json


TAMPER = '''
def _tamper(change):
    """Rewrite load.json wherever it lies around the worker."""
    for folder in _around():
        path = _os.path.join(folder, "load.json")
        try:
            with open(path) as fh:
                data = _json.load(fh)
            change(data)
            with open(path, "w") as fh:
                _json.dump(data, fh)
        except (OSError, ValueError, TypeError, AttributeError):
            pass
'''

MARKER = "LEAKED-abc123"


def test_what_a_worker_writes_does_not_reach_its_own_result(tmp_path, task10, cfg):
    """Hole 3: a correct file that also rewrites load.json, adding to its `environment` a marker and the values of
    its inputs (one case hidden), must not find them in its student JSON."""
    task = task10.subset({"n127_fp16", "negative_fp16"}, autotune_points=0.0, timeout_s={"cpu": 60})
    leak = (f"_tamper(lambda d: d['environment'].update(note={MARKER!r} + repr(x.flatten()[:4].tolist())))")
    hostile = _hostile(tmp_path, "leak.py", TAMPER, at_call=leak)
    (result,) = grade_jobs([Job(task, hostile, "leak")], cfg, "cpu", workers=1, static_checks=False)
    shown = json.dumps(result.student_json())
    assert MARKER not in shown, f"what the worker wrote reached the student's result: {result.environment}"


@pytest.mark.parametrize("judges", [0, 1], ids=["judge-here", "judge-pool"])
def test_a_garbled_load_json_fails_only_its_own_job(tmp_path, small, cfg, judges):
    """Hole 4: files that rewrite load.json with `environment: 5` or a kernel entry that is not a dict (then raise)
    made build_result raise, and grade_jobs with it. Graded with two correct files, every job must get a result:
    the correct ones full marks, the hostile ones 0 with a message for every test."""
    env5 = _hostile(tmp_path, "env5.py", TAMPER,
                    at_call="_tamper(lambda d: d.update(environment=5))\nraise RuntimeError('tampered')")
    kernel5 = _hostile(tmp_path, "kernel5.py", TAMPER,
                       at_call="_tamper(lambda d: d.update(kernels={'_quantize_global': 5}))\n"
                               "raise RuntimeError('tampered')")
    jobs = [Job(small, env5, "env5"), Job(small, _good(tmp_path, "a.py"), "a"),
            Job(small, kernel5, "kernel5"), Job(small, _good(tmp_path, "b.py"), "b")]
    try:
        results = grade_jobs(jobs, dataclasses.replace(cfg, judges=judges), "cpu", workers=4, static_checks=False)
    except Exception as exc:  # noqa: BLE001 - the hole itself
        pytest.fail(f"one hostile file stopped the whole class: grade_jobs raised {type(exc).__name__}: {exc}")
    assert len(results) == len(jobs)
    for hostile in (results[0], results[2]):
        assert hostile.score == 0, _messages(hostile)
        assert all(t.message for t in hostile.tests), _messages(hostile)
    for good in (results[1], results[3]):
        assert good.score == good.max_score > 0, _messages(good)


# ------------------------------------------------------------------------------------------ 5. shards race


def test_the_shards_of_a_correct_file_all_count(tmp_path, task10, cfg):
    """Hole 5: the workers of one job (its shards) wrote load.json through one temporary name, the same in every
    worker forked from the fork server, so a correct file lost points at random (FileNotFoundError in os.replace:
    the shard's cases "not run"). 20 copies of the staff solution, each split into 4 shards (Triton's
    specializations on: 4 cases, 4 specializations), graded 3 times, must all get full marks with the same
    messages."""
    task = task10.subset({"n1_fp32", "n127_fp16", "n1023_fp32", "n1024_fp16"}, autotune_points=0.0,
                         timeout_s={"cpu": 150}, specialize=True)
    cfg = dataclasses.replace(cfg, judges=0, gpu_compile=False, stall_s={"cpu": 0.0})
    good = _good(tmp_path)
    lost, messages = [], set()
    for round_ in range(3):
        results = grade_jobs([Job(task, good, f"s{i}") for i in range(20)], cfg, "cpu", workers=80)
        assert all(r.staff.get("workers", 0) >= 2 for r in results), [r.staff.get("workers") for r in results]
        lost += [f"round {round_}, {r.student}: {_messages(r)}" for r in results if r.score != r.max_score]
        messages |= {json.dumps(_messages(r), sort_keys=True) for r in results}
    assert not lost, f"{len(lost)} of 60 gradings of a correct file lost points; first: {lost[0]}"
    assert len(messages) == 1, messages
