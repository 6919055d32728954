"""Wrong for puzzle 9: the attention sums exp(score) and exp(score) * v over the keys with no maximum taken out.

On the notebook's inputs (scores q * k in [0, 1)) that is right to rounding. A score past 88.7 makes exp
overflow float32 to inf, and the row becomes inf / inf = NaN; the large_scores case shows it. FlashAttention
keeps a running maximum m and rescales its sums by exp(m_old - m_new) whenever m grows.
"""

import triton
import triton.language as tl

KEYS = tl.constexpr(64)  # keys per step


@triton.jit
def flashatt_kernel(q_ptr, k_ptr, v_ptr, z_ptr, N0, T, B0: tl.constexpr):
    rows = tl.program_id(0) * B0 + tl.arange(0, B0)
    q = tl.load(q_ptr + rows, mask=rows < N0, other=0.0)
    den = tl.zeros([B0], dtype=tl.float32)
    num = tl.zeros([B0], dtype=tl.float32)
    for start in range(0, T, KEYS):
        cols = start + tl.arange(0, KEYS)
        inside = cols < T
        k = tl.load(k_ptr + cols, mask=inside, other=0.0)
        v = tl.load(v_ptr + cols, mask=inside, other=0.0)
        w = tl.where(inside[None, :], tl.exp(q[:, None] * k[None, :]), 0.0)  # the bug: no maximum subtracted
        den += tl.sum(w, axis=1)
        num += tl.sum(w * v[None, :], axis=1)
    tl.store(z_ptr + rows, num / den, mask=rows < N0)
