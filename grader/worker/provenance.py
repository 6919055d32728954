"""The provenance check (worker side): what reaches a kernel or a torch operation, recorded for a differential replay.

Each case is called once more (grader/worker/main.py, "the twin") with the same shapes and other values: the inputs'
elements in another order, made by the trusted side, which judges the twin's outputs against the oracle's answers for
those values. During the twin and during the graded call under the same config, this recorder notes, at every
checkpoint (each torch operation the submission runs, each kernel launch, the call's return), every argument that
is not **in flow**:

* in flow: the call's inputs (and their views); every tensor a kernel launch received (a kernel may have written
  it); the call's guarded allocations (`hold`); the result of a torch operation any of whose tensor arguments
  was in flow; a tensor the worker saw made or
  used before the call began (`register`: a guarded allocation, a kernel's argument or a torch operation's result
  in an earlier call or at import, still alive: a workspace kept between calls; what is written into it during the
  call is noted where it is written);
* anything else is noted with its bits: a tensor by its dtype, shape, strides and a digest of its elements, a
  Python number or string by its value.

The judge (grader/judge/provenance.py) compares the two records checkpoint by checkpoint. A value that depends on
the inputs changes when the inputs' values change; so a noted argument that differs between the two calls carries
input data that reached it by no route this recorder follows: read into Python through `str()`, `format()`, a
buffer, a file, pickle, DLPack, iteration, or any other channel, and handed back as a new tensor or a number. A
constant table (`torch.tensor` of literals, `arange`, a lookup table, a scale from the shapes) is the same in both
calls and passes. Why this does not depend on listing channels: whatever the route out of the tracked world, data
must come back in to reach an output, and the only ways back in are a torch operation or a kernel's argument
(ctypes and numpy, which could write memory behind torch's back, are refused statically), both of which are
checkpoints.

Tensors in flow are held (a reference to their storage) until the call ends, so no fresh buffer can reuse a flow
tensor's address and pass for it. Like every record made in the submission's process, this one is evidence, which
the static policy keeps out of the submission's reach.
"""

from __future__ import annotations

import hashlib
import math
import weakref

import torch

from grader.protocol import guards

MAX_CHECKPOINTS = 4096
"""Checkpoints recorded per call; past it the call is marked `overflow` and the judge compares what was kept."""
MAX_TEXT = 120
"""A string argument longer than this is kept as its digest."""

_KNOWN: dict[int, tuple[weakref.ref, int]] = {}
"""Storage address -> (the tensor seen there, the call it was seen in): what the worker saw made or used, in every
call, recorded or not (`register`). A tensor that is still alive holds its storage, so its address is not reused."""
_CALL = [0]
"""The number of the call now running (`Provenance.start` counts the recorded ones; `new_call` every one)."""


def new_call() -> None:
    """A call of the entry begins (recorded or not): what is registered from now on belongs to it."""
    _CALL[0] += 1
    if len(_KNOWN) > 4096:  # let the addresses of tensors that died go
        for ptr in [p for p, (ref, _) in _KNOWN.items() if ref() is None]:
            del _KNOWN[ptr]


def register(tensors) -> None:
    """Tensors the worker saw made or used (a guarded allocation, a launch's arguments, a torch operation's
    results): in a later call, while alive, they are in flow (a workspace kept between calls)."""
    for t in tensors:
        if isinstance(t, torch.Tensor) and t.device.type != "meta":
            storage = _storage(t)
            if storage is None or _known_at(storage.data_ptr()):
                continue  # seen before: it keeps the call it was first seen in
            try:  # (a dead tensor's address is taken over: CUDA's caching allocator hands addresses out again)
                _KNOWN[storage.data_ptr()] = (weakref.ref(t), _CALL[0])
            except TypeError:
                pass


def _known_at(ptr: int) -> bool:
    """Whether the tensor registered at this address is alive and still there."""
    entry = _KNOWN.get(ptr)
    t = entry[0]() if entry is not None else None
    storage = _storage(t) if t is not None else None
    return storage is not None and storage.data_ptr() == ptr


def _known_before(ptr: int) -> bool:
    return _known_at(ptr) and _KNOWN[ptr][1] < _CALL[0]


def _storage(t: torch.Tensor):
    try:
        return t.untyped_storage()
    except (RuntimeError, NotImplementedError):
        return None


