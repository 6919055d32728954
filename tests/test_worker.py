"""The worker's handling of a loaded submission's kernels (no launch: these run on any machine)."""

import dataclasses
import os
import types
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")

import torch  # noqa: E402

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


def _python(code: str):
    """Run `code` in a fresh Python at the repository's root, compiled Triton (not the interpreter) as the fork
    server has it."""
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env,
                          cwd=Path(__file__).resolve().parent.parent)


SERVER_PRELOAD = ("from grader.isolation import forkserver\n"
                  "forkserver._import(forkserver.PRELOAD)\n"
                  "forkserver._hash('triton.runtime.cache', 'triton_key')\n"
                  "forkserver._import_compile()\n")
"""What the fork server does before it forks a timing worker, for the fresh-Python tests below (`_python`)."""


def test_the_fork_servers_cuda_preload_starts_no_thread_and_no_cuda():
    """The fork server imports Dynamo and Inductor before it forks the first timing worker, and forks CUDA workers
    after that (grader/isolation/forkserver.py): safe only while those imports start no thread and no CUDA
    context, which a fork would not carry over (the driver's own initialization, which torch does not report, is
    the CUDA-only test below)."""
    code = ("import threading, torch\n"
            + SERVER_PRELOAD
            + "print(threading.active_count(), torch.cuda.is_initialized())\n")
    done = _python(code)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[-2:] == ["1", "False"], done.stdout


def test_the_fork_servers_compile_preload_asks_nvml_and_puts_the_setting_back(monkeypatch):
    """Inductor's compile_fx asks at import whether CUDA is there; torch's default check initializes the CUDA driver
    in the fork server, and no child forked after it could use CUDA (every worker of a class failed so on the H200
    box). The server imports it with the check through NVML, only where NVML answers, and leaves the environment
    as it found it."""
    from grader.isolation import forkserver

    seen = []
    monkeypatch.setattr(forkserver, "_import",
                        lambda names: seen.append((names, os.environ.get(forkserver.NVML_CHECK))))
    monkeypatch.setattr(forkserver, "_nvml_answers", lambda: True)
    monkeypatch.delenv(forkserver.NVML_CHECK, raising=False)
    forkserver._import_compile()
    assert seen == [(forkserver.PRELOAD_COMPILE, None), (forkserver.PRELOAD_COMPILE_NVML, "1")]
    assert forkserver.NVML_CHECK not in os.environ
    monkeypatch.setenv(forkserver.NVML_CHECK, "0")
    forkserver._import_compile()
    assert os.environ[forkserver.NVML_CHECK] == "0"
    seen.clear()
    monkeypatch.setattr(forkserver, "_nvml_answers", lambda: False)  # no NVML, a MIG slice: the timing workers'
    forkserver._import_compile()
    assert seen == [(forkserver.PRELOAD_COMPILE, "0")]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_a_child_forked_after_the_compile_preload_can_use_cuda():
    """The failure the test above prevents, on a GPU: the server's imports, then a fork, then CUDA in the child
    ("Cannot re-initialize CUDA in forked subprocess" when the driver was initialized before the fork)."""
    code = ("import os, torch\n"
            + SERVER_PRELOAD
            + "assert forkserver._nvml_answers()\n"
            "pid = os.fork()\n"
            "if pid == 0:\n"
            "    try:\n"
            "        torch.empty(1, device='cuda'); os._exit(0)\n"
            "    except Exception as exc:\n"
            "        print(exc, flush=True); os._exit(1)\n"
            "print('child', os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))\n")
    done = _python(code)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[-2:] == ["child", "0"], done.stdout


def test_a_child_of_the_fork_server_inherits_the_compilers_cache_keys():
    """Triton's key (triton_key, a hash of its sources and libtriton) and Inductor's (torch_key) are computed once
    in the fork server: a child forked after it finds both computed, and hashes no file for either (the hashing
    functions are broken in the child, and the keys still come)."""
    code = ("import os\n"
            + SERVER_PRELOAD
            + "pid = os.fork()\n"
            "if pid == 0:\n"
            "    import hashlib\n"
            "    import torch._inductor.codecache as codecache\n"
            "    import triton.runtime.cache as cache\n"
            "    def refuse(*a, **k): raise RuntimeError('hashed again')\n"
            "    codecache.build_code_hash = refuse\n"
            "    hashlib.sha256 = refuse\n"
            "    ok = cache.triton_key.cache_info().currsize == 1 and cache.triton_key() and codecache.torch_key()\n"
            "    os._exit(0 if ok else 1)\n"
            "print('child', os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))\n")
    # the control: without the server's hashing, the child's first call hashes (and so fails here)
    control = code.replace("forkserver._hash('triton.runtime.cache', 'triton_key')\n", "")
    assert control != code
    with ThreadPoolExecutor(2) as pool:  # two fresh interpreters, each preloading what the server does: side by side
        done, undone = pool.map(_python, (code, control))
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[-2:] == ["child", "0"], done.stdout + done.stderr[-2000:]
    assert undone.stdout.split()[-2:] == ["child", "1"], undone.stdout + undone.stderr[-2000:]


def test_every_module_the_fork_server_preloads_exists():
    """The fork server imports PRELOAD before it forks, and passes over a name that fails (a child reports its own
    import error): a name left behind by a move would cost every worker its import time, silently."""
    import importlib

    from grader.isolation import forkserver

    for name in forkserver.PRELOAD + forkserver.PRELOAD_COMPILE + forkserver.PRELOAD_COMPILE_NVML:
        importlib.import_module(name)
