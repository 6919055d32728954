"""Puzzle 8: long softmax: a reference solution."""

import triton
import triton.language as tl

LOG2E = tl.constexpr(1.4426950408889634)


@triton.jit
def softmax_kernel(x_ptr, z_ptr, N0, N1, T, B0: tl.constexpr, B1: tl.constexpr):
    rows = tl.program_id(0) * B0 + tl.arange(0, B0)
    live = rows < N0
    # Pass 1: running maximum m and the sum of exp(x - m), rescaled whenever m grows.
    m = tl.full([B0], float("-inf"), dtype=tl.float32)
    total = tl.zeros([B0], dtype=tl.float32)
    for start in range(0, T, B1):
        cols = start + tl.arange(0, B1)
        keep = live[:, None] & (cols[None, :] < T)
        x = tl.load(x_ptr + rows[:, None] * T + cols[None, :], mask=keep, other=float("-inf"))
        m_new = tl.maximum(m, tl.max(x, axis=1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        total = total * tl.exp2((m - m_safe) * LOG2E) + tl.sum(tl.exp2((x - m_safe[:, None]) * LOG2E), axis=1)
        m = m_new
    # Pass 2: normalise.
    for start in range(0, T, B1):
        cols = start + tl.arange(0, B1)
        keep = live[:, None] & (cols[None, :] < T)
        at = rows[:, None] * T + cols[None, :]
        x = tl.load(x_ptr + at, mask=keep, other=0.0)
        tl.store(z_ptr + at, tl.exp2((x - m[:, None]) * LOG2E) / total[:, None], mask=keep)
