"""Guard bands: every buffer a kernel can touch sits inside a larger one filled with poison.

The worker builds guarded buffers (`guarded_copy`, `guarded_like`); the judge checks them (`region_mask`,
`poison_bits`). Both sides use this module; it imports no submission code.

Poison is NaN with a distinctive payload for floats (a NaN computed by a kernel has another bit pattern, so a
stray write of NaN is still seen) and the most negative value for integers (-128 for int8: symmetric INT8 codes
never take it, so an unwritten code is seen too).
"""

from __future__ import annotations

import hashlib

import torch

# Bit patterns, read through an integer view of the same width.
_FLOAT_POISON_BITS = {
    torch.float16: 0x7E5A,  # quiet NaN, payload 0x25A
    torch.bfloat16: 0x7FDA,
    torch.float32: 0x7FC0_DEAD,
    torch.float64: 0x7FF8_0000_DEAD_BEEF,
}
# Around inputs, floats get another NaN payload: on the CPU, arithmetic on a NaN keeps its payload, so a kernel that
# reads past an input and writes past an output (x + 10 over a whole block, say) would otherwise write the very
# poison the output's guard band holds, and the write would go unseen (on CUDA the NaN is canonical and it is seen).
_INPUT_FLOAT_POISON_BITS = {
    torch.float16: 0x7E5B,
    torch.bfloat16: 0x7FDB,
    torch.float32: 0x7FC0_BEEF,
    torch.float64: 0x7FF8_0000_BEEF_DEAD,
}
_INT_VIEW = {
    torch.float16: torch.int16,
    torch.bfloat16: torch.int16,
    torch.float32: torch.int32,
    torch.float64: torch.int64,
}

MIN_GUARD = 16384
"""Elements of poison on each side at least: a 2-D tile that overshoots a small tensor by whole rows of a
128-wide block lands here rather than in unrelated memory."""
MAX_GUARD = 1 << 20
"""Elements on each side at most (4 MiB of fp32): a 128-row tile overshooting a 4096-wide matrix stays inside."""


def bits_view(t: torch.Tensor) -> torch.Tensor:
    """The tensor's elements as integers of the same width (identity for integer tensors)."""
    return t.view(_INT_VIEW[t.dtype]) if t.dtype in _INT_VIEW else t


def dtype_name(dtype: torch.dtype) -> str:
    """A dtype as a guard record names it: `float16`, `int8`, ..."""
    return str(dtype).replace("torch.", "")


def poison_bits(dtype: torch.dtype, input: bool = False) -> int:
    """The poison value, as the integer that `bits_view` shows (`input`: the poison around inputs)."""
    if dtype in _FLOAT_POISON_BITS:
        bits = (_INPUT_FLOAT_POISON_BITS if input else _FLOAT_POISON_BITS)[dtype]
        width = torch.finfo(dtype).bits
        return bits - (1 << width) if bits >= 1 << (width - 1) else bits  # as a signed integer
    if dtype == torch.bool:
        return 1
    return torch.iinfo(dtype).min


def fill_poison(buf: torch.Tensor, input: bool = False) -> torch.Tensor:
    bits_view(buf).fill_(poison_bits(buf.dtype, input))
    return buf


def span(size: tuple[int, ...], stride: tuple[int, ...]) -> int:
    """Elements from the first to the last one a strided view can address (1 + max offset)."""
    if any(s == 0 for s in size):
        return 0
    return 1 + sum((n - 1) * abs(st) for n, st in zip(size, stride))


def guard_size(n_span: int) -> int:
    return max(MIN_GUARD, min(MAX_GUARD, n_span))


def _guarded(size, stride, dtype, device, empty, input: bool = False) -> tuple[torch.Tensor, torch.Tensor, int]:
    n_span = span(size, stride)
    guard = guard_size(n_span)
    buf = empty(n_span + 2 * guard, dtype=dtype, device=device)
    fill_poison(buf, input)
    view = buf.as_strided(size, stride, guard)
    return buf, view, guard


def guarded_copy(t: torch.Tensor, device: str | torch.device, empty=torch.empty):
    """A copy of `t` on `device` with the same strides, inside a poisoned buffer. Returns (buffer, view, offset).

    Storage between the elements of a strided view (the gaps of a slice) holds poison too, so a kernel that
    assumes a contiguous layout reads poison.
    """
    size, stride = tuple(t.shape), t.stride()
    if any(s < 0 for s in stride):
        raise ValueError("negative strides are not supported")
    buf, view, offset = _guarded(size, stride, t.dtype, device, empty, input=True)
    view.copy_(t.to(device))
    return buf, view, offset


def guarded_empty(size: tuple[int, ...], dtype: torch.dtype, device, empty=torch.empty):
    """A dense row-major view of `size`, full of poison, inside a poisoned buffer. Returns (buffer, view, offset)."""
    stride = torch.empty(size, dtype=torch.int8, device="meta").stride()
    return _guarded(size, stride, dtype, device, empty)


def guarded_like(template: torch.Tensor, empty=torch.empty):
    """A poisoned buffer with a view of `template`'s size, strides, dtype and device. Returns (buffer, view, offset)."""
    size, stride = tuple(template.shape), template.stride()
    if span(size, stride) < template.numel() or any(s < 0 for s in stride):
        stride = torch.empty(size, dtype=torch.int8, device="meta").stride()  # overlapping or odd: make it dense
    return _guarded(size, stride, template.dtype, template.device, empty)


def region_mask(n: int, size, stride, offset: int, device: str | torch.device = "cpu") -> torch.Tensor:
    """Boolean mask over a flat buffer of n elements: True where the view (size, stride, offset) has an element."""
    mask = torch.zeros(n, dtype=torch.bool, device=device)
    if span(size, stride) == 0:
        return mask
    if tuple(stride) == torch.empty(tuple(size), device="meta").stride():
        mask[offset : offset + span(size, stride)] = True  # row-major and dense: one slice
        return mask
    idx = torch.arange(n, device=device).as_strided(tuple(size), tuple(stride), offset)
    mask[idx.reshape(-1)] = True
    return mask


def digest(t: torch.Tensor) -> str:
    """sha256 of a tensor's elements in row-major order, as bits (so NaN payloads count)."""
    data = bits_view(t.detach().contiguous()).to("cpu")
    data = data.reshape(-1)  # a 0-dim tensor cannot be viewed as bytes of another width
    return hashlib.sha256(data.view(torch.uint8).numpy().tobytes() if data.numel() else b"").hexdigest()


def guard_record(buf: torch.Tensor, view: torch.Tensor, offset: int, input: bool = False) -> dict:
    """What the judge needs to check a guarded buffer, and no more: the elements outside the view (guard bands and
    the gaps of a strided view) as the positions and values of those that are not the poison the buffer was filled
    with (`input`: the inputs' poison), plus a digest of the view.

    The bands are nearly always intact, and up to 2 x 2^20 elements a buffer: sent whole, they were most of what a
    worker wrote and the judge read (torch.load was the judge's largest cost at CUDA sizes). The record is lossless
    (the bands are the poison everywhere else) and the judge still checks every position and value it holds."""
    mask = region_mask(buf.numel(), view.shape, view.stride(), offset, device=buf.device)
    changed = ((bits_view(buf) != poison_bits(buf.dtype, input)) & ~mask).nonzero().flatten()
    return {"n": buf.numel(), "size": list(view.shape), "stride": list(view.stride()), "offset": offset,
            "dtype": dtype_name(buf.dtype), "changed": changed.to("cpu"),
            "values": buf[changed].to("cpu"), "sha256": digest(view)}
