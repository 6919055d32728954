"""Wrong for puzzle 8: the textbook softmax exp(x) / sum(exp(x)), with no row maximum taken out first.

On the notebook's inputs (logits in [0, 1)) it is right to rounding. Once a logit passes 88.7, exp overflows
float32 to inf, and the row becomes inf / inf = NaN: the large_logits case shows it.
"""

import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, z_ptr, N0, N1, T, B0: tl.constexpr, B1: tl.constexpr):
    rows = tl.program_id(0) * B0 + tl.arange(0, B0)
    live = rows < N0
    total = tl.zeros([B0], dtype=tl.float32)
    for start in range(0, T, B1):  # first pass: the row sums of exp(x)
        cols = start + tl.arange(0, B1)
        keep = live[:, None] & (cols[None, :] < T)
        x = tl.load(x_ptr + rows[:, None] * T + cols[None, :], mask=keep, other=float("-inf"))
        total += tl.sum(tl.exp(x), axis=1)
    for start in range(0, T, B1):  # second pass: divide
        cols = start + tl.arange(0, B1)
        keep = live[:, None] & (cols[None, :] < T)
        at = rows[:, None] * T + cols[None, :]
        x = tl.load(x_ptr + at, mask=keep, other=0.0)
        tl.store(z_ptr + at, tl.exp(x) / total[:, None], mask=keep)
