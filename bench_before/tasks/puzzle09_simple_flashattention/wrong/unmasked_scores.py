"""Known wrong: keys past T (loaded as 0) still get a score, so they count in the softmax where T is not a multiple of the chunk."""

import triton
import triton.language as tl

LOG2E = tl.constexpr(1.4426950408889634)
CHUNK = tl.constexpr(32)  # keys per step (the original edition leaves this block size to the kernel)


@triton.jit
def flashatt_kernel(q_ptr, k_ptr, v_ptr, z_ptr, N0, T, B0: tl.constexpr):
    rows = tl.program_id(0) * B0 + tl.arange(0, B0)
    q = tl.load(q_ptr + rows, mask=rows < N0, other=0.0)
    m = tl.full([B0], float("-inf"), dtype=tl.float32)
    den = tl.zeros([B0], dtype=tl.float32)
    num = tl.zeros([B0], dtype=tl.float32)
    for start in range(0, T, CHUNK):
        cols = start + tl.arange(0, CHUNK)
        inside = cols < T
        k = tl.load(k_ptr + cols, mask=inside, other=0.0)
        v = tl.load(v_ptr + cols, mask=inside, other=0.0)
        s = q[:, None] * k[None, :]  # no mask: keys past T score 0 and count in the softmax
        m_new = tl.maximum(m, tl.max(s, axis=1))
        fade = tl.exp2((m - m_new) * LOG2E)
        p = tl.exp2((s - m_new[:, None]) * LOG2E)
        den = den * fade + tl.sum(p, axis=1)
        num = num * fade + tl.sum(p * v[None, :], axis=1)
        m = m_new
    tl.store(z_ptr + rows, num / den, mask=rows < N0)