def fingerprint(t: torch.Tensor) -> list:
    """A tensor argument as noted: ["t", dtype, shape, strides, digest]; the digest of a tensor holding one value
    everywhere (an allocation's poison, a fill) is that value's bits, which is cheaper than hashing it (on CUDA it
    stays on the device)."""
    t = t.detach()
    head = ["t", guards.dtype_name(t.dtype), list(t.shape), list(t.stride())]
    if t.numel() == 0:
        return [*head, "empty"]
    if t.layout != torch.strided or t.is_complex():
        t = t.to_dense() if t.layout != torch.strided else t
        return [*head, guards.digest(torch.view_as_real(t) if t.is_complex() else t)]
    bits = guards.bits_view(t).reshape(-1)
    first = bits[0]
    if bool((bits == first).all()):
        return [*head, f"u{int(first.item()) if bits.dtype != torch.bool else int(bool(first.item()))}"]
    return [*head, guards.digest(t)]


def scalar(value) -> list | None:
    """A non-tensor argument as noted, or None for what carries no data (a function, a type, None)."""
    if isinstance(value, bool) or value is None:
        return ["b", repr(value)]
    if isinstance(value, int):
        return ["i", str(value)]
    if isinstance(value, float):
        return ["f", "nan" if math.isnan(value) else float.hex(value)]
    if isinstance(value, complex):
        return ["c", repr(value)]
    if isinstance(value, (str, bytes)):
        text = value if isinstance(value, str) else value.hex()
        return ["s", text if len(text) <= MAX_TEXT else hashlib.sha256(text.encode()).hexdigest()]
    if isinstance(value, (torch.dtype, torch.device, torch.memory_format, torch.layout)):
        return ["o", str(value)]
    return None


class Provenance:
    """Records one call's checkpoints (see the module's docstring); `start` and `stop` bracket the call."""

    def __init__(self) -> None:
        self.active = False
        self.records: list[dict] = []
        self.flow: dict[int, object] = {}
        self.overflow = 0

    # ------------------------------------------------------------------------------------------- the call

    def start(self, inputs: list[torch.Tensor]) -> None:
        """A recorded call begins (after `new_call`): its inputs are in flow, and so is what the worker saw before
        it (`register`)."""
        self.records, self.flow, self.overflow = [], {}, 0
        for t in inputs:
            self._hold(t)
        self.active = True

    def stop(self) -> dict:
        """The call ended: its record, and the flow tensors let go."""
        self.active = False
        record = {"checkpoints": self.records, "overflow": self.overflow}
        self.records, self.flow = [], {}
        return record

    # ------------------------------------------------------------------------------------------- flow

    def hold(self, t: torch.Tensor) -> None:
        """A guarded allocation of the call is in flow from its start: a workspace made in the graded call and
        kept is in flow in the twin, which comes later, so an operation on it alone is a checkpoint in both. What
        is written into it is a checkpoint's (a launch, a torch operation on it); any other write is the memory
        check's (grader/worker/memory_check.py), which holds it to the bytes it was allocated with."""
        if self.active:
            self._hold(t)

    def _hold(self, t: torch.Tensor) -> None:
        if t.device.type == "meta":
            return
        storage = _storage(t)
        if storage is not None:
            self.flow.setdefault(storage.data_ptr(), storage)

    def in_flow(self, t: torch.Tensor) -> bool:
        storage = _storage(t)
        if storage is None:
            return False
        return storage.data_ptr() in self.flow or _known_before(storage.data_ptr())

    def _note(self, value) -> list | None:
        if isinstance(value, Nested):
            return value.note()
        if isinstance(value, torch.Tensor):
            return None if self.in_flow(value) else fingerprint(value)
        return scalar(value)

    def _add(self, at: str, name: str, line: int | None, noted: list) -> None:
        if len(self.records) >= MAX_CHECKPOINTS:
            self.overflow += 1
            return
        self.records.append({"at": at, "name": name, "line": line, "args": noted})

    # ------------------------------------------------------------------------------------------- checkpoints

    def op(self, name: str, line: int | None, args: tuple, kwargs: dict, out) -> None:
        """After a torch operation of the submission. One that takes a tensor in flow puts its results in flow,
        and is a checkpoint: its other arguments as noted (in-place ones as they are after it). One that takes
        none is not: its results are not in flow, so they are noted wherever they go on to a checkpoint. (So a
        constant table made only in a call's first call, and kept, does not set the two calls apart.)"""
        if not self.active:
            return
        flat = list(_walk(args, "")) + list(_walk(kwargs, ""))
        if not any(isinstance(v, torch.Tensor) and self.in_flow(v) for _, v in flat):
            return
        noted = [[path, n] for path, v in flat if (n := self._note(v)) is not None]
        self._add("op", name, line, noted)
        for _, t in _walk(out, ""):
            if isinstance(t, torch.Tensor):
                self._hold(t)

    def launch(self, kernel: str, line: int | None, names: list[str], args: tuple, kwargs: dict) -> None:
        """Before a kernel launch: each argument (by the kernel's parameter name where known) as noted."""
        if not self.active:
            return
        noted = []
        for k, value in enumerate(args):
            label = names[k] if k < len(names) else f"#{k}"
            for path, v in _walk(value, label):
                n = self._note(v)
                if n is not None:
                    noted.append([path, n])
        for key, value in kwargs.items():
            if key in ("warmup",):
                continue
            if key == "grid":
                noted.append(["grid", grid_note(value, names, args, kwargs)])
                continue
            for path, v in _walk(value, str(key)):
                n = self._note(v)
                if n is not None:
                    noted.append([path, n])
        self._add("launch", kernel, line, noted)

    def launched(self, tensors: list[torch.Tensor]) -> None:
        """After a launch: what it received is in flow (its kernel may have written any of it)."""
        if self.active:
            for t in tensors:
                self._hold(t)

    def returned(self, result) -> None:
        """The call's return value, as noted (an output computed outside the tracked routes shows here)."""
        if not self.active:
            return
        noted = [[path, n] for path, v in _walk(result, "result") if (n := self._note(v)) is not None]
        self._add("return", "return", None, noted)


