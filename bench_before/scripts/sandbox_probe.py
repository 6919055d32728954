"""Which layers of the worker's sandbox (grader/worker/sandbox.py) let CUDA, Triton's compiler and the interpreter work
on this machine, one layer at a time and all together.

    python scripts/sandbox_probe.py [--device cuda|cpu]

Each probe forks a child, applies the layers, then creates a CUDA context (on CUDA), compiles and launches a small
Triton kernel (ptxas and the launcher's C compiler on CUDA; the interpreter on the CPU), and prints what failed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from grader.config import ROOT  # noqa: E402
from grader.worker import sandbox  # noqa: E402

KERNEL = '''
import torch, triton, triton.language as tl

@triton.jit
def add_one(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1, mask=offs < n)

def run(device):
    x = torch.zeros(1000, device=device)
    add_one[(triton.cdiv(1000, 256),)](x, 1000, BLOCK=256)
    return float(x.sum())
'''


def probe(layers: tuple[str, ...], device: str) -> dict:
    job = Path(tempfile.mkdtemp(prefix="probe-"))
    job.chmod(0o711)  # as grading does with its folder (grader/pipeline/grading.py)
    (job / "k.py").write_text(KERNEL)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        out: dict = {"layers": list(layers)}
        try:
            os.environ["TRITON_CACHE_DIR"] = str(job / "triton-cache")
            if device == "cpu":
                os.environ["TRITON_INTERPRET"] = "1"
            os.environ.update(sandbox.toolchain_env(device))  # as the worker does
            plan = sandbox.plan([job], ROOT, device, 60, sandbox.Limits())
            out["report"] = sandbox.apply(plan, job, layers)
            import importlib.util

            spec = importlib.util.spec_from_file_location("k", job / "k.py")
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            out["sum"] = module.run(device)
        except BaseException as exc:  # noqa: BLE001 - reported
            out["error"] = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-3000:]
        os.write(write, json.dumps(out).encode())
        os._exit(0)
    os.close(write)
    data = b""
    while chunk := os.read(read, 1 << 16):
        data += chunk
    os.waitpid(pid, 0)
    return json.loads(data or b"{}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    args = parser.parse_args()
    import torch  # noqa: F401 - as the fork server does: imports first, then one fork per worker
    import triton  # noqa: F401

    sandbox.toolchain()
    sandbox.libcuda_dir()
    bad = 0
    sets = [(), ("namespaces",), ("limits",), ("files",), sandbox.LAYERS]
    for layers in sets:
        result = probe(layers, args.device)
        ok = result.get("sum") == 1000.0
        bad += not ok
        on = [f"{k}: {v[4:]}" for k, v in (result.get("report") or {}).items() if v.startswith("on")]
        print(f"{'ok  ' if ok else 'FAIL'} layers {', '.join(layers) or '(none)'}: {'; '.join(on) or 'none on'}")
        if not ok:
            print("     " + str(result.get("error", result)).replace("\n", "\n     "))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
