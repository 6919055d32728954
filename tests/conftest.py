import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from grader.config import load_task  # noqa: E402


@pytest.fixture(scope="session")
def task10():
    return load_task(ROOT / "tasks" / "10_quantize_global_int8")


@pytest.fixture(scope="module")
def tokens(tmp_path_factory):
    """A roster's tokens for the submission server's tests (tests/server_support.py): (TOKENS.csv, name -> token)."""
    from server_support import make_tokens

    return make_tokens(tmp_path_factory)


@pytest.fixture
def answer_reader(task10, tmp_path) -> Path:
    """wrong/read_answer_key.py, naming the answer key by its absolute path (the original finds the project
    through triton.__file__, which may lie elsewhere on a machine): with the static policy off, only the sandbox
    keeps it from raising the key's text into the student's message."""
    key = task10.folder / "solution.py"
    reader = tmp_path / "reader.py"
    steal = (f"raise RuntimeError(''.join(chr(c) for c in torch.from_file({str(key)!r}, shared=False, size=400, "
             "dtype=torch.uint8).tolist()))\n")
    reader.write_text((task10.folder / "wrong" / "read_answer_key.py").read_text().replace("_steal()\n", steal, 1))
    return reader


@pytest.fixture
def slow_wrong_timed(tmp_path, monkeypatch):
    """Task 22 with one case and a speed test on the CPU, and a file whose every call takes 6 s and answers wrong:
    (task, file). Its timing worker, started beside the case shard once the staff's timing run is done (made cold
    here: 4 s on CI's kind of machine, while the case shard sleeps 12 s), would need 11 calls (1 warm-up, 10
    timed), 66 s; the grader stops it once the case is judged (grader/isolation/runner.py stop_timing)."""
    import dataclasses

    from grader.config import PerfTest

    monkeypatch.setenv("GRADER_STAFF_TIMING", str(tmp_path / "staff"))  # no staff run kept from another test
    folder = ROOT / "tasks" / "22_lowbit_relu_mask"
    task = load_task(folder)
    wrong = tmp_path / "slow_and_wrong.py"
    wrong.write_text((folder / "solution.py").read_text().replace("def relu_mask(", "import time\n\n\ndef _relu_mask(")
                     + "\n\ndef relu_mask(x, dy, mask):\n    time.sleep(6)\n"
                     "    y, packed, dx = _relu_mask(x, dy, mask)\n    return y + 1, packed, dx\n")
    perf = [PerfTest(id="speed", points=1.0, case="r1_c7", baseline=str(folder / "solution.py"), threshold=1.0,
                     devices=("cpu",), warmup=1, reps=10)]
    task = dataclasses.replace(task, cases=[task.cases[0]], perf=perf,
                               allowed_imports=[*task.allowed_imports, "time"])
    return task, wrong


def check_timer_stopped(result) -> None:
    """`slow_wrong_timed`'s result: the case and the speed test fail, and the timing worker was stopped within
    seconds of the case's verdict, long before its 66 s of calls."""
    from grader.isolation import runner

    tests = {t.name: t for t in result.tests}
    assert tests["r1_c7"].outcome == "failed"
    assert tests["speed"].outcome == "failed" and tests["speed"].message.startswith("not timed: case r1_c7 fails")
    exits = result.staff["worker_exit"]
    assert "the grader stopped the worker after" in exits and runner.STOPPED_WHY in exits, exits
    stages = result.staff["stages"]
    assert stages["timing_worker_wall"] < min(stages["case_worker_wall"] + 10, 50), stages


def write_stream(path, *frames):
    """A record stream as a worker writes it (grader/protocol): each frame (kind, key, value) as JSON for LOAD
    and STATUS, as tensors otherwise, or with `value` as the raw payload when it is bytes; a bare bytes item is
    appended as it is (a garbled tail)."""
    import os

    from grader.protocol import Kind, RecordWriter

    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    writer = RecordWriter(fd)
    for frame in frames:
        if isinstance(frame, bytes):
            os.write(fd, frame)
            continue
        kind, key, value = frame
        if isinstance(value, bytes):
            writer._frame(kind, key, value)
        elif kind in (Kind.LOAD, Kind.STATUS):
            writer.json(kind, value, key=key)
        else:
            writer.tensors(kind, key, value)
    os.close(fd)
    return path
