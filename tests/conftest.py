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
