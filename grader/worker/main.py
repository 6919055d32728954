"""The worker: the only process that imports and runs a submission.

    python -m grader.worker.main JOB_FILE RECORDS_FD

It reads its job (grader/protocol WorkerJob, written by the runner in the trusted folder) and the inputs of
its own cases, enters the sandbox, imports the submission, runs the listed cases under every autotune config, and
sends what it saw, never a verdict, as frames on RECORDS_FD (a descriptor opened for it before the sandbox):

* LOAD: whether the import worked, the required kernels' autotune configs, the sandbox report;
* STATUS: the case it is running (so a hang or a crash can be placed), after each run of a case (the runner
  stops a worker whose stream stays unchanged for grading.stall_s);
* CASE <i>: per config run, the outputs, every guarded buffer (inputs and allocations) and the launches;
* PERF <k>: for a speed test, the times of the submission's and the baseline's calls, and the outputs of the
  submission's last timed call (the judge checks them, computes the medians, the ratio and the points).

The judge loads the tensor frames with `torch.load(weights_only=True)`, which builds tensors and plain data only.
The worker writes no file the trusted side reads: its run folder is scratch.
"""

from __future__ import annotations

import time

START = time.perf_counter()  # before torch and triton load: "ready after" in the log includes them

import contextlib
import functools
import importlib.util
import os
import sys
import threading
import traceback
import warnings
from pathlib import Path

import torch

from grader.protocol import GpuGate, Kind, RecordWriter, WorkerJob, guards
from grader.worker import known_errors, memory_check, sandbox
from grader.worker.address_check import BoundsAudit, submission_line
from grader.worker.address_check import intact as bounds_intact
from grader.worker.gpu_compile import CompileCheck
from grader.worker.interpreter import interpreted, patch_interpreter
from grader.worker.interpreter import kernel_chain as _kernel_chain
from grader.worker.op_audit import OpAudit, watch_threads
from grader.worker.parallel_compile import ParallelCompile, in_pool
from grader.worker.provenance import Provenance, new_call, register
from grader.worker.timing import compile_here, load_baseline, time_calls
from grader.worker.write_check import WriteWatch

ROOT = Path(__file__).resolve().parents[2]


# ------------------------------------------------------------------------------------- runtime instrumentation


class Instruments:
    """Launch tracing, guarded allocations and config forcing, installed around the submission's calls."""

    ALLOCATORS = ("empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "ones_like", "full",
                  "full_like")
    METHODS = ("new_empty", "new_zeros", "new_ones", "new_full")

    def __init__(self) -> None:
        self.launches: list[dict] = []
        self.calls: list[tuple] = []
        """(kernel, args, kwargs) of each of `launches`: what `same_call` compiles again under another config."""
        self.allocs: list[tuple[torch.Tensor, torch.Tensor, int]] = []
        self.active = False
        self.path = ""
        self.gpu_check = None
        """On the interpreter, a gpu_compile.CompileCheck: every launch is also compiled for CUDA targets."""
        self.gate: GpuGate | None = None
        """On CUDA, the GPU's gate: an interpreted kernel (the address check's re-run) lets a shared hold go."""
        self.writes: WriteWatch | None = None
        """The write check (grader/worker/write_check.py): the guarded buffers at each launch and at the end of the
        call."""
        self.provenance: Provenance | None = None
        """The provenance check's recorder (grader/worker/provenance.py): each launch is one of its checkpoints."""
        self.audit: OpAudit | None = None
        """The op audit: a tensor a launch receives is no longer a constant table."""
        self._orig_empty = torch.empty
        self._patch_launches()
        self._patch_allocators()

    # Every Triton launch goes through JITFunction.run (compiled) or InterpretedFunction.run (interpreter),
    # whether it comes from `kernel[grid](...)` or from an autotuner.
    def _patch_launches(self) -> None:
        from triton.runtime.jit import JITFunction

        classes = [JITFunction]
        try:
            from triton.runtime.interpreter import InterpretedFunction

            classes.append(InterpretedFunction)
        except ImportError:  # pragma: no cover - very old triton
            pass
        inst = self
        for cls in classes:
            orig = cls.run

            def run(self, *args, _orig=orig, **kwargs):
                if kwargs.get("warmup", False):  # a compilation without a launch (grader/worker/parallel_compile.py)
                    return _orig(self, *args, **kwargs)
                watched = None
                tensors = [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)]
                name = getattr(getattr(self, "fn", None), "__name__", type(self).__name__)
                ledger = memory_check.LEDGER
                if ledger is not None:  # the memory check: each buffer holds what its last tracked writer left
                    ledger.check(_labelled(args, kwargs), "launch", name, lambda: submission_line(inst.path, 1),
                                 names=lambda: _arg_names(self))
                if inst.active:
                    launch = {"kernel": name, "ptrs": [t.data_ptr() for t in tensors]}
                    if inst.gpu_check is not None and type(self).__name__ == "InterpretedFunction":
                        launch["gpu_compile"] = inst.gpu_check.check(self.fn, args, kwargs)
                    inst.launches.append(launch)
                    inst.calls.append((self, args, kwargs))
                    if inst.writes is not None:
                        watched = (*inst.writes.before(tensors, name), name)
                    if inst.audit is not None:
                        inst.audit.launched(tensors)
                    register(tensors)
                    if inst.provenance is not None and inst.provenance.active:
                        inst.provenance.launch(name, submission_line(inst.path, 2), _arg_names(self), args, kwargs)
                if inst.gate is not None and type(self).__name__ == "InterpretedFunction":
                    out = inst.gate.paused(lambda: _orig(self, *args, **kwargs), torch.cuda.synchronize)
                else:
                    if inst.gate is not None:
                        inst.gate.touch()  # the GPU is in use: a hold let go while the call idled is taken again
                    out = _orig(self, *args, **kwargs)
                if ledger is not None:
                    ledger.wrote(tensors)
                if watched is not None and watched[0]:
                    owners, line, name = watched
                    inst.writes.launched(owners, name, line)
                if inst.provenance is not None and inst.provenance.active:
                    inst.provenance.launched(tensors)
                return out

            cls.run = run

    def _patch_allocators(self) -> None:
        inst = self

        def wrap(orig, keep_values: bool):
            def alloc(*args, **kwargs):
                t = orig(*args, **kwargs)
                if not isinstance(t, torch.Tensor) or t.layout != torch.strided or t.device.type == "meta":
                    return t
                if sys._getframe(1).f_code.co_filename != inst.path:
                    return t  # Triton's or torch's own allocations (the interpreter copies buffers) stay plain
                if not inst.active:  # the submission's, at its import: a workspace it may keep (the op audit
                    register([t])    # does not see it as the submission's, this wrapper standing between)
                    if memory_check.LEDGER is not None:
                        memory_check.LEDGER.wrote([t])
                    return t
                buf, view, offset = guards.guarded_like(t, empty=inst._orig_empty)
                if keep_values:
                    view.copy_(t)
                if t.requires_grad:
                    view.requires_grad_(True)
                inst.allocs.append((buf, view, offset))
                if inst.writes is not None:
                    inst.writes.allocated(len(inst.allocs) - 1)
                if memory_check.LEDGER is not None:
                    memory_check.LEDGER.wrote([buf])
                register([view])
                if inst.provenance is not None:
                    inst.provenance.hold(view)
                return view

            return alloc

        for name in self.ALLOCATORS:
            setattr(torch, name, wrap(getattr(torch, name), keep_values=not name.startswith("empty")))
        for name in self.METHODS:
            setattr(torch.Tensor, name, wrap(getattr(torch.Tensor, name), keep_values=name != "new_empty"))

    def reset(self) -> None:
        self.launches, self.allocs, self.calls = [], [], []


