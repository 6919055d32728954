"""The GPU clock of the speed tests on a real GPU (skipped without CUDA; run on the H100 through `device`):
work left on a side stream is counted, and a call that does no GPU work fails closed."""

import pytest
import torch

from grader.judge.speed import median
from grader.worker import timing as worker

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


def _square(x):
    return x @ x


def test_gpu_clock_counts_work_a_call_leaves_on_a_side_stream():
    side = torch.cuda.Stream()

    def hidden(x):  # the same product, launched on another stream and not waited for: returns at once
        with torch.cuda.stream(side):
            return x @ x

    case = {"args": [torch.randn(4096, 4096)], "kwargs": {}}
    record = worker.time_calls(hidden, _square, case, "cuda", warmup=2, reps=6, clock="gpu")
    assert record["error"] is None and record["clock"] == "gpu"
    ratio = median(record["baseline"]) / median(record["submission"])
    assert 0.7 < ratio < 1.4, f"the side stream's product was not counted: ratio {ratio:.2f}"
    assert median(record["submission"]) > 1e-4  # a 4096^3 product takes far more than 0.1 ms


def test_gpu_clock_fails_a_call_without_gpu_work():
    done = torch.ones(8, device="cuda")

    def cached(x):  # returns a result computed before the clock started
        return done

    record = worker.time_calls(cached, lambda x: x + 1, {"args": [torch.zeros(8)], "kwargs": {}}, "cuda",
                               warmup=1, reps=5, clock="gpu")
    assert "saw no GPU work in a timed call of your function" in record["error"]
