"""A fork server for workers: torch and triton are imported once per device, then one child is forked per run.

    python -m grader.isolation.forkserver        (started by grader.isolation.runner; speaks JSON lines on stdin/stdout)

Starting each worker as `python -m grader.worker.main` pays for the interpreter and the imports of torch and triton
(1.7 s on one of CI's cores) before the submission is even read, and a class of 200 students x 5 tasks pays it a
thousand times. The server pays it once and forks. A child is the same worker as before: it starts its own session
(so a timeout still kills its whole process group, compiler children included), sends its output to its log, takes
the environment and working directory the runner asks for, and runs `grader.worker.main.main`.

What fork must not share: the server never initialises CUDA (a CUDA context does not survive fork; each child
creates its own), never imports a submission, and stays single-threaded (OPENBLAS_NUM_THREADS=1 keeps numpy from
starting a thread pool in it). A child's standard input and output are replaced before it runs anything, so a
submission cannot write to the protocol pipe.

Protocol, one JSON object per line:
  request  {"id": n, "job": ..., "records": ..., "log": ..., "cwd": ..., "env": {...}, "compiles": bool}
           (job, records and log: files of the trusted folder the runner made; the child opens the log and the
           record stream before it runs anything, never through a link, and the worker keeps the stream's
           descriptor: grader/protocol)
  replies  {"id": n, "pid": p}              once forked
           {"id": n, "returncode": rc}      when the child has ended (negative: killed by that signal)
End of input ends the server, and it kills every child still running.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import sys
import time
import traceback
from pathlib import Path

PRELOAD = ("numpy", "torch", "triton", "triton.language", "triton.runtime.autotuner", "triton.runtime.interpreter",
           "grader.worker.main", "grader.worker.op_audit", "grader.worker.sandbox", "grader.protocol")
# For the timing workers' torch.compile'd baselines, imported by the server before it forks the first of them (a
# request with "compiles"), so a grading run without speed tests never pays their 3-4 s. In each timing worker,
# importing Inductor's config took 4.3 s and loading the baseline (which imports Dynamo) 3 s on the H100 box; with
# them in the server, selftest of tasks 10-12 went from 350 to 286 s. Neither import starts CUDA or a thread, so a
# fork stays safe (tests/test_worker.py).
PRELOAD_COMPILE = ("torch._dynamo", "torch._inductor.config")
# `torch.compile(...)` in a baseline's module imports Inductor's compile_fx (3.48 s in each timing worker on the
# H200 box), and the first call loads the cached graph through the Triton code generator and its runtime. The
# import of compile_fx asks whether CUDA is there, which initializes the CUDA driver in the asking process unless
# torch asks NVML (then no child forked after it could use CUDA: "Cannot re-initialize CUDA in forked subprocess",
# every worker of a class on the box). So these come only where NVML answers (`_nvml_answers`), with torch's
# check through it (`_import_compile`); elsewhere (no NVML, a MIG slice) each timing worker imports them itself.
PRELOAD_COMPILE_NVML = ("torch._inductor.compile_fx", "torch._inductor.codegen.triton",
                        "torch._inductor.runtime.triton_heuristics")
NVML_CHECK = "PYTORCH_NVML_BASED_CUDA_CHECK"
# Every Triton compilation's cache key starts with triton_key(), a hash of Triton's own sources and libtriton,
# computed once per process (0.33 s on one of CI's cores, 0.38 s on the H200 box, where a timing worker's profile
# showed it). Computed in the server, every worker inherits it, and so does each compile child a worker forks
# before its own first compilation (grader/worker/parallel_compile.py), which would hash it again. Inductor's own
# key (torch_key(), torch's sources: 0.18 s) is the timing workers' part, computed with PRELOAD_COMPILE_NVML. Both
# read files only: no CUDA, no thread (tests/test_worker.py).


def _import(names: tuple[str, ...]) -> None:
    import importlib

    for name in names:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - a child that needs it reports the import error itself
            pass


def _hash(module: str, name: str) -> None:
    """Call a cached hash function (`module.name()`) so that forked children inherit its value."""
    try:
        import importlib

        getattr(importlib.import_module(module), name)()
    except Exception:  # noqa: BLE001 - each child computes it then, as before
        pass


def _nvml_answers() -> bool:
    """Whether torch's CUDA check can go through NVML here without the CUDA driver (a CPU build of torch has no
    CUDA to initialize)."""
    try:
        import torch

        return not torch.cuda._is_compiled() or torch.cuda._device_count_nvml() > 0
    except Exception:  # noqa: BLE001 - then not
        return False


def _import_compile() -> None:
    """PRELOAD_COMPILE, and where NVML answers PRELOAD_COMPILE_NVML with torch's CUDA check through NVML (the
    setting put back after)."""
    _import(PRELOAD_COMPILE)
    if not _nvml_answers():
        return
    before = os.environ.get(NVML_CHECK)
    os.environ[NVML_CHECK] = "1"
    try:
        _import(PRELOAD_COMPILE_NVML)
        _hash("torch._inductor.codecache", "torch_key")
    finally:
        if before is None:
            os.environ.pop(NVML_CHECK, None)
        else:
            os.environ[NVML_CHECK] = before


def _preload() -> None:
    _import(PRELOAD)
    _hash("triton.runtime.cache", "triton_key")
    try:  # what each child would otherwise pay again: torch's first mode window (0.9 s on one of CI's cores)
        import torch

        from grader.worker import op_audit as audit
        from grader.worker import sandbox

        with audit.OpAudit("<warm-up>").window():
            torch.ones(2).abs().max()
        sandbox.toolchain()  # the compiler's helper folders, asked of gcc once (0.1-0.2 s)
        sandbox.libcuda_dir()
    except Exception:  # noqa: BLE001 - the children do it themselves then
        pass
    if os.environ.get("TRITON_INTERPRET") != "1":
        try:  # Triton's driver module, built once into the shared cache (no CUDA context: fork stays safe)
            from grader.worker import tritoncache

            print(tritoncache.warm_shared("cuda"), file=sys.stderr, flush=True)
        except Exception:  # noqa: BLE001 - each job then builds it in its own cache
            traceback.print_exc()


def _child(request: dict) -> None:
    """Runs in the forked child; never returns."""
    code = 70
    try:
        os.setsid()
        append = os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW
        log = os.open(request["log"], append)
        records = os.open(request["records"], append)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(null)
        os.close(log)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        from grader.worker import main as worker

        worker.START = time.perf_counter()
        code = worker.main(Path(request["job"]), records)
    except BaseException:  # noqa: BLE001 - the log is what the judge gets
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001
                pass
        os._exit(code)


def _send(message: dict) -> None:
    data = (json.dumps(message) + "\n").encode()
    try:
        while data:
            data = data[os.write(1, data):]
    except OSError:  # the runner is gone
        pass


def serve() -> int:
    _preload()
    children: dict[int, int] = {}  # pid -> request id
    selector = selectors.DefaultSelector()
    selector.register(0, selectors.EVENT_READ)
    buffer = b""
    open_input = True
    compile_ready = False  # PRELOAD_COMPILE imported
    while open_input or children:
        if open_input and selector.select(timeout=0.02):
            chunk = os.read(0, 1 << 16)
            if not chunk:
                open_input = False
                for pid in children:  # the runner is gone: so are its workers
                    try:
                        os.killpg(pid, signal.SIGKILL)
                    except OSError:
                        pass
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                request = json.loads(line)
                if request.get("compiles") and not compile_ready:
                    _import_compile()
                    compile_ready = True
                pid = os.fork()
                if pid == 0:
                    _child(request)
                children[pid] = request["id"]
                _send({"id": request["id"], "pid": pid})
        elif not open_input:
            time.sleep(0.02)
        while children:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            if pid in children:
                _send({"id": children.pop(pid), "returncode": os.waitstatus_to_exitcode(status)})
    return 0


if __name__ == "__main__":
    sys.exit(serve())