def _labelled(args: tuple, kwargs: dict) -> list[tuple[int | str, torch.Tensor]]:
    """A launch's tensor arguments with their positions (named once an event needs it) or keywords."""
    found: list[tuple[int | str, torch.Tensor]] = [(k, a) for k, a in enumerate(args) if isinstance(a, torch.Tensor)]
    return found + [(str(k), v) for k, v in kwargs.items() if isinstance(v, torch.Tensor)]


def _arg_names(kernel) -> list[str]:
    """A launched kernel's parameter names (JITFunction.arg_names; the interpreted one's function's)."""
    names = getattr(kernel, "arg_names", None)
    if not names:
        import inspect

        try:
            names = list(inspect.signature(kernel.fn).parameters)
        except (AttributeError, TypeError, ValueError):
            names = []
    return [str(n) for n in names]


# ------------------------------------------------------------------------------------------- the submission


def config_label(config) -> str:
    """A config as text, without the fields left at their defaults."""
    parts = [p for p in str(config).split(", ")
             if p not in ("num_ctas: 1", "maxnreg: None", "ir_override: None") and not p.endswith(": None")]
    return ", ".join(parts)


def describe_kernel(obj) -> dict:
    from triton.runtime.autotuner import Autotuner

    if obj is None:
        return {"kind": "missing", "configs": []}
    for link in _kernel_chain(obj):
        if isinstance(link, Autotuner):
            return {"kind": "autotune", "configs": [config_label(c) for c in link.configs]}
    names = {type(link).__name__ for link in _kernel_chain(obj)}
    if names & {"JITFunction", "InterpretedFunction"}:
        return {"kind": "jit", "configs": []}
    return {"kind": type(obj).__name__, "configs": []}


def unspecialize(module) -> int:
    """Compile the module's kernels without Triton's specializations on integer values (divisible by 16, equal
    to 1) and pointer alignment, so that one compilation serves every shape. Must run before the first launch:
    Triton reads these flags when it builds a kernel's argument binder. Returns how many kernels it changed."""
    changed = 0
    for value in list(vars(module).values()):
        for link in _kernel_chain(value):
            params = getattr(link, "params", None)
            if type(link).__name__ != "JITFunction" or not isinstance(params, list):
                continue
            for param in params:
                if not getattr(param, "is_constexpr", True):
                    param.do_not_specialize = True
                    param.do_not_specialize_on_alignment = True
            changed += 1
    return changed


def find_autotuners(module) -> list:
    from triton.runtime.autotuner import Autotuner

    found = []
    for value in vars(module).values():
        for link in _kernel_chain(value):
            if isinstance(link, Autotuner) and all(link is not f for f in found):
                found.append(link)
    return found


def _student_frames(exc: BaseException, path: str) -> list[str]:
    """The submission's lines in an exception's traceback, and in those of the exceptions it was raised from: the
    interpreter raises InterpreterError from the kernel's own error, whose traceback holds the kernel's line."""
    chain, seen = [], set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        chain.append(exc)
        exc = exc.__cause__ or (None if exc.__suppress_context__ else exc.__context__)
    lines = []
    for link in reversed(chain):  # outermost last: the innermost frames (a kernel's line) come last
        frames = [f for f in traceback.extract_tb(link.__traceback__) if os.path.abspath(f.filename) == path]
        lines += [f"line {f.lineno} in {f.name}: {f.line}" for f in frames]
    return list(dict.fromkeys(lines))


