"""Run the conformance constructs (conformance/constructs.py) and compare the interpreter with the compiler.

    python conformance/run.py record --device cuda --out conformance/cuda.json
        # on a GPU box: the compiler's outputs
    python conformance/run.py record --device cpu [--stock] --out cpu.json
        # the interpreter, patched as the grader's CPU worker runs it (--stock: without the grader's patches)
    python conformance/run.py compare conformance/cuda.json [--markdown]
        # the table: construct, GPU output, interpreter (stock, patched), verdict

A record holds, per construct, every output's dtype, shape and bytes (hex), or the error it raised, with the
triton, torch and Python versions. `compare` runs the interpreter twice here (stock, and with the grader's patches,
each in a process of its own) and gives each construct a verdict:
- equal: the stock interpreter already agrees with the GPU;
- fixed: the stock interpreter does not, the grader's patches make it agree (grader/worker/interpreter.py);
- named: the two cannot agree; the grader names the construct in the student's message (`NAMED` below);
- DIFFERS: a disagreement nothing handles (exit status 1).
Agree means the same bytes, or, for a construct that declares `ulps`, float outputs within that many units in the
last place; any NaN matches any NaN. Both devices raising an error also agrees (the error texts may differ).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

NAMED: dict[str, str] = {
    "tl.make_block_ptr, tl.advance and boundary_check (removed in triton 3.9)":
        "triton 3.9 removed block pointers; the grader's message names tl.make_block_ptr and the course's toolchain "
        "(grader/protocol/known_errors.py)",
}
"""Constructs whose GPU and interpreted outputs cannot agree, and where the grader says so to the student."""


def record(device: str, stock: bool = False, only: list[str] | None = None) -> dict:
    """Run every construct (or those named in `only`) on `device` and return the record."""
    if device == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported
    sys.path.insert(0, str(ROOT))
    import torch
    import triton

    if device == "cpu" and not stock:
        from grader.worker.interpreter import patch_interpreter
        patch_interpreter()
    from conformance.constructs import CONSTRUCTS, Tools

    torch.set_num_threads(1)
    results: dict[str, dict] = {}
    for name, c in CONSTRUCTS.items():
        if only and name not in only:
            continue
        try:
            outs = c.run(Tools(device, name))
            if device == "cuda":
                torch.cuda.synchronize()
            results[name] = {"outputs": [encode(o) for o in outs]}
        except Exception as exc:  # noqa: BLE001 - a construct's refusal is data
            results[name] = {"error": error_text(exc)}
    return {"device": device, "interpreter": "stock" if stock else "patched" if device == "cpu" else None,
            "triton": triton.__version__, "torch": torch.__version__.split("+")[0],
            "python": platform.python_version(),
            "gpu": torch.cuda.get_device_name() if device == "cuda" else None, "constructs": results}


def error_text(exc: BaseException) -> str:
    """An error's kind and its telling line: a compilation error's text ends with the source and a caret, so the
    last line that is not those, and the cause's own message where there is one."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip() and set(ln.strip()) != {"^"}]
    text = f"{type(exc).__name__}: {lines[-1] if lines else ''}"
    cause = exc.__cause__ or exc.__context__
    if cause is not None and str(cause).strip():
        text += f" (from {type(cause).__name__}: {str(cause).strip().splitlines()[-1]})"
    return text[:400]


def encode(t) -> dict:
    t = t.detach().cpu().contiguous()
    import torch
    return {"dtype": str(t.dtype).removeprefix("torch."), "shape": list(t.shape),
            "hex": t.view(-1).view(torch.uint8).numpy().tobytes().hex() if t.numel() else ""}


def decode(out: dict):
    import torch
    dtype = getattr(torch, out["dtype"])
    if not out["hex"]:
        return torch.empty(out["shape"], dtype=dtype)
    raw = torch.frombuffer(bytearray.fromhex(out["hex"]), dtype=torch.uint8)
    return raw.view(dtype).reshape(out["shape"])


def ulp_distance(a, b):
    """Units in the last place between two float tensors of one dtype (elementwise), NaNs counted as equal."""
    import torch
    bits = {torch.float32: torch.int32, torch.float16: torch.int16, torch.bfloat16: torch.int16}[a.dtype]

    def ordered(x):  # the float's bits as an integer that orders like the float (negatives mirrored)
        i = x.view(bits).to(torch.int64)
        top = 1 << (8 * x.element_size() - 1)
        return torch.where(i < 0, -(i + top), i)

    d = (ordered(a) - ordered(b)).abs()
    return torch.where(torch.isnan(a) & torch.isnan(b), torch.zeros_like(d), d)


