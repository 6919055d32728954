"""The worker's handling of a loaded submission's kernels (no launch: these run on any machine)."""

import dataclasses
import os
import types
from pathlib import Path

import pytest

triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")

from grader import worker  # noqa: E402


@pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") == "1", reason="the interpreter does not specialize")
def test_unspecialize_reaches_plain_and_autotuned_kernels():
    @triton.jit
    def plain(x_ptr, n, BLOCK: tl.constexpr):
        pass

    @triton.autotune(configs=[triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 32})], key=["n"])
    @triton.jit
    def tuned(x_ptr, n, BLOCK: tl.constexpr):
        pass

    module = types.ModuleType("submission")
    module.plain, module.tuned, module.helper = plain, tuned, len
    assert all(not p.do_not_specialize for p in plain.params)
    assert worker.unspecialize(module) == 2
    for kernel in (plain, tuned.fn):
        flags = {p.name: (p.do_not_specialize, p.do_not_specialize_on_alignment) for p in kernel.params}
        assert flags == {"x_ptr": (True, True), "n": (True, True), "BLOCK": (False, False)}


def test_cuda_case_workers_get_one_work_queue_and_timing_workers_keep_the_default(monkeypatch):
    from grader.runner import JobSpec, spec_env

    monkeypatch.delenv("CUDA_DEVICE_MAX_CONNECTIONS", raising=False)
    spec = JobSpec(Path("s.py"), "f", [], "cuda", Path("in.pt"), 10.0)
    assert spec_env(spec)["CUDA_DEVICE_MAX_CONNECTIONS"] == "1"
    assert "CUDA_DEVICE_MAX_CONNECTIONS" not in spec_env(dataclasses.replace(spec, perf=[{"index": 0}]))
    assert "CUDA_DEVICE_MAX_CONNECTIONS" not in spec_env(dataclasses.replace(spec, device="cpu"))
    monkeypatch.setenv("CUDA_DEVICE_MAX_CONNECTIONS", "4")  # a TA's own setting wins
    assert spec_env(spec)["CUDA_DEVICE_MAX_CONNECTIONS"] == "4"
