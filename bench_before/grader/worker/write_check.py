"""The write check (worker side): whether what a call returns is what its kernels wrote.

The op audit (grader/worker/op_audit.py) sees the torch operations a submission runs, and the static policy keeps numpy,
ctypes and torch's internals out of reach; both are about the route. This check is about the data, whatever the
route: it watches every buffer the wrapper allocated (the guarded allocations of grader/worker/main.py Instruments)
at each kernel launch that receives it, and at the end of the call:

* **before the first launch** that receives a buffer, it must hold what an allocation or a fill leaves: the
  poison of `torch.empty` (untouched), one value everywhere (`torch.zeros`, `torch.full`, `.zero_()`, `.fill_(c)`:
  a kernel may accumulate into it), or an exact copy of one of the call's inputs (a kernel that works in place);
* **between two launches**, it must hold what the last launch left, or one value everywhere (zeroed again);
* **when the call returns**, it must hold what the last launch that received it left.

Anything else is a write outside every kernel: values placed with torch, numpy, Python or a pointer before the
launch, or changed after it. The worker records each such event (which buffer, when, how many elements, the
kernel and the submission's line of the launch); the judge fails an output that a kernel must write
(grader/judge) when its buffer has one. Scratch buffers are recorded as well, but only outputs are judged:
a wrapper may prepare a scratch buffer with the torch work its task allows (the op audit counts that work).

The snapshots cost one copy of each watched buffer per launch, on the buffer's own device.
"""

from __future__ import annotations

import torch

from grader.protocol import guards
from grader.worker.address_check import submission_line

WHEN = ("before", "between", "after")
"""When a write outside the kernels was seen: before the buffer's first launch, between two, after the last."""


def _identity(view: torch.Tensor) -> bool:
    """Whether a one-element buffer holds a value a reduction starts from: 0, 1, or (floats) +-inf. Not an integer
    dtype's extremes: 127 is also the one code of a one-element INT8 quantization."""
    if view.numel() == 0 or view.dtype == torch.bool:
        return True
    v = view.reshape(-1)[0].item()
    return v in ((0.0, 1.0, float("inf"), float("-inf")) if view.is_floating_point() else (0, 1))


def _state_ok(view: torch.Tensor, inputs: list[torch.Tensor], initial: torch.Tensor | None = None) -> bool:
    """What an allocation or a fill leaves: all poison, one value everywhere, or an exact copy of an input. A
    buffer of one element is always "one value everywhere": it passes only with what it was allocated with or a
    reduction's starting value (else a value computed in Python could be placed there)."""
    bits = guards.bits_view(view)
    if bits.numel() <= 1:
        return _identity(view) or (initial is not None and torch.equal(bits, initial))
    flat = bits.reshape(-1)
    if bool((flat == flat[0]).all()):
        return True  # poison everywhere (untouched), or one constant
    for x in inputs:
        xb = guards.bits_view(x.detach())
        if xb.dtype == bits.dtype and xb.numel() == bits.numel() and xb.device == bits.device \
                and torch.equal(xb.reshape(-1), flat):
            return True
    return False


class WriteWatch:
    """Per call: the snapshot of each watched buffer after the last launch that received it, and the events."""

    def __init__(self, path: str) -> None:
        self.path = path
        """The submission's file: the line of a launch is the innermost frame in it."""
        self.allocs: list = []
        self.inputs: list[torch.Tensor] = []
        self.after: dict[int, tuple[torch.Tensor, str, int | None]] = {}
        self.initial: dict[int, torch.Tensor] = {}
        """One-element buffers: their bits as allocated (the poison of `empty`, the value of `full`)."""
        self.events: list[dict] = []

    def start(self, allocs: list, inputs: list[torch.Tensor]) -> None:
        """A new call: `allocs` is the Instruments' list of (buffer, view, offset), which grows during the call."""
        self.allocs, self.inputs, self.after, self.initial, self.events = allocs, inputs, {}, {}, []

    def allocated(self, j: int) -> None:
        """Buffer `j` was just allocated (and filled, for `zeros`, `full`...)."""
        view = self.allocs[j][1]
        if view.numel() <= 1:
            self.initial[j] = guards.bits_view(view).clone()

    def _line(self) -> int | None:
        return submission_line(self.path, 3)

    def _owner(self, t: torch.Tensor) -> int | None:
        ptr = t.data_ptr()
        for j, (buf, _, _) in enumerate(self.allocs):
            base = buf.data_ptr()
            if buf.device == t.device and base <= ptr < base + buf.numel() * buf.element_size():
                return j
        return None

    def _event(self, j: int, when: str, n: int, kernel: str, line: int | None) -> None:
        self.events.append({"alloc": j, "when": when, "elements": int(n), "kernel": kernel, "line": line})

    def before(self, tensors: list, kernel: str) -> tuple[list[int], int | None]:
        """At a launch of `kernel` with these tensor arguments: check each watched buffer among them; returns
        them and the submission's line of the launch, for `launched`."""
        owners = list(dict.fromkeys(j for j in (self._owner(t) for t in tensors) if j is not None))
        if not owners:
            return owners, None
        line = self._line()
        for j in owners:
            buf, view, _ = self.allocs[j]
            bits = guards.bits_view(view)
            if j in self.after:
                snap = self.after[j][0]
                if not torch.equal(bits, snap) and not _state_ok(view, []):
                    self._event(j, "between", int((bits != snap).sum()), kernel, line)
            elif not _state_ok(view, self.inputs, self.initial.get(j)):
                self._event(j, "before", int((bits != guards.poison_bits(buf.dtype)).sum()), kernel, line)
        return owners, line

    def launched(self, owners: list[int], kernel: str, line: int | None) -> None:
        """After the launch: what it left in each buffer it received is what the buffer must hold next."""
        for j in owners:
            self.after[j] = (guards.bits_view(self.allocs[j][1]).clone(), kernel, line)

    def returned(self, j: int) -> None:
        """At the end of the call, for a buffer the call returns: what its last launch left, unchanged."""
        if j not in self.after:
            return  # never passed to a kernel: the judge says so already
        snap, kernel, line = self.after[j]
        bits = guards.bits_view(self.allocs[j][1])
        if not torch.equal(bits, snap):
            self._event(j, "after", int((bits != snap).sum()), kernel, line)
