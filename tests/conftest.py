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
