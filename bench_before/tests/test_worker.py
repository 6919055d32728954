"""The worker's handling of a loaded submission's kernels (no launch: these run on any machine)."""

import dataclasses
import os
import types
from pathlib import Path

import pytest

triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")

from grader.worker import main as worker  # noqa: E402


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
    from grader.isolation.runner import JobSpec, spec_env

    monkeypatch.delenv("CUDA_DEVICE_MAX_CONNECTIONS", raising=False)
    spec = JobSpec(Path("s.py"), "f", [], "cuda", {0: Path("in.pt")}, 10.0)
    assert spec_env(spec)["CUDA_DEVICE_MAX_CONNECTIONS"] == "1"
    assert "CUDA_DEVICE_MAX_CONNECTIONS" not in spec_env(dataclasses.replace(spec, perf=[{"index": 0}]))
    assert "CUDA_DEVICE_MAX_CONNECTIONS" not in spec_env(dataclasses.replace(spec, device="cpu"))
    monkeypatch.setenv("CUDA_DEVICE_MAX_CONNECTIONS", "4")  # a TA's own setting wins
    assert spec_env(spec)["CUDA_DEVICE_MAX_CONNECTIONS"] == "4"


def test_the_fork_servers_cuda_preload_starts_no_thread_and_no_cuda():
    """The fork server imports Dynamo and Inductor's config before it forks the first timing worker, and forks CUDA
    workers after that (grader/isolation/forkserver.py): safe only while those imports start no thread and no CUDA
    context, which a fork would not carry over."""
    import subprocess
    import sys

    from grader.isolation.forkserver import PRELOAD, PRELOAD_COMPILE

    code = ("import importlib, threading, torch\n"
            f"for name in {PRELOAD + PRELOAD_COMPILE!r}: importlib.import_module(name)\n"
            "print(threading.active_count(), torch.cuda.is_initialized())\n")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env,
                          cwd=Path(__file__).resolve().parent.parent)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[-2:] == ["1", "False"], done.stdout


def test_every_module_the_fork_server_preloads_exists():
    """The fork server imports PRELOAD before it forks, and passes over a name that fails (a child reports its own
    import error): a name left behind by a move would cost every worker its import time, silently."""
    import importlib

    from grader.isolation import forkserver

    for name in forkserver.PRELOAD + forkserver.PRELOAD_COMPILE:
        importlib.import_module(name)
