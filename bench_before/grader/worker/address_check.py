"""On the interpreter: is every address a kernel touches inside a buffer of its launch?

Guard bands (grader/protocol/guards.py) see a stray *write* on every device and a stray *read* whose value reaches an
output (it brings poison). A read past a tensor whose value is then thrown away (an unmasked load of the last block,
with only the store masked) leaves no trace in any output, yet on a GPU it reads memory that is not the tensor's, and
can fault where that memory is not mapped. The interpreter executes each `tl.load`, `tl.store` and atomic as NumPy on
the real addresses, so here every address is checked against the tensors the launch was given: a lane that is masked off
is not an access; any other lane must fall inside one of those tensors' extents (first element to last, so the gaps of a
strided view count as inside).

Each out-of-bounds access is recorded with the kernel, the operation, the submission's line, the nearest tensor
argument, the side (before its first element or past its last) and the element offsets relative to that tensor;
the judge fails the case with it. Lanes that fall outside every storage the launch can reach (not even in a guard
band) are masked off before NumPy dereferences them, so a wild pointer is reported instead of crashing the
worker; lanes inside guard bands go ahead, so the values (poison) are what a GPU would read.

Installed by the worker on the CPU only (config `grading.bounds`); a CUDA kernel's addresses are not visible.
"""

from __future__ import annotations

import sys

import numpy as np

MAX_FINDINGS = 8
"""Distinct findings (kernel, operation, line, tensor, side) kept per case; further ones only add to a count."""
SHOW = 6
"""Element offsets named per finding (the lowest and highest are always given)."""
MAX_DISTINCT = 1 << 16
"""Distinct elements counted per finding; past it, the count is a lower bound."""


class _Region:
    __slots__ = ("name", "lo", "hi", "store_lo", "store_hi", "itemsize", "numel", "dtype")

    def __init__(self, name: str, t) -> None:
        from grader.protocol.guards import dtype_name, span

        self.name, self.itemsize, self.dtype = name, t.element_size(), dtype_name(t.dtype)
        lowest = sum((n - 1) * st for n, st in zip(t.shape, t.stride()) if st < 0 and n > 0)
        extent = span(tuple(t.shape), tuple(abs(s) for s in t.stride()))
        self.lo = t.data_ptr() + lowest * self.itemsize
        self.hi = self.lo + extent * self.itemsize
        self.numel = extent
        storage = t.untyped_storage()
        self.store_lo, self.store_hi = storage.data_ptr(), storage.data_ptr() + storage.nbytes()


def _tensors(name: str, value):
    """(name, tensor) for a launch argument: a tensor, a tensor descriptor's base, or the tensors in a tuple."""
    if hasattr(value, "data_ptr") and hasattr(value, "untyped_storage"):
        yield name, value
    elif isinstance(value, tuple):
        for i, item in enumerate(value):
            yield from _tensors(f"{name}[{i}]", item)
    elif hasattr(value, "base") and hasattr(value, "block_shape"):  # TensorDescriptor
        yield from _tensors(name, value.base)


def _within(addrs: np.ndarray, itemsize: int, spans: list[tuple[int, int]]) -> np.ndarray:
    """Which addresses start an item that lies wholly inside one of the byte spans [lo, hi)."""
    inside = np.zeros(addrs.shape, dtype=bool)
    for lo, hi in spans:
        inside |= (addrs >= np.uint64(lo)) & (addrs + np.uint64(itemsize) <= np.uint64(hi))
    return inside


def submission_line(path: str, depth: int = 2) -> int | None:
    """The line of the innermost frame in the submission's file `path`, from `depth` frames up (the caller's
    caller: 2), or None when no frame is in it."""
    frame = sys._getframe(depth)
    while frame is not None:
        if frame.f_code.co_filename == path:
            return frame.f_lineno
        frame = frame.f_back
    return None