def agree(gpu: dict, cpu: dict, ulps: int, rel: float = 0.0) -> tuple[bool, str]:
    """Whether the interpreter's result for a construct agrees with the GPU's, and a short account."""
    if "error" in gpu or "error" in cpu:
        if "error" in gpu and "error" in cpu:
            return True, "both refuse"
        return False, f"GPU {gpu.get('error', 'runs')}; interpreter {cpu.get('error', 'runs')}"
    if len(gpu["outputs"]) != len(cpu["outputs"]):
        return False, "different numbers of outputs"
    worst, worst_rel = 0, 0.0
    for k, (g, c) in enumerate(zip(gpu["outputs"], cpu["outputs"])):
        if g["dtype"] != c["dtype"] or g["shape"] != c["shape"]:
            return False, f"output {k}: {g['dtype']}{g['shape']} on the GPU, {c['dtype']}{c['shape']} interpreted"
        if g["hex"] == c["hex"]:
            continue
        a, b = decode(g), decode(c)
        if a.is_floating_point() and rel:
            scale = float(a.double().abs().max())
            gap = float((a.double() - b.double()).abs().nan_to_num(0.0).max())
            if gap <= rel * scale:
                worst_rel = max(worst_rel, gap / scale if scale else 0.0)
                continue
            return False, f"output {k}: differs by {gap:.3g}, more than {rel:g} of its largest value {scale:.3g}"
        if a.is_floating_point():
            d = ulp_distance(a, b)
            n = int((d > 0).sum())
            if n == 0:
                continue  # NaNs with other bits
            worst = max(worst, int(d.max()))
            if int(d.max()) <= ulps:
                continue
            i = int(d.argmax())
            return False, (f"output {k}: {n} of {a.numel()} elements differ, up to {int(d.max())} ulps (allowed "
                           f"{ulps}); at {i}: GPU {a.view(-1)[i].item()!r}, interpreter {b.view(-1)[i].item()!r}")
        diff = (a != b).view(-1)
        i = int(diff.nonzero()[0])
        return False, (f"output {k}: {int(diff.sum())} of {a.numel()} elements differ; at {i}: GPU "
                       f"{a.view(-1)[i].item()!r}, interpreter {b.view(-1)[i].item()!r}")
    if worst_rel:
        return True, f"within {worst_rel:.2g} of the largest value (allowed {rel:g})"
    return True, f"within {worst} ulps" if worst else "bit for bit"


def show(out: dict, limit: int = 6) -> str:
    """A construct's first output, shortly, for the table."""
    if "error" in out:
        return out["error"][:60]
    first = decode(out["outputs"][0]).reshape(-1)[:limit].tolist()
    return ", ".join(f"{v:.6g}" if isinstance(v, float) else str(v) for v in first)


def compare(gpu: dict, stock: dict, patched: dict) -> list[dict]:
    """Each construct's verdict (see the module's docstring)."""
    from conformance.constructs import CONSTRUCTS

    rows = []
    for name, c in CONSTRUCTS.items():
        g = gpu["constructs"].get(name)
        if g is None:
            rows.append({"construct": name, "verdict": "DIFFERS", "why": "not in the GPU record"})
            continue
        ok_stock, why_stock = agree(g, stock["constructs"][name], c.ulps, c.rel)
        ok, why = agree(g, patched["constructs"][name], c.ulps, c.rel)
        verdict = ("equal" if ok_stock and ok else "fixed" if ok else "named" if name in NAMED else "DIFFERS")
        rows.append({"construct": name, "verdict": verdict, "why": why if verdict != "named" else NAMED[name],
                     "stock": why_stock, "gpu": show(g), "cpu": show(patched["constructs"][name])})
    return rows


def interpreted(stock: bool, only: list[str] | None = None) -> dict:
    """The interpreter's record, made in a process of its own (TRITON_INTERPRET must be set before triton loads)."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "record", "--device", "cpu", "--out", "-"]
    cmd += ["--stock"] if stock else []
    for name in only or []:
        cmd += ["--only", name]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "TRITON_INTERPRET": "1"}, check=False)
    if done.returncode:
        raise RuntimeError(f"the interpreter's run failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record", help="run the constructs on one device and write the record")
    rec.add_argument("--device", choices=["cuda", "cpu"], required=True)
    rec.add_argument("--stock", action="store_true", help="on the CPU: the interpreter without the grader's patches")
    rec.add_argument("--out", required=True, help="a JSON file, or - for standard output")
    rec.add_argument("--only", action="append", help="only this construct (repeatable)")
    cmp_ = sub.add_parser("compare", help="the interpreter here against a GPU record: the table")
    cmp_.add_argument("gpu_record")
    cmp_.add_argument("--markdown", action="store_true", help="the whole table in Markdown")
    args = parser.parse_args(argv)
    if args.command == "record":
        data = record(args.device, args.stock, args.only)
        text = json.dumps(data, indent=1, sort_keys=False)
        if args.out == "-":
            sys.stdout.write(text)
        else:
            Path(args.out).write_text(text + "\n")
            bad = sum("error" in v for v in data["constructs"].values())
            print(f"{len(data['constructs'])} constructs on {args.device} (triton {data['triton']}, torch "
                  f"{data['torch']}), {bad} raised: {args.out}")
        return 0
    sys.path.insert(0, str(ROOT))
    gpu = json.loads(Path(args.gpu_record).read_text())
    stock, patched = interpreted(True), interpreted(False)
    rows = compare(gpu, stock, patched)
    print(f"GPU: {gpu.get('gpu')}, triton {gpu['triton']}, torch {gpu['torch']}; interpreter: triton "
          f"{patched['triton']}, torch {patched['torch']}")
    if args.markdown:
        print("| construct | GPU (first values) | interpreter, patched | stock interpreter | verdict |")
        print("| --- | --- | --- | --- | --- |")
        for r in rows:
            print(f"| {r['construct']} | {r.get('gpu', '')} | {r.get('cpu', '')} | {r.get('stock', '')} | "
                  f"{r['verdict']} ({r['why']}) |")
    else:
        for r in rows:
            print(f"{r['verdict']:<8} {r['construct']}: {r['why']}" + (f" [stock: {r['stock']}]"
                                                                         if r['verdict'] == 'fixed' else ""))
    counts = {v: sum(r["verdict"] == v for r in rows) for v in ("equal", "fixed", "named", "DIFFERS")}
    print("conformance: " + ", ".join(f"{n} {v}" for v, n in counts.items()) + f" of {len(rows)} constructs")
    return 1 if counts["DIFFERS"] else 0


if __name__ == "__main__":
    sys.exit(main())