STUDENT_TEXT = 600
"""Characters of a raised exception's text that reach the student (staff get the traceback): what a submission
prints or raises is a channel out of the worker, so it is bounded (and the sandbox keeps secrets out of it)."""


def _error_record(exc: BaseException, path: str) -> dict:
    text = f"{type(exc).__name__}: {exc}".strip()
    refused = sandbox.explain(exc, ROOT)
    if refused:
        text = f"{refused} ({text[:200]})"
    if len(text) > STUDENT_TEXT:
        text = text[:STUDENT_TEXT] + f"... ({len(text) - STUDENT_TEXT} more characters)"
    return {
        "error": text,
        "where": _student_frames(exc, path)[-3:],
        "traceback": "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-20000:],
        **known_errors.classify(exc, path),  # a kind the judge words itself (grader/protocol/known_errors.py)
    }


def _to_cpu(t: torch.Tensor) -> torch.Tensor:
    return t.detach().to("cpu").clone()


class Launcher:
    """The entry of a task whose harness launches the kernel (task.yaml `launch`), as the Triton Puzzles notebook
    does: `kernel[grid](*pointers, **sizes_and_blocks)`. Only the keyword arguments the kernel declares are passed,
    so kernels of either edition of the puzzles (the Lite one adds block sizes such as B1 or B_MID) run unchanged.
    The output buffers are the last `n_outputs` tensors of a case: made here, inside guard bands, full of poison."""

    def __init__(self, kernel, spec: dict) -> None:
        if kernel is None:
            raise AttributeError(f"the submission defines no kernel {spec['kernel']}")
        self.kernel, self.grid, self.n_outputs = kernel, [tuple(a) for a in spec["grid"]], int(spec["outputs"])
        self.params = kernel_params(kernel)

    def outputs(self, templates: list, device: str, inst: Instruments) -> list:
        views = []
        for t in templates:
            buf, view, offset = guards.guarded_empty(tuple(t.shape), t.dtype, device, empty=inst._orig_empty)
            inst.allocs.append((buf, view, offset))
            if inst.writes is not None:
                inst.writes.allocated(len(inst.allocs) - 1)
            views.append(view)
        return views

    def __call__(self, *pointers, **scalars):
        grid = tuple(-(-int(scalars.get(n, 1)) // int(scalars.get(b, 1))) for n, b in self.grid)
        passed = {k: v for k, v in scalars.items() if self.params is None or k in self.params}
        self.kernel[grid](*pointers, **passed)
        return tuple(pointers[len(pointers) - self.n_outputs:])


def kernel_params(kernel) -> set[str] | None:
    """The parameter names a (possibly autotuned) kernel declares; None if they cannot be found."""
    import inspect

    for link in _kernel_chain(kernel):
        names = getattr(link, "arg_names", None)
        if names:
            return set(names)
        if inspect.isfunction(link):
            return set(inspect.signature(link).parameters)
    return None


def config_at(configs: list, index: int):
    """The config forced for run `index`: a kernel with fewer configs than the longest keeps its last one."""
    return configs[min(index, len(configs) - 1)]


def interpreted_key(tuners: list, index: int) -> tuple:
    """What the interpreter's run of config `index` depends on: the configs' kwargs and hooks. It ignores
    num_warps and num_stages, so configs that differ only there touch the same addresses, compute the same bits,
    and one call serves them all (task 11's three configs: one call)."""
    return tuple((tuple(sorted((k, repr(v)) for k, v in config_at(configs, index).kwargs.items())),
                  id(getattr(config_at(configs, index), "pre_hook", None)),
                  id(getattr(config_at(configs, index), "post_hook", None)))
                 for _, configs in tuners)


OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg")
"""A config's fields that only a GPU compilation reads (the interpreter ignores them)."""


def config_labels(tuners: list, config_index: int) -> dict[str, str]:
    """Each autotuned kernel's forced config for run `config_index`, as text, by kernel name."""
    return {getattr(getattr(tuner, "base_fn", None) or tuner.fn, "__name__", "kernel"):
            config_label(config_at(configs, config_index)) for tuner, configs in tuners}


def same_call(source: dict, calls: list, config_index: int, tuners: list, inst: Instruments) -> dict:
    """On the interpreter, config `config_index`'s record when an earlier config of the case has the same
    `interpreted_key`: the interpreter ignores num_warps and num_stages, so the call would compute the same bits,
    touch the same addresses and run the same torch ops; the record is the earlier one's under this config's name
    (`same_call_as`), and only what does read those fields runs again: each launch's GPU compilation check
    (grader/worker/gpu_compile.py), with this config's options. On the CPU, three configs that differ only in
    num_warps cost one call instead of three."""
    record = {**source, "config_index": config_index, "configs": config_labels(tuners, config_index),
              "same_call_as": source["config_index"], "seconds": 0.0}
    record.pop("provenance", None)  # the twin is compared with the call it was paired with, under its config only
    record["outputs"] = [dict(o) for o in source.get("outputs") or []]
    launches = [dict(launch) for launch in source.get("launches") or []]
    if inst.gpu_check is not None:
        for launch, (kernel, args, kwargs) in zip(launches, calls):
            options = {}
            for tuner, configs in tuners:
                if any(link is kernel for link in _kernel_chain(tuner)):
                    options = {k: v for k, v in config_at(configs, config_index).all_kwargs().items() if k in OPTIONS}
            if "gpu_compile" in launch and options:
                launch["gpu_compile"] = inst.gpu_check.check(kernel.fn, args, {**kwargs, **options})
    record["launches"] = launches
    return record


class Printed:
    """What the submission prints during one call (print, tl.device_print in the interpreter, sys.stderr): kept up
    to PRINTED_CHARS, the rest counted. The student sees it under a failing test, marked as theirs
    (grader/results/report.py); it decides nothing. Output written to descriptor 1 or 2 directly still goes to
    the worker's log, which staff read."""

    def __init__(self) -> None:
        self.text = ""
        self.dropped = 0

    def write(self, text) -> int:
        text = str(text)
        room = PRINTED_CHARS - len(self.text)
        self.text += text[:max(0, room)]
        self.dropped += max(0, len(text) - max(0, room))
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


@contextlib.contextmanager
def toolchain_warnings():
    """During a call, Python warnings go to the worker's log (staff read it), not to what the student printed: a
    submission cannot issue one (the static policy leaves `warnings` out of reach), so every warning is torch's or
    Triton's own (triton 3.9's `TRITON_DEFAULT_FP_FUSION is unset`, with the grading machine's paths), whatever
    line it is attributed to. Told apart by the channel it comes through, not by its text."""
    with warnings.catch_warnings():
        warnings.showwarning = _to_log
        yield


def _to_log(message, category, filename, lineno, file=None, line=None) -> None:
    try:
        sys.__stderr__.write(warnings.formatwarning(message, category, filename, lineno, line))
    except (OSError, ValueError, AttributeError):
        pass


PRINTED_CHARS = 2000
"""The most of a call's printed output a record carries (the judge reads no more: judge.PRINTED_CHARS)."""


def run_case(entry, case: dict, device: str, inst: Instruments, tuners: list, config_index: int,
             audit: OpAudit | None = None, bounds: BoundsAudit | None = None, view=None,
             provenance: Provenance | None = None) -> dict:
    """One call of the entry on fresh guarded inputs, under one forced autotune config (`view`: a context the
    call runs in, such as `interpreter.interpreted`; `provenance`: the recorder of the provenance check, for the
    calls it compares, under the op audit)."""
    record: dict = {"config_index": config_index, "configs": config_labels(tuners, config_index), "error": None}
    for tuner, configs in tuners:
        tuner.configs = [config_at(configs, config_index)]  # one config: the autotuner runs it without benchmarking

    inputs = []

    def place(value):
        """A tensor input goes to the device inside guard bands; anything else passes as it is."""
        if not isinstance(value, torch.Tensor):
            return value
        inputs.append(guards.guarded_copy(value, device))
        return inputs[-1][1]

    n_out = entry.n_outputs if isinstance(entry, Launcher) else 0
    args = [place(v) for v in case["args"][:len(case["args"]) - n_out]]
    kwargs = {k: place(v) for k, v in case["kwargs"].items()}

    inst.reset()
    if inst.writes is not None:
        inst.writes.start(inst.allocs, [view for _, view, _ in inputs])
    if bounds:
        bounds.take()  # nothing from before this call counts against it
    if n_out:
        args += entry.outputs(case["args"][len(case["args"]) - n_out:], device, inst)
    new_call()
    if provenance is not None and audit is not None:
        provenance.start([view for _, view, _ in inputs])
        audit.provenance = inst.provenance = provenance
    start = time.perf_counter()
    result = None
    inst.active = True
    storages = {buf.untyped_storage().data_ptr() for buf, _, _ in inputs}
    window = audit.window(storages) if audit else contextlib.nullcontext()
    ledger = memory_check.LEDGER
    if ledger is not None:
        ledger.start(storages)
    printed = Printed()
    try:
        with window, (view() if view else contextlib.nullcontext()), contextlib.redirect_stdout(printed), \
                contextlib.redirect_stderr(printed), toolchain_warnings():
            result = entry(*args, **kwargs)
        if device == "cuda":
            torch.cuda.synchronize()
    except BaseException as exc:  # noqa: BLE001 - any failure of the submission is a result
        record.update(_error_record(exc, inst.path))
    finally:
        inst.active = False
        if audit:
            record["torch_ops"] = audit.result()
        if ledger is not None:
            record["memory"] = ledger.take()
        if inst.provenance is not None:
            inst.provenance.returned(result)
            record["provenance"] = inst.provenance.stop()
            audit.provenance = inst.provenance = None
        for tuner, configs in tuners:
            tuner.configs = list(configs)
    record["seconds"] = time.perf_counter() - start
    if printed.text or printed.dropped:  # the student's own output, for the student under a failing test
        record["printed"] = {"text": printed.text, "dropped": printed.dropped}
    if record["error"] is not None and device == "cuda":
        try:
            torch.cuda.synchronize()
        except BaseException:  # noqa: BLE001
            record["fatal"] = "the CUDA context is lost: the cases after this one run in a new worker"
            return record

    items = result if isinstance(result, (tuple, list)) else ([] if result is None else [result])
    outputs = []
    for item in items:
        if isinstance(item, torch.Tensor):
            ptr = item.data_ptr()
            alloc = next((j for j, (buf, _, _) in enumerate(inst.allocs)
                          if buf.data_ptr() <= ptr < buf.data_ptr() + buf.numel() * buf.element_size()), None)
            if alloc is not None and inst.writes is not None:
                inst.writes.returned(alloc)
            outputs.append({"kind": "tensor", "tensor": _to_cpu(item), "device": str(item.device),
                            "ptr": ptr, "nbytes": item.numel() * item.element_size(), "alloc": alloc})
        else:
            outputs.append({"kind": type(item).__name__, "repr": repr(item)[:200]})
    record["returned"] = type(result).__name__
    record["outputs"] = outputs
    record["inputs"] = [guards.guard_record(buf, view, off, input=True) for buf, view, off in inputs]
    record["allocs"] = [{**guards.guard_record(buf, view, off), "base": buf.data_ptr(),
                         "nbytes": buf.numel() * buf.element_size()} for buf, view, off in inst.allocs]
    record["launches"] = list(inst.launches)
    if inst.writes is not None:
        record["writes"] = list(inst.writes.events)
    if bounds:
        record["bounds"] = bounds.take()
        if not bounds_intact(bounds):
            record["bounds_tampered"] = True
    return record


def interpret_runs(entry, case: dict, module, inst: Instruments, tuners: list, runs: list[dict],
                   bounds: BoundsAudit, progress=lambda: None, device: str = "cuda") -> None:
    """On CUDA (and on the CPU for a test, `rerun_bounds`): each run's call again, its kernels in Triton's
    interpreter, on the inputs the CPU would grade (`case["audit"]`, or the case's own), so that
    grader/worker/address_check.py checks every address as it does on the CPU; its findings become the run's
    `bounds`. A call the interpreter cannot run is noted for staff (`bounds_note`) and costs nothing: CUDA's own
    verdict stands."""
    probe_case = {"id": case["id"], **(case.get("audit") or {"args": case["args"], "kwargs": case["kwargs"]})}
    holders = [(entry, "kernel")] if isinstance(entry, Launcher) else []
    done: dict[tuple, dict] = {}
    for c, record in enumerate(runs):
        if record.get("error") is not None:
            continue  # the call failed on CUDA already: the case fails whatever its addresses
        index = record.get("config_index", c)
        key = interpreted_key(tuners, index)
        if key not in done:
            done[key] = run_case(entry, probe_case, device, inst, tuners, index, None, bounds,
                                 view=lambda: interpreted(module, holders))
            progress()  # one more interpreted call done (the runner's stall clock restarts)
        probe = done[key]
        record["bounds"] = probe.get("bounds") or []
        if probe.get("bounds_tampered"):
            record["bounds_tampered"] = True
        if probe.get("error"):
            record["bounds_note"] = f"the interpreter could not run this call: {str(probe['error'])[:300]}"
            print(f"  {case['id']} (config {c}): address check skipped: {record['bounds_note']}", flush=True)


def share_outputs(runs: list[dict]) -> None:
    """An output with the same bits (dtype, shape and strides) as the same output of an earlier run of the case
    is sent as a reference to it, `same_as: [run, output]`, instead of a second copy. A right kernel gives the
    same bits under every autotune config as a rule (quantization does not depend on the tiles, and the INT8
    matmul accumulates in integers), so the case files, and the judge's reading and comparing, then shrink by the
    number of configs. The judge resolves each reference (grader/judge `resolve_shared`)."""
    for r, run in enumerate(runs):
        for k, out in enumerate(run.get("outputs") or []):
            t = out.get("tensor")
            if not isinstance(t, torch.Tensor):
                continue
            for earlier in range(r):
                prev = (runs[earlier].get("outputs") or [])[k:k + 1]
                p = prev[0].get("tensor") if prev else None
                if isinstance(p, torch.Tensor) and p.dtype == t.dtype and p.shape == t.shape \
                        and p.stride() == t.stride() and torch.equal(guards.bits_view(p), guards.bits_view(t)):
                    del out["tensor"]
                    out["same_as"] = [earlier, k]
                    break


def naive_call(entry, case: dict, device: str) -> None:
    """What a naive grader does first: one call with every config, so the stock autotuner benchmarks them all."""
    args = [a.to(device) if isinstance(a, torch.Tensor) else a for a in case["args"]]
    kwargs = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in case["kwargs"].items()}
    try:
        entry(*args, **kwargs)
        if device == "cuda":
            torch.cuda.synchronize()
    except Exception:  # noqa: BLE001 - only the timing matters here
        pass


def _load_module(name: str, path: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


class Stages:
    """Where this worker's seconds went, by stage, for the class benchmark (scripts/bench_class.py): sent in the
    last STATUS frame, kept in the staff JSON only. Triton's compilations are counted apart from the stage they
    happen in."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._compiled = 0.0  # compile seconds inside the stage being timed (the worker's wall)
        self._lock = threading.Lock()  # compilations side by side count from their threads

    def waited(self, seconds: float) -> None:
        """The worker's wall seconds waiting for compilations side by side (grader/worker/parallel_compile.py):
        of the compile stage's wall, not of the stage they happened in."""
        with self._lock:
            self._compiled += seconds
            self.add("compile_wall", seconds)

    def add(self, name: str, seconds: float) -> None:
        self.seconds[name] = round(self.seconds.get(name, 0.0) + seconds, 4)

    @contextlib.contextmanager
    def stage(self, name: str):
        start, before = time.perf_counter(), self._compiled
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - start - (self._compiled - before))

    def watch_compiles(self, gate: GpuGate | None, dynamo: bool = False) -> None:
        """Count the seconds of Triton's compilations (`triton.compiler.compile`, which a kernel's first launch
        with a new key calls, in every supported Triton), and let a shared hold of the GPU gate go while one
        runs: compiling is CPU work, and a timer waiting for the room should not wait for it."""
        import triton
        import triton.compiler

        orig = triton.compiler.compile
        stages = self

        def compile(*args, **kwargs):  # noqa: A001 - stands in for triton.compiler.compile
            start = time.perf_counter()
            pooled = in_pool()  # one of several side by side: their waiter counts the wall and left the gate
            try:
                if gate is not None and not pooled:
                    return gate.paused(lambda: orig(*args, **kwargs), torch.cuda.synchronize)
                return orig(*args, **kwargs)
            finally:
                spent = time.perf_counter() - start
                with stages._lock:
                    stages.add("compile", spent)
                    if not pooled:
                        stages._compiled += spent
                        stages.add("compile_wall", spent)

        triton.compiler.compile = compile
        if triton.compile is orig:  # Inductor's kernels (a staff baseline) compile through triton.compile
            triton.compile = compile
        if gate is None or not dynamo:
            return
        # torch.compile's first call of a staff baseline traces and compiles for seconds (Dynamo, Inductor) inside
        # a timing worker's warm-up: the gate's shared hold is let go meanwhile too.
        import torch._dynamo.callback as dynamo_callback

        suspended = []

        def start(*_args) -> None:
            suspended.append(gate.suspend(torch.cuda.synchronize))

        def end(*_args) -> None:
            if suspended and suspended.pop():
                gate.enter_shared()

        dynamo_callback.on_compile_start(start)
        dynamo_callback.on_compile_end(end)


def _single_threaded() -> bool:
    try:
        return len(os.listdir("/proc/self/task")) == 1
    except OSError:
        return True


def enter_sandbox(job: WorkerJob) -> dict[str, str]:
    """Apply the sandbox the job asks for (grader/worker/sandbox.py); returns which layers are on (the LOAD record
    carries it to the staff JSON)."""
    if not job.sandbox:
        return {"sandbox": "off: grading.sandbox is false"}
    limits = sandbox.Limits(**job.sandbox.get("limits", {}))
    run = Path(job.run_folder)
    plan = sandbox.plan([run, Path(job.cache)], ROOT, job.device, float(job.sandbox.get("timeout_s", 600)), limits)
    os.environ.update(sandbox.toolchain_env(job.device))
    report = sandbox.apply(plan, run)
    os.environ["HOME"] = os.environ.get("TMPDIR", str(run))
    return report


class Worker:
    """One worker's run, phase by phase (`run`): open the GPU's gate; read what the submission must not reach
    (its cases' inputs, the staff baselines); enter the sandbox; import the submission under the instruments;
    grade each case (its configs, the address check's re-run, the twin, the records); time the speed tests; say
    it is done, with where the seconds went."""

    def __init__(self, job: WorkerJob, records: RecordWriter) -> None:
        self.job, self.records, self.device = job, records, job.device
        self.stages = Stages()
        self.t_main = time.perf_counter()
        self.last_status: dict = {}
        self.path = os.path.abspath(job.submission)  # the runner's copy, in the run folder
        self.load: dict = {"ok": False, "kernels": {}}
        self.gate: GpuGate | None = None
        self.shared = contextlib.nullcontext
        self.cases: dict[int, dict] = {}
        self.baselines: dict[int, object] = {}
        self.parallel: ParallelCompile | None = None
        # what the import finds and installs (`import_submission`)
        self.inst: Instruments | None = None
        self.audit: OpAudit | None = None
        self.bounds: BoundsAudit | None = None
        self.module = self.entry = None
        self.tuners: list[tuple] = []
        self.n_runs = 1

    def status(self, report: dict) -> None:
        """A progress report (the runner's stall clock restarts with each)."""
        self.last_status.clear()
        self.last_status.update(report)
        self.records.json(Kind.STATUS, report)

    def run(self) -> int:
        # The first record: the interpreter, torch, triton and the grader are loaded and nothing of the submission
        # has run. The runner's time and stall limits count from it (grader/isolation/runner.py `_wait`), so a
        # fresh interpreter's start on a loaded machine is not the submission's time.
        self.records.json(Kind.STATUS, {"started": True})
        self.open_gate()
        self.read_trusted_inputs()
        self.enter_sandbox()
        if not self.import_submission():
            return 0
        self.arm_parallel_compile()
        self.stages.add("load", time.perf_counter() - self.t_main - self.stages.seconds.get("import", 0.0)
                        - self.stages.seconds.get("compile", 0.0))
        print(f"worker {self.job.run_id}: ready after {time.perf_counter() - START:.2f} s", flush=True)
        for i in self.job.cases:
            if not self.grade_case(i):
                return 3
        memory_check.LEDGER = None  # timed calls run as they would without the grader: no copies between launches
        for item in self.job.perf:
            self.time_speed_test(item)
        self.report_done()
        return 0

    def open_gate(self) -> None:
        """The GPU's gate (grader/protocol GpuGate): opened now, before the sandbox puts its files out of reach.
        While the worker waits at it, the last report is sent again (waiting is not a hang)."""
        if self.job.gate and self.device == "cuda":
            self.gate = GpuGate.open(self.job.gate,
                                     lambda: self.records.json(Kind.STATUS, {**self.last_status, "gate": "waiting"}))
            self.shared = self.gate.shared

    def read_trusted_inputs(self) -> None:
        """What the submission must not reach is read first, as the grader: its own cases' inputs (no other
        case's) and the staff baselines."""
        with self.stages.stage("load_inputs"):
            self.cases = {i: torch.load(f, weights_only=True) for i, f in self.job.inputs.items()}
        with self.stages.stage("load_baseline"):
            if self.job.perf:
                compile_here(Path(self.job.run_folder))
            for item in self.job.perf:
                try:
                    module = load_baseline(f"baseline{item.index}", str(ROOT / item.baseline))
                    self.baselines[item.index] = getattr(module, self.job.entry)
                except BaseException as exc:  # noqa: BLE001 - staff code: reported, and the test fails closed
                    self.baselines[item.index] = f"the baseline could not be loaded: {type(exc).__name__}: {exc}"

    def enter_sandbox(self) -> None:
        """The sandbox, then the CUDA context and one torch thread."""
        with self.stages.stage("load_sandbox"):
            self.load["sandbox"] = enter_sandbox(self.job)
        if self.gate is not None:  # the CUDA context, before the first hold of the gate (seconds when workers
            with self.stages.stage("load_cuda"):  # start at once)
                torch.empty(1, device="cuda")
            # A call that idles (no launch for a second, its GPU work done) lets its share go: a submission spinning
            # in Python does not keep every timer of the class waiting. Started before watch_threads: the grader's.
            self.gate.release_when_idle(torch.cuda.synchronize)
        # Workers run side by side, one per core or more: torch's own thread pool in each would only contend (with
        # two per core, its spinning threads made the guard bookkeeping of a case ten times slower on CI's 2 cores).
        torch.set_num_threads(1)

    def import_submission(self) -> bool:
        """The instruments installed, the submission imported (under the op audit), its entry and kernels found;
        the LOAD record sent. False when the import or the entry failed (the record says why)."""
        job, path = self.job, self.path
        self.audit = audit = OpAudit(path)
        watch_threads()  # a thread the submission starts runs under the op audit too
        try:
            originals = patch_interpreter() if self.device == "cpu" else {}
            self.inst = inst = Instruments()
            inst.path, inst.audit, inst.gate = path, audit, self.gate
            self.stages.watch_compiles(self.gate, dynamo=bool(job.perf))  # torch.compile runs in timing workers only
            if self.device == "cpu" and job.gpu_compile:
                inst.gpu_check = CompileCheck(originals, job.compile_passed)
            self.bounds = None
            if job.bounds and not job.warm:
                self.bounds = BoundsAudit(path)
                self.bounds.install()
            if job.writes and not job.warm:
                inst.writes = WriteWatch(path)
            if job.provenance and not job.warm and job.cases:  # the memory check (grader/worker/memory_check.py),
                memory_check.install()                             # from the import on, in the calls that are judged
            os.environ.update((job.launch or {}).get("env") or {})
            with audit.window(), self.stages.stage("import"):
                self.module = _load_module("submission", path)
            self.load["torch_ops"] = [{**r, "phase": "import"} for r in audit.result()]
            entry = getattr(self.module, job.entry, None)
            if job.launch:
                entry = Launcher(entry, job.launch)
            elif not callable(entry):
                raise AttributeError(f"the submission defines no function {job.entry}")
            self.entry = entry
            self.load["kernels"] = {name: describe_kernel(getattr(self.module, name, None)) for name in job.kernels}
            self.tuners = [(t, list(t.configs)) for t in find_autotuners(self.module)]
            if not job.specialize:
                unspecialize(self.module)
            self.load["ok"] = True
        except BaseException as exc:  # noqa: BLE001
            self.load.update(_error_record(exc, path))
        self.records.json(Kind.LOAD, self.load)
        return self.load["ok"]

    def arm_parallel_compile(self) -> None:
        """How many runs a case makes (one per config of the longest autotuner), and on CUDA an autotuned kernel's
        configs compiled side by side at its first launch of a case (grader/worker/parallel_compile.py)."""
        job, gate = self.job, self.gate
        self.n_runs = 1 if job.warm else max([len(c) for _, c in self.tuners] + [1])
        if self.device == "cuda" and self.tuners and job.compile_processes != 1 \
                and (self.n_runs > 1 and job.cases or job.perf):
            self.parallel = ParallelCompile(job.compile_processes,
                                            (lambda work: gate.paused(work, torch.cuda.synchronize)) if gate else None,
                                            self.stages.waited)
            self.parallel.install(self.tuners, forced=bool(job.cases))

    def grade_case(self, i: int) -> bool:
        """Case `i`: its runs (one per config), the address check's re-run, the twin, and its CASE record. False
        when a run was fatal (the CUDA context is lost): the runner starts a new worker for the cases after it."""
        case = self.cases[i]
        t_case = time.perf_counter()
        self.status({"case": case["id"], "index": i})
        if self.job.benchmark_autotune:
            naive_call(self.entry, case, self.device)
        # The provenance check (grader/worker/provenance.py): the case's twin (its inputs' elements in another
        # order, from the trusted side) is called under one config, chosen by the case's index so that a class of
        # cases covers every config, and that config's graded call is recorded the same way.
        job = self.job
        twin = case.get("twin") if job.provenance and not job.warm and not job.launch else None
        runs, paired = self.run_configs(i, case, twin)
        fatal = any(r.get("fatal") for r in runs)
        # On the CPU (tests only) the graded run leaves the addresses to the re-run, as a compiled kernel does
        if (self.device == "cuda" or job.rerun_bounds) and self.bounds is not None and not fatal:
            self.check_addresses(i, case, runs)
        if twin and not fatal:
            with self.stages.stage("twin"), self.shared():
                record = run_case(self.entry, {"id": case["id"], "args": twin["args"], "kwargs": twin["kwargs"]},
                                  self.device, self.inst, self.tuners, paired, self.audit, None,
                                  provenance=Provenance())
            record["twin"] = True
            runs.append(record)
            self.status({"case": case["id"], "index": i, "runs": len(runs), "twin": True})
            fatal = bool(record.get("fatal"))
        t_save = time.perf_counter()
        with self.stages.stage("records"):
            share_outputs(runs)
            self.records.tensors(Kind.CASE, i, {"id": case["id"], "runs": runs})
        calls = sum(r["seconds"] for r in runs)
        same = sum(1 for r in runs if "same_call_as" in r)
        print(f"  {case['id']}: {len(runs)} run(s){f' ({same} the same call as an earlier config)' if same else ''} "
              f"{t_save - t_case:.2f} s (calls {calls:.2f} s), "
              f"save {time.perf_counter() - t_save:.2f} s", flush=True)
        if fatal:
            self.status({"case": case["id"], "index": i, "fatal": runs[-1]["fatal"]})
        return not fatal

    def run_configs(self, i: int, case: dict, twin) -> tuple[list[dict], int | None]:
        """The graded calls of case `i`, one per config, and the config its twin is paired with (None without a
        twin). On the interpreter, configs with the same `interpreted_key` make one call (`same_call`); the twin's
        config is then the first of a group, so the call it records serves the group too."""
        device, inst, tuners, parallel = self.device, self.inst, self.tuners, self.parallel
        first_bounds = None if device != "cuda" and self.job.rerun_bounds else self.bounds
        keys = [interpreted_key(tuners, c) if device == "cpu" else c for c in range(self.n_runs)]
        firsts = [c for c in range(self.n_runs) if keys.index(keys[c]) == c]
        paired = firsts[i % len(firsts)] if twin else None
        runs: list[dict] = []
        ran: dict[tuple, tuple[dict, list]] = {}  # on the interpreter: a config's key -> its call (`same_call`)
        for c in range(self.n_runs):
            key = keys[c] if device == "cpu" else None
            if key in ran:
                record = same_call(*ran[key], c, tuners, inst)
            else:
                with self.stages.stage("cases"), self.shared(), \
                        parallel.arming() if parallel is not None and c == 0 else contextlib.nullcontext():
                    record = run_case(self.entry, case, device, inst, tuners, c, self.audit, first_bounds,
                                      provenance=Provenance() if c == paired else None)
                if key is not None:
                    ran[key] = (record, list(inst.calls))
            runs.append(record)
            # progress, for the runner's stall limit (grading.stall_s): one more run of this case is done
            self.status({"case": case["id"], "index": i, "runs": c + 1})
            if record.get("fatal"):
                break
        return runs, paired

    def check_addresses(self, i: int, case: dict, runs: list[dict]) -> None:
        """The address check's interpreted re-run of each call (`interpret_runs`). Not through the gate: the
        kernels run in the interpreter, on the host; what reaches the GPU is a copy of the CPU-size inputs, and a
        hold of seconds here would keep a timer waiting for as long. While the status says `auditing`, the runner's
        stall limit is the CPU's (it interprets the CPU's inputs); a graded call that hangs is stopped after the
        CUDA one."""
        auditing = {"case": case["id"], "index": i, "runs": len(runs), "auditing": True}
        self.status(auditing)
        with self.stages.stage("address"):
            interpret_runs(self.entry, case, self.module, self.inst, self.tuners, runs, self.bounds,
                           functools.partial(self.status, auditing), self.device)
        self.status({"case": case["id"], "index": i, "runs": len(runs), "audited": True})

    def time_speed_test(self, item) -> None:
        """One speed test (grader/worker/timing.py `time_calls`), its PERF record sent."""
        t_perf = time.perf_counter()
        self.status({"perf": item.test})
        baseline = self.baselines[item.index]
        if isinstance(baseline, str):
            record = {"error": baseline}
        else:
            alive = functools.partial(self.records.json, Kind.STATUS, {"perf": item.test, "warming": True})
            parallel = self.parallel
            with self.stages.stage("timing"):
                record = time_calls(self.entry, baseline, self.cases[item.case], self.device, item.warmup, item.reps,
                                    item.clock, progress=alive, gate=self.gate,
                                    first=parallel.arming if parallel is not None and not self.job.cases else None,
                                    phase=self.stages.stage)
        self.records.tensors(Kind.PERF, item.index, {"test": item.test, **record})
        print(f"  {item.test}: timed in {time.perf_counter() - t_perf:.2f} s", flush=True)

    def report_done(self) -> None:
        """The last STATUS: done, with where the seconds went (the gate's waits, the compilations side by side)."""
        stages, gate, parallel = self.stages, self.gate, self.parallel
        if gate is not None:
            stages.seconds["gate_wait"] = round(gate.waited_s, 4)
            stages.seconds["gate_bypassed"] = gate.bypassed
            stages.seconds["gate_idle_releases"] = gate.idle_releases
        if parallel is not None:  # the children's compilations (the worker's own loads of them are counted already)
            stages.add("compile", parallel.child_seconds)
            stages.seconds["parallel_compiles"] = parallel.children
            stages.seconds["parallel_failed"] = parallel.failed  # children that did not exit 0: compiled again here
        done: dict = {"done": True, "stages": stages.seconds}
        if self.inst.gpu_check is not None:  # for the job's later workers (grader/protocol/records.py compile_passed)
            stages.seconds["gpu_checks"] = self.inst.gpu_check.compiled
            done["compile_passed"] = self.inst.gpu_check.passed()
        self.records.json(Kind.STATUS, done)


def main(job_file: Path, records_fd: int) -> int:
    # The job file is in the trusted folder, which the sandbox below leaves out of reach: read it first.
    job = WorkerJob.from_json(job_file.read_text())
    if job.sandbox and not _single_threaded():
        sandbox.go_on_in_a_child()  # `python -m grader.worker.main` has a thread or two by now; a forked child has one
    return Worker(job, RecordWriter(records_fd)).run()


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), int(sys.argv[2])))
