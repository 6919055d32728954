"""Known wrong: reduces over the first B_MID of the middle dimension only."""

import triton
import triton.language as tl


@triton.jit
def dot_kernel(x_ptr, y_ptr, z_ptr, N0, N1, N2, MID, B0: tl.constexpr, B1: tl.constexpr, B2: tl.constexpr,
               B_MID: tl.constexpr):
    # Lite edition's signature: the harness chooses B_MID.
    rows = tl.program_id(0) * B0 + tl.arange(0, B0)
    cols = tl.program_id(1) * B1 + tl.arange(0, B1)
    batch = tl.program_id(2) * B2 + tl.arange(0, B2)
    acc = tl.zeros([B2, B0, B1], dtype=tl.float32)
    for m0 in range(0, B_MID, B_MID):  # only the first B_MID of the middle dimension
        mids = m0 + tl.arange(0, B_MID)
        xa = batch[:, None, None] * N0 * MID + rows[None, :, None] * MID + mids[None, None, :]
        xm = (batch[:, None, None] < N2) & (rows[None, :, None] < N0) & (mids[None, None, :] < MID)
        ya = batch[:, None, None] * MID * N1 + mids[None, :, None] * N1 + cols[None, None, :]
        ym = (batch[:, None, None] < N2) & (mids[None, :, None] < MID) & (cols[None, None, :] < N1)
        acc += tl.dot(tl.load(x_ptr + xa, mask=xm, other=0.0), tl.load(y_ptr + ya, mask=ym, other=0.0))
    za = batch[:, None, None] * N0 * N1 + rows[None, :, None] * N1 + cols[None, None, :]
    zm = (batch[:, None, None] < N2) & (rows[None, :, None] < N0) & (cols[None, None, :] < N1)
    tl.store(z_ptr + za, acc, mask=zm)
