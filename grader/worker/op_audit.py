"""The op audit (worker side): which torch operations the submission itself runs, and on how much data.

While the submission is imported and while each call of a case runs, two torch modes are installed:

* a dispatch mode sees every ATen operation, whichever Python API asked for it (`torch.round(x)`, `x * 127`,
  `x.round_()`, `torch.ops.aten.round(x)`, a torch call inside an interpreted kernel);
* a function mode sees what never reaches the dispatcher: data handed to Python (`tolist`, `numpy`,
  `__array__`).

An operation counts as the submission's when the innermost Python frame that asked for it, past torch's own, the
standard library's and triton.language's, is in the submission's file; so the grader's work (guard bands,
copies of the outputs) is not counted, while a torch call the submission hides behind a standard-library helper
or Triton's host-side language objects (`tl.constexpr(x) * 127` runs torch in triton/language/core.py) is. When
that frame is Triton's runtime instead (the interpreter, the autotuner and its hooks) and the submission's file
is further out, the operation is Triton's housekeeping if it only allocates, views, casts or copies (the
interpreter's copies of the arguments), and the submission's otherwise (a hook that calls torch.round).
Threads: torch's modes hold for the thread that installed them, so every Python thread started while a window
is open gets modes of its own, and what it runs is recorded the same way.

Each operation is recorded as {op, line, calls, elements, shape, scalar}: `elements` is the size of what it
produced (or read, for an operation that returns no tensor), `scalar` says that every tensor it touched had at
most one element and none of them held the call's input data (a view, a cast or a copy of an input, and a buffer
filled from one, count as input data, so `127 * x` on a one-element input is not scalar arithmetic, nor is
`.item()` of a buffer filled from an input element).

The worker records and never judges: grader/protocol/torch_ops.py applies the task's policy in the judge. Like every
record made inside the submission's process, this one is evidence, not proof: the static policy keeps the modes
themselves out of reach, and the sandbox keeps the answers out of the process.
"""

from __future__ import annotations

import _thread
import os
import sys
import sysconfig
import threading

import torch
import triton
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from grader.protocol import torch_ops
from grader.worker import memory_check, provenance

MAX_RECORDS = 256
"""Distinct (op, line, scalar) records kept per window; more are counted in the last one."""
COPIES = {"_to_copy", "clone", "copy_", "contiguous", "_copy_from", "_copy_from_and_resize", "lift_fresh_copy",
          "fill_", "fill"}
"""Operations whose result holds the same data as their input: a copy of input data is input data too, and so is a
buffer filled from it (`tmp.fill_(x[i])`). With fills left out, filling (allocation work) and `tmp.item()` (one
element that held no input data: "scalar" work) read an input value back one element at a time, out of the audit's
sight (a known cheat, tasks/10_quantize_global_int8/wrong/fill_item_launder.py). Arithmetic and reductions on input
data are counted where they happen, and their results are not followed further: a task may allow the absmax
(`x.abs().max()`), and `1.0 / absmax` is then scalar work."""
TO_PYTHON = {"tolist": "tolist", "numpy": "numpy", "__array__": "numpy", "__iter__": "iter"}
"""Tensor methods that hand data to Python, which the dispatcher never sees."""

_SKIP = tuple(os.path.dirname(p) + os.sep for p in (torch.__file__, os.__file__)) + (
    sysconfig.get_paths()["stdlib"] + os.sep, __file__)
_TRITON = os.path.dirname(triton.__file__) + os.sep
_TRITON_LANGUAGE = _TRITON + "language" + os.sep
"""Frames passed over like torch's: the language's objects do on the host whatever the submission asks."""
HOUSEKEEPING = frozenset().union(*(torch_ops.GROUPS[g] for g in ("alloc", "view", "cast", "copy", "meta"))) | {
    "lift_fresh", "lift_fresh_copy", "set_", "resolve_conj", "resolve_neg"}
"""What Triton's runtime may do with torch on the submission's behalf without it counting (the interpreter copies
arguments to the host and back); any other operation under Triton's runtime counts as the submission's."""