def grid_note(grid, names: list[str], args: tuple, kwargs: dict) -> list:
    """A launch grid as noted: its sizes (a grid is a channel too: a program's id can carry a number). A callable
    grid is evaluated on the launch's arguments, as Triton does."""
    if callable(grid):
        try:
            meta = {**dict(zip(names, args)), **{k: v for k, v in kwargs.items() if k != "grid"}}
            grid = grid(meta)
        except Exception:  # noqa: BLE001 - the launch itself says what is wrong
            return ["o", "callable"]
    if isinstance(grid, int):
        grid = (grid,)
    if isinstance(grid, (tuple, list)) and all(isinstance(g, int) for g in grid):
        return ["i", ",".join(str(int(g)) for g in grid)]
    return ["o", type(grid).__name__]


MAX_DEPTH = 4
"""Levels of nested lists, tuples and dicts noted one leaf at a time; what lies deeper is noted as one `Nested`."""
MAX_ITEMS = 256
"""Items of one list, tuple or dict noted one at a time; the rest is noted as one `Nested`."""
MAX_LEAVES = 65536
"""Leaves a `Nested` digests; past it, the count of the rest stands for them."""


class Nested:
    """What lies past MAX_DEPTH or MAX_ITEMS in an argument: noted as one digest of every leaf in it, so that codes
    hidden five tuples deep or past the 256th item still set the two calls apart (a tensor in it by its bytes, in
    flow or not)."""

    def __init__(self, value) -> None:
        self.value = value

    def note(self) -> list:
        digest, count = hashlib.sha256(), 0
        stack = [self.value]
        while stack:
            v = stack.pop()
            if isinstance(v, (list, tuple)):
                stack.extend(reversed(v))
                digest.update(b"(" if isinstance(v, tuple) else b"[")
                continue
            if isinstance(v, dict):
                stack.extend(reversed([x for kv in v.items() for x in kv]))
                digest.update(b"{")
                continue
            count += 1
            if count > MAX_LEAVES:
                digest.update(str(len(stack)).encode())
                break
            note = fingerprint(v) if isinstance(v, torch.Tensor) else scalar(v)
            digest.update(repr(note if note is not None else type(v).__name__).encode())
        return ["s", digest.hexdigest()]


def _walk(value, path: str, depth: int = 0):
    """(path, leaf) for each tensor and plain value in nested lists, tuples and dicts; past MAX_DEPTH levels or
    MAX_ITEMS items, the rest as one `Nested` leaf."""
    if isinstance(value, (list, tuple, dict)):
        if depth >= MAX_DEPTH:
            yield path, Nested(value)
            return
        items = list(value.items()) if isinstance(value, dict) else list(enumerate(value))
        for k, v in items[:MAX_ITEMS]:
            label = (f"{path}.{k}" if isinstance(value, dict) else f"{path}[{k}]") if path else \
                (str(k) if isinstance(value, dict) else f"#{k}")
            yield from _walk(v, label, depth + 1)
        if len(items) > MAX_ITEMS:
            yield (f"{path}.rest" if path else "rest"), Nested([v for _, v in items[MAX_ITEMS:]])
    else:
        yield path, value
