"""Known wrong: reads the nibbles of a word most significant first."""

import triton
import triton.language as tl

FPINT = tl.constexpr(8)  # 4-bit weights per int32
GROUP = tl.constexpr(8)  # weights per scale and shift
CHUNK = tl.constexpr(16)  # reduction step: two whole int32 words and two whole groups


@triton.jit
def quant_dot_kernel(scale_ptr, offset_ptr, weight_ptr, activation_ptr, z_ptr, N0, N1, MID, B0: tl.constexpr,
                     B1: tl.constexpr):
    rows = tl.program_id(0) * B0 + tl.arange(0, B0)
    cols = tl.program_id(1) * B1 + tl.arange(0, B1)
    rok = rows < N0
    packed_shifts = tl.load(offset_ptr + rows, mask=rok, other=0)
    acc = tl.zeros([B0, B1], dtype=tl.float32)
    for m0 in range(0, MID, CHUNK):
        ls = m0 + tl.arange(0, CHUNK)  # weight indices along MID
        lok = rok[:, None] & (ls[None, :] < MID)
        word = tl.load(weight_ptr + rows[:, None] * (MID // FPINT) + ls[None, :] // FPINT, mask=lok, other=0)
        w = (word >> ((FPINT - 1 - ls[None, :] % FPINT) * 4)) & 0xF  # most significant nibble first
        g = ls[None, :] // GROUP
        shift = (packed_shifts[:, None] >> (g * 4)) & 0xF
        sc = tl.load(scale_ptr + rows[:, None] * (MID // GROUP) + g, mask=lok, other=0.0)
        deq = sc * (w - shift).to(tl.float32)
        act = tl.load(activation_ptr + ls[:, None] * N1 + cols[None, :],
                      mask=(ls[:, None] < MID) & (cols[None, :] < N1), other=0.0)
        acc += tl.dot(deq, act)
    tl.store(z_ptr + rows[:, None] * N1 + cols[None, :], acc, mask=rok[:, None] & (cols[None, :] < N1))
