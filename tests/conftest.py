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