class OpAudit:
    """Records the submission's torch operations while a window is open (`with audit.window(...)`)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.records: dict[tuple, dict] = {}
        self.inputs: set[int] = set()
        """Storage addresses that hold the call's input data (its inputs, their views and copies)."""
        self.derived: set[int] = set()
        """Storage addresses that hold values computed from input data by any operation (`x[i:i+1].max()`): what
        Python reads of them counts against the task's `python_reads` (record field `reads_input`)."""
        self.constant: set[int] = set()
        """Storage addresses of tensors made from constants alone: by an operation none of whose tensor arguments
        held anything but such constants (`torch.arange(16) * 4`, `torch.tensor([127.0])`), and not received by a
        kernel launch since (`launched`). Work on them only builds a constant table, and does not count against the
        call (record field `constant`); data laundered into such a tensor from Python is the provenance check's
        to find (grader/worker/provenance.py)."""
        self.provenance = None
        """The provenance check's recorder (grader/worker/provenance.py), when the call is one it records: every
        operation of the submission is one of its checkpoints."""
        self._dispatch = _Dispatch(self)
        self._function = _Function(self)

    def window(self, input_storages: set[int] | None = None) -> _Window:
        """Open a recording window (the import, or one call); `input_storages` are the call's inputs."""
        self.records = {}
        self.inputs = set(input_storages or ())
        self.derived = set(self.inputs)
        self.constant = set()
        return _Window(self)

    def launched(self, tensors: list) -> None:
        """A kernel launch received these tensors: what they hold now is a kernel's work, not a constant."""
        for t in tensors:
            self.constant.discard(t.untyped_storage().data_ptr())

    def result(self) -> list[dict]:
        return list(self.records.values())

    # ------------------------------------------------------------------------------------------- recording

    def student_line_at(self, depth: int) -> tuple[int, bool] | None:
        """The line of the submission that asked for the current operation, and whether Triton's runtime stands
        between them; None when the operation is not the submission's. `depth`: the frames to skip (the audit's)."""
        frame = sys._getframe(depth)
        through_triton = False
        while frame is not None:
            name = frame.f_code.co_filename
            if name == self.path:
                return frame.f_lineno, through_triton
            if name.startswith(_TRITON_LANGUAGE):
                pass  # passed over, like torch's frames
            elif name.startswith(_TRITON):
                through_triton = True  # the runtime: whose work it is depends on the operation (see HOUSEKEEPING)
            elif not name.startswith(_SKIP) and name != "<string>":
                return None  # the grader's or another library's work
            frame = frame.f_back
        return None

    def attribute(self, op: str) -> int | None:
        """The submission's line for operation `op`, or None when it is not the submission's work."""
        found = self.student_line_at(3)
        if found is None:
            return None
        line, through_triton = found
        return None if through_triton and op in HOUSEKEEPING else line

    def note(self, op: str, line: int, tensors_in: list, tensors_out: list) -> None:
        store = lambda t: t.untyped_storage().data_ptr()  # noqa: E731
        touched = [t for t in (*tensors_in, *tensors_out) if isinstance(t, torch.Tensor)]
        tainted = any(store(t) in self.inputs for t in tensors_in if isinstance(t, torch.Tensor))
        if tainted and op in COPIES:
            self.inputs.update(store(t) for t in tensors_out if isinstance(t, torch.Tensor))
        derived = any(store(t) in self.derived for t in tensors_in if isinstance(t, torch.Tensor))
        if derived:
            self.derived.update(store(t) for t in tensors_out if isinstance(t, torch.Tensor))
        constant = not derived and not tainted and all(
            store(t) in self.constant for t in tensors_in if isinstance(t, torch.Tensor))
        for t in tensors_out:
            if isinstance(t, torch.Tensor):
                (self.constant.add if constant else self.constant.discard)(store(t))
        outs = [t for t in tensors_out if isinstance(t, torch.Tensor)]
        elements = sum(t.numel() for t in outs) if outs else max((t.numel() for t in touched), default=0)
        largest = max(touched, key=lambda t: t.numel(), default=None)
        scalar = all(t.numel() <= 1 for t in touched) and not tainted
        key = (op, line, scalar, derived, constant)
        if key not in self.records and len(self.records) >= MAX_RECORDS:
            key = next(reversed(self.records))
        rec = self.records.setdefault(key, {"op": op, "line": line, "scalar": scalar, "reads_input": derived,
                                            "constant": constant, "calls": 0, "elements": 0, "shape": []})
        rec["calls"] += 1
        rec["elements"] += int(elements)
        if largest is not None and largest.numel() >= _numel(rec["shape"]):
            rec["shape"] = list(largest.shape)