class BoundsAudit:
    """One per worker. `install()` patches the interpreter; `take()` returns (and clears) what was found since."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.regions: list[_Region] = []
        self.kernel = ""
        self.findings: dict[tuple, dict] = {}
        """Per (kernel, op, line, tensor, side): the finding, and while it is open `distinct`, the set of element
        offsets it touched (the count and the offsets shown are made from it in `take`)."""
        self.more = 0
        self._patched: list[tuple[object, str, object]] = []
        """(class, attribute, our function) for each patch `install` made: `intact` checks they are still there."""

    # --- the launch: which tensors it may touch -------------------------------------------------------------
    def begin(self, executor, args_hst, kwargs_hst) -> None:
        names = list(getattr(executor, "arg_names", None) or [])
        pairs = [(names[i] if i < len(names) else f"argument {i}", a) for i, a in enumerate(args_hst)]
        pairs += list(kwargs_hst.items())
        self.regions = [_Region(n, t) for name, value in pairs for n, t in _tensors(name, value)
                        if t.device.type == "cpu" and t.numel() > 0]
        self.kernel = getattr(getattr(executor, "fn", None), "__name__", "kernel")

    # --- each memory operation ------------------------------------------------------------------------------
    def _line(self) -> int | None:
        return submission_line(self.path, 3)

    def check(self, op: str, ptrs, mask) -> np.ndarray | None:
        """Record the lanes of `ptrs` (a TensorHandle of addresses) that are on (`mask`, or all) and outside every
        tensor of the launch. Returns a mask with wild lanes (outside every storage) turned off, or None if
        nothing needs to change."""
        addrs = np.asarray(ptrs.data)
        if addrs.dtype.kind not in "ui" or addrs.size == 0:
            return None
        on = np.ones(addrs.shape, dtype=bool) if mask is None else np.broadcast_to(np.asarray(mask.data, bool),
                                                                                  addrs.shape)
        try:
            itemsize = max(1, ptrs.get_element_ty().primitive_bitwidth // 8)
        except Exception:  # noqa: BLE001 - an odd pointer type: check the first byte only
            itemsize = 1
        a = addrs.astype(np.uint64, copy=False)
        spans = [(r.lo, r.hi) for r in self.regions]
        # Nearly always every lane of an access lies in one tensor: its lowest and highest address then say so in two
        # reductions, where the lane-by-lane test below costs a few passes per tensor of the launch (it was the
        # largest single cost of the address check's re-run, scripts/profile_address_check.py).
        active = a if on.all() else a[on]
        if active.size == 0:
            return None
        low, high = int(active.min()), int(active.max()) + itemsize
        if any(lo <= low and high <= hi for lo, hi in spans):
            return None
        stray = on & ~_within(a, itemsize, spans)
        if not stray.any():
            return None
        wild = stray & ~_within(a, itemsize, [(r.store_lo, r.store_hi) for r in self.regions])
        self._record(op, a[stray & ~wild], int(wild.sum()), itemsize)
        return (on & ~wild) if wild.any() else None

    def _finding(self, key: tuple, fields: dict, lanes: int) -> dict | None:
        """The finding of `key`, opened with `fields` if new; None (and `lanes` more left out) when full."""
        if key not in self.findings:
            if len(self.findings) >= MAX_FINDINGS:
                self.more += lanes
                return None
            self.findings[key] = {"kernel": self.kernel, "op": key[1], "line": key[2], "count": 0, **fields}
        return self.findings[key]

    def _record(self, op: str, stray: np.ndarray, wild: int, itemsize: int) -> None:
        """`stray`: addresses in a storage the launch reaches (a guard band) but outside its tensors, each told
        against the tensor it is nearest to; `wild`: how many lanes were outside all of that."""
        line = self._line()
        if wild:
            entry = self._finding((self.kernel, op, line, None, "outside"), {"buffer": None, "side": "outside"}, wild)
            if entry is not None:
                entry["count"] += wild  # lanes: a wild address has no element to name
        if not stray.size:
            return
        dist = np.stack([np.where(stray < np.uint64(r.lo), np.uint64(r.lo) - stray,
                                  stray + np.uint64(itemsize) - np.uint64(r.hi)) for r in self.regions])
        owner = dist.argmin(axis=0)
        for k in np.unique(owner):
            r = self.regions[int(k)]
            offsets = (stray[owner == k].astype(np.int64) - np.int64(r.lo)) // r.itemsize
            for side, sel in (("before", offsets < 0), ("after", offsets >= 0)):
                if not sel.any():
                    continue
                mine = np.unique(offsets[sel])
                entry = self._finding((self.kernel, op, line, r.name, side),
                                      {"buffer": r.name, "side": side, "numel": r.numel, "dtype": r.dtype,
                                       "distinct": set(), "highest": int(mine[-1])}, int(sel.sum()))
                if entry is None:
                    continue
                if len(entry["distinct"]) < MAX_DISTINCT:  # each element once, however many lanes touched it
                    entry["distinct"].update(int(o) for o in mine)
                entry["highest"] = max(entry["highest"], int(mine[-1]))

    def take(self) -> list[dict]:
        """The findings since the last call, in the order first seen; the count of those left out is in the last
        one's `more`. A finding names its count of distinct elements and its lowest SHOW offsets and highest."""
        found = []
        for entry in self.findings.values():
            entry = dict(entry)
            distinct = entry.pop("distinct", None)
            highest = entry.pop("highest", None)
            if distinct is not None:
                low = sorted(distinct)[:SHOW]
                entry["count"] = len(distinct)
                entry["offsets"] = low + ([highest] if highest not in low else [])
            found.append(entry)
        if found and self.more:
            found[-1]["more"] = self.more
        self.findings, self.more = {}, 0
        return found

    # --- the patches ----------------------------------------------------------------------------------------
    def install(self) -> None:
        """Patch the interpreter (triton 3.6 and 3.9: every load, store and atomic goes through these four
        methods of its builder, and every launch copies its arguments through `_init_args_hst`)."""
        from triton.runtime import interpreter

        audit = self
        builder = type(interpreter.interpreter_builder)
        executor = interpreter.GridExecutor
        init_args = executor._init_args_hst

        def _init_args_hst(self, args_dev, kwargs):
            args_hst, kwargs_hst = init_args(self, args_dev, kwargs)
            audit.begin(self, args_hst, kwargs_hst)
            return args_hst, kwargs_hst

        executor._init_args_hst = _init_args_hst
        self._patched.append((executor, "_init_args_hst", _init_args_hst))

        def guarded(name: str, op: str, ptr_at: int, mask_at: int | None):
            orig = getattr(builder, name)
            handle_type = interpreter.TensorHandle

            def method(self, *args, **kwargs):
                # The rest goes through by keyword too: a tensor descriptor's load calls
                # create_masked_load(ptrs, mask, other, cache_policy=..., is_volatile=...).
                mask = args[mask_at] if mask_at is not None else None
                narrowed = audit.check(op, args[ptr_at], mask)
                if narrowed is not None:
                    if mask_at is None:  # atomic_cas has no mask: a wild lane cannot be turned off
                        raise MemoryError(f"{op}: an address outside every tensor of the launch")
                    args = list(args)
                    # triton 3.9 hands a descriptor's mask over as a TensorHandle, triton 3.6 as a bare NumPy array
                    # (whose `.data` the load reads): the narrowed mask goes back in the form it came in
                    args[mask_at] = handle_type(narrowed, mask.dtype) if isinstance(mask, handle_type) else narrowed
                return orig(self, *args, **kwargs)

            setattr(builder, name, method)
            audit._patched.append((builder, name, method))

        guarded("create_masked_load", "tl.load", 0, 1)
        guarded("create_masked_store", "tl.store", 0, 2)
        guarded("create_atomic_rmw", "atomic", 1, 3)
        guarded("create_atomic_cas", "atomic_cas", 0, None)


def intact(audit: BoundsAudit) -> bool:
    """Are the audit's patches still in place? A submission runs in the same process and could put the
    interpreter's own methods back (the static policy refuses `triton.runtime`; this is the next layer)."""
    return all(getattr(owner, name, None) is fn for owner, name, fn in audit._patched)

