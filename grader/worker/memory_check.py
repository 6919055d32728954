"""The memory check (worker side): memory changes only where a tracked writer changed it.

The provenance check (grader/worker/provenance.py) follows data through the routes it can see: kernel launches
and torch operations. A buffer that is already "in flow" (a workspace the worker saw made at import or in an earlier
call) is not noted again, so data written into it by a route nobody sees would reach a kernel unnoticed: a numpy
view of the workspace (`ws.numpy()[:] = ...`, item assignment, no torch operation runs), DLPack, the buffer
protocol, a mapped file. This check closes that, whatever the route, by the bytes:

* a **tracked writer** is a kernel launch (it may have written every buffer it received), a torch operation that
  writes an argument (its schema says so: `add_`, `copy_`, `out=`, the autotuner's `zero_`), a torch operation of
  the submission's that makes a new buffer, and a guarded allocation; after each, the ledger keeps a copy of the
  bytes of each buffer it wrote (the whole storage, so that every view of it is covered);
* at every **kernel launch**, and at every torch operation of the submission's, each buffer it receives that is not
  one of the call's inputs must hold exactly the bytes its last tracked writer left, in this call or an earlier one
  (a workspace kept between calls is held to what the last call's kernels left in it). Any other change is an
  event: which buffer (the argument's name), where it was seen (the kernel or operation, the submission's line) and
  how many bytes differ. The judge fails the case (grader/judge/case.py).

A buffer the ledger never saw made (one made by a route that is not a torch operation, such as `torch.frombuffer`)
is taken as it is at its first launch, and from then on held to what its kernels leave; before that first launch,
it is not in flow, so the provenance check notes it by its bytes in the graded call and in the twin, and input
data in it shows there. The call's inputs are left out: the judge checks that they come back unchanged.

Cost: one copy of each buffer a launch or a writing operation touches, and one comparison at each launch and
operation that reads it, on the buffer's own device; a buffer's copy is let go when its storage is.
"""

from __future__ import annotations

import weakref

import torch

MAX_EVENTS = 16
"""Events kept per call; a change is reported once (the ledger then holds the new bytes)."""


def _bytes(storage) -> torch.Tensor:
    """The storage's bytes as a flat uint8 tensor (no copy)."""
    return torch.empty(0, dtype=torch.uint8, device=storage.device).set_(storage)


def _storage(t: torch.Tensor):
    if not isinstance(t, torch.Tensor) or t.device.type == "meta" or t.layout != torch.strided:
        return None
    try:
        return t.untyped_storage()
    except (RuntimeError, NotImplementedError):
        return None


class Ledger:
    """The bytes each buffer held after its last tracked writer, and one call's events."""

    def __init__(self) -> None:
        self.saved: dict[int, tuple[weakref.ref, torch.Tensor]] = {}
        """Storage address -> (the storage, a copy of its bytes)."""
        self.inputs: set[int] = set()
        """The storage addresses of the running call's inputs (left out)."""
        self.events: list[dict] = []

    # ------------------------------------------------------------------------------------------- a call

    def start(self, input_storages: set[int]) -> None:
        """A call begins: its inputs are left out, and its events start empty."""
        self.inputs, self.events = set(input_storages), []

    def take(self) -> list[dict]:
        """The call's events; its inputs are no longer left out (they die with the call)."""
        events, self.events, self.inputs = self.events, [], set()
        return events

    # ------------------------------------------------------------------------------------------- tracked writes

    def wrote(self, tensors, new_only: bool = False) -> None:
        """A tracked writer wrote these tensors (`new_only`: made them; a view of a buffer already kept is left as
        kept, since a view writes nothing)."""
        seen: set[int] = set()
        for t in tensors:
            storage = _storage(t)
            if storage is None:
                continue
            ptr = storage.data_ptr()
            if ptr in seen or ptr in self.inputs or storage.nbytes() == 0:
                continue
            seen.add(ptr)
            if new_only and self._kept(storage) is not None:
                continue
            self._save(storage)

    def _kept(self, storage) -> torch.Tensor | None:
        entry = self.saved.get(storage.data_ptr())
        return entry[1] if entry is not None and entry[0]() is storage else None

    def _save(self, storage) -> None:
        ptr = storage.data_ptr()
        entry = self.saved.get(ptr)
        if entry is None or entry[0]() is not storage:
            ref = weakref.ref(storage, lambda r, ptr=ptr: self._drop(ptr, r))
        else:
            ref = entry[0]
        self.saved[ptr] = (ref, _bytes(storage).clone())

    def _drop(self, ptr: int, ref: weakref.ref) -> None:
        entry = self.saved.get(ptr)
        if entry is not None and entry[0] is ref:
            del self.saved[ptr]

    # ------------------------------------------------------------------------------------------- checks

    def check(self, labelled: list[tuple[int | str, torch.Tensor]], at: str, name: str, line,
              names=lambda: []) -> None:
        """At a launch (`at` "launch") or a torch operation ("op") named `name`: each kept buffer among the
        arguments (label, tensor) must hold what its last tracked writer left. A label is a keyword, or a position
        that `names()` (the kernel's parameter names) turns into one; `line` is the submission's line, or a
        function that finds it. Both are only looked up for an event."""
        seen: set[int] = set()
        for label, t in labelled:
            storage = _storage(t)
            if storage is None:
                continue
            ptr = storage.data_ptr()
            if ptr in seen or ptr in self.inputs:
                continue
            seen.add(ptr)
            kept = self._kept(storage)
            if kept is None:
                continue
            now = _bytes(storage)
            if now.shape == kept.shape and torch.equal(now, kept):
                continue
            differ = int((now != kept).sum()) if now.shape == kept.shape else int(max(now.numel(), kept.numel()))
            if len(self.events) < MAX_EVENTS:
                where = line() if callable(line) else line
                if isinstance(label, int):
                    params = names()
                    label = params[label] if label < len(params) else f"#{label}"
                self.events.append({"at": at, "name": name, "line": where if type(where) is int else None,
                                    "arg": label, "bytes": differ})
            self._save(storage)  # reported once


LEDGER: Ledger | None = None
"""The worker's ledger, when the provenance check is on (`install`)."""


def install() -> Ledger:
    global LEDGER
    LEDGER = Ledger()
    return LEDGER


def written_args(func, args: tuple, kwargs: dict) -> list:
    """The arguments a torch operation writes, by its schema (`self` of `add_`, `out=`, a list of them)."""
    found = []
    try:
        arguments = func._schema.arguments
    except AttributeError:
        return found
    positional = 0
    for a in arguments:
        value = None
        if a.kwarg_only:
            value = kwargs.get(a.name)
        elif positional < len(args):
            value = args[positional]
            positional += 1
        else:
            value = kwargs.get(a.name)
        if a.alias_info is not None and a.alias_info.is_write and value is not None:
            found.extend(value if isinstance(value, (list, tuple)) else [value])
    return [t for t in found if isinstance(t, torch.Tensor)]
