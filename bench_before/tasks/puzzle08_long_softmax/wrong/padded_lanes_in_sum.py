"""Wrong for puzzle 8: the online softmax with the lanes past T read as 0.

Public solutions have this bug (2026-11: the Triton-Puzzles-Lite answer key, SiriusNEO/Triton-Puzzles-Lite
puzzles_ans.py at 26e03eb, and the solutions of gxinlong, ybw9000, HydraQYH and FL33TW00D, 5 of 10 authors):
they load without `other`, and a masked-off lane
then reads as 0 on the interpreter (on a GPU its value is left to Triton; this file writes `other=0.0`, so that
its verdict is the same on every device). Every lane of the last block past T adds exp(0 - max) to the row's
sum, and each value comes out a little small: about 7% at T = 200 with B1 = 32 (24 padded lanes), where the
values are about 1/200, so an absolute tolerance of 1e-3 let it through. The maximum is untouched (the logits are
>= 0), so only the sum is wrong, and only where T is not a multiple of B1.
"""

import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, z_ptr, N0, N1, T, B0: tl.constexpr, B1: tl.constexpr):
    rows = tl.program_id(0) * B0 + tl.arange(0, B0)
    live = rows < N0
    m = tl.full([B0], float("-inf"), dtype=tl.float32)
    total = tl.zeros([B0], dtype=tl.float32)
    for start in range(0, T, B1):
        cols = start + tl.arange(0, B1)
        keep = live[:, None] & (cols[None, :] < T)
        x = tl.load(x_ptr + rows[:, None] * T + cols[None, :], mask=keep, other=0.0)  # the bug: not -inf
        m_new = tl.maximum(m, tl.max(x, axis=1))
        total = total * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new[:, None]), axis=1)
        m = m_new
    for start in range(0, T, B1):
        cols = start + tl.arange(0, B1)
        keep = live[:, None] & (cols[None, :] < T)
        at = rows[:, None] * T + cols[None, :]
        x = tl.load(x_ptr + at, mask=keep, other=0.0)
        tl.store(z_ptr + at, tl.exp(x - m[:, None]) / total[:, None], mask=keep)