def _numel(shape: list[int]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n if shape else 0


def _flat(value) -> list:
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _flat(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _flat(v)]
    return [value] if isinstance(value, torch.Tensor) else []


class _Dispatch(TorchDispatchMode):
    def __init__(self, audit: OpAudit) -> None:
        super().__init__()
        self.audit = audit

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = func.overloadpacket.__name__
        name = "item" if name == "_local_scalar_dense" else name
        line = self.audit.attribute(name)
        ledger = memory_check.LEDGER
        given = _flat((args, kwargs)) if line is not None else []
        if ledger is not None and line is not None:  # what the submission's operation reads is as last written
            ledger.check([("", t) for t in given], "op", name, line)
        out = func(*args, **kwargs)
        made = _flat(out) if line is not None else []
        if ledger is not None:  # a tracked writer: what it wrote, and (the submission's) what it made
            ledger.wrote(memory_check.written_args(func, args, kwargs))
            if line is not None:
                ledger.wrote(made, new_only=True)
        if line is not None:
            self.audit.note(name, line, given, made)
            provenance.register(made)
            if self.audit.provenance is not None:
                self.audit.provenance.op(name, line, args, kwargs, out)
        return out


class _Function(TorchFunctionMode):
    def __init__(self, audit: OpAudit) -> None:
        super().__init__()
        self.audit = audit

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        op = TO_PYTHON.get(getattr(func, "__name__", ""))
        if op is not None:
            line = self.audit.attribute(op)
            if line is not None:
                self.audit.note(op, line, _flat(args), [])
        return out


class _Window:
    def __init__(self, audit: OpAudit) -> None:
        self.audit = audit

    def __enter__(self) -> OpAudit:
        self.audit._function.__enter__()
        self.audit._dispatch.__enter__()
        _open.append(self.audit)
        return self.audit

    def __exit__(self, *exc) -> None:
        _open.remove(self.audit)
        self.audit._dispatch.__exit__(*exc)
        self.audit._function.__exit__(*exc)


# ------------------------------------------------------------------------------------------------- threads

_open: list[OpAudit] = []
"""The audits whose window is open (one at a time in a worker)."""


def _audited(target):
    """`target` run in a new thread under modes of its own for the audits open when the thread was asked for."""
    audits = list(_open)

    def run(*args, **kwargs):
        modes = [m for a in audits for m in (_Function(a), _Dispatch(a))]
        for mode in modes:
            mode.__enter__()
        try:
            return target(*args, **kwargs)
        finally:
            for mode in reversed(modes):
                mode.__exit__(None, None, None)

    return run if audits else target


def watch_threads() -> None:
    """Route every new Python thread through `_audited`: threading's and _thread's own ways of starting one
    (the names differ across Python versions). The worker calls it once, before importing the submission."""
    for module in (_thread, threading):
        for name in ("start_new_thread", "start_new", "_start_new_thread", "start_joinable_thread",
                     "_start_joinable_thread"):
            start = getattr(module, name, None)
            if start is None or getattr(start, "_audited", False):
                continue

            def patched(function, *args, _start=start, **kwargs):
                return _start(_audited(function), *args, **kwargs)

            patched._audited = True
            setattr(module, name, patched)

