"""The constructs students write in Triton kernels, one tiny kernel each, run compiled on a GPU and interpreted on
the CPU on the same inputs (conformance/run.py records and compares them).

Each construct is a function of a `Tools` (its device and a generator seeded by the construct's name) that makes
its inputs, launches its kernel and returns the output tensors. Inputs are drawn on the CPU and then moved, so both
devices see the same bytes. Nothing here is graded: the suite is staff code that tells whether the interpreter
(with the grader's patches, grader/worker/interpreter.py) reads a kernel as the course's compiler does.

`ulps`: a construct whose GPU code may round differently from the interpreter's NumPy in the last place (`/` of
float32, `tl.exp`, `tl.log`, `tl.sqrt`, `tl.sigmoid` and libdevice's math compile to approximate instructions)
declares how many units in the last place it may differ; `rel`: one whose rounding depends on an order of additions
each device picks (a float dot, a float16 sum) declares how far it may differ relative to its largest value. Every
other construct must agree bit for bit (NaNs: any NaN for any NaN); the interpreter's patches make it so where the
stock interpreter did not (an FMA where the compiler contracts `a * b + c`, saturating float-to-int casts, ...).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

try:  # both toolchains the course supports have it here
    from triton.language.extra import libdevice
except ImportError:  # pragma: no cover - an older layout
    libdevice = None


@dataclass
class Construct:
    name: str
    run: Callable[[Tools], list[torch.Tensor]]
    ulps: int = 0
    """How many units in the last place a float output may differ (0: bit for bit)."""
    note: str = ""
    rel: float = 0.0
    """Or: how far a float output may differ relative to its largest magnitude (max |gpu - interpreted| <= rel *
    max |gpu|), for results whose rounding depends on an order of additions each device picks (a dot, a float16
    sum): a cancelling element may differ by many ulps while the whole is as close as the order allows."""


CONSTRUCTS: dict[str, Construct] = {}


def construct(name: str, ulps: int = 0, note: str = "", rel: float = 0.0):
    def register(fn):
        if name in CONSTRUCTS:
            raise ValueError(f"two constructs named {name!r}")
        CONSTRUCTS[name] = Construct(name, fn, ulps, note, rel)
        return fn
    return register


class Tools:
    """A construct's device and inputs: drawn on the CPU from a generator seeded by the construct's name."""

    def __init__(self, device: str, name: str) -> None:
        self.device = device
        self.gen = torch.Generator().manual_seed(zlib.crc32(name.encode()))

    def rand(self, *shape: int, dtype: torch.dtype = torch.float32, lo: float = -4.0, hi: float = 4.0):
        x = torch.rand(shape, generator=self.gen, dtype=torch.float64) * (hi - lo) + lo
        return x.to(dtype).to(self.device)

    def randint(self, lo: int, hi: int, *shape: int, dtype: torch.dtype = torch.int32):
        return torch.randint(lo, hi, shape, generator=self.gen, dtype=torch.int64).to(dtype).to(self.device)

    def tensor(self, values, dtype: torch.dtype):
        return torch.tensor(values, dtype=dtype).to(self.device)

    def zeros(self, *shape: int, dtype: torch.dtype = torch.float32):
        return torch.zeros(shape, dtype=dtype, device=self.device)


# --- indexing with None and slices ------------------------------------------------------------------------------

@triton.jit
def _rank0_none_colon(s_ptr, x_ptr, out_ptr, N: tl.constexpr):
    a = tl.load(s_ptr)  # a rank-0 value (a per-tensor scale)
    r = tl.arange(0, N)
    x = tl.load(x_ptr + r[:, None] * N + r[None, :])
    tl.store(out_ptr + r[:, None] * N + r[None, :], x * a[None, :])


@construct("rank-0 value indexed [None, :]", note="a per-tensor scale broadcast like a per-channel one")
def _(t: Tools):
    s, x, out = t.rand(1), t.rand(8, 8), t.zeros(8, 8)
    _rank0_none_colon[(1,)](s, x, out, N=8)
    return [out]


@triton.jit
def _rank0_colon_none(s_ptr, x_ptr, out_ptr, N: tl.constexpr):
    a = tl.load(s_ptr)
    r = tl.arange(0, N)
    x = tl.load(x_ptr + r[:, None] * N + r[None, :])
    tl.store(out_ptr + r[:, None] * N + r[None, :], x + a[:, None])


@construct("rank-0 value indexed [:, None]")
def _(t: Tools):
    s, x, out = t.rand(1), t.rand(8, 8), t.zeros(8, 8)
    _rank0_colon_none[(1,)](s, x, out, N=8)
    return [out]


@triton.jit
def _rank0_none(s_ptr, out_ptr, N: tl.constexpr):
    a = tl.load(s_ptr)
    r = tl.arange(0, N)
    tl.store(out_ptr + r, tl.zeros([N], dtype=tl.float32) + a[None])


@construct("rank-0 value indexed [None]")
def _(t: Tools):
    s, out = t.rand(1), t.zeros(8)
    _rank0_none[(1,)](s, out, N=8)
    return [out]


@triton.jit
def _rank1_outer(x_ptr, y_ptr, out_ptr, N: tl.constexpr):
    r = tl.arange(0, N)
    x = tl.load(x_ptr + r)
    y = tl.load(y_ptr + r)
    tl.store(out_ptr + r[:, None] * N + r[None, :], x[:, None] * y[None, :])


@construct("rank-1 values indexed [:, None] and [None, :] (an outer product)")
def _(t: Tools):
    x, y, out = t.rand(16), t.rand(16), t.zeros(16, 16)
    _rank1_outer[(1,)](x, y, out, N=16)
    return [out]


@triton.jit
def _rank2_none(x_ptr, out_ptr, N: tl.constexpr):
    r = tl.arange(0, N)
    x = tl.load(x_ptr + r[:, None] * N + r[None, :])
    y = x[:, :, None] + x[None, :, :]  # [N, N, 1] + [1, N, N]
    tl.store(out_ptr + r[:, None, None] * N * N + r[None, :, None] * N + r[None, None, :], y)


@construct("rank-2 value indexed [:, :, None] and [None, :, :]")
def _(t: Tools):
    x, out = t.rand(4, 4), t.zeros(4, 4, 4)
    _rank2_none[(1,)](x, out, N=4)
    return [out]


@triton.jit
def _full_slice(x_ptr, out_ptr, N: tl.constexpr):
    r = tl.arange(0, N)
    x = tl.load(x_ptr + r)
    tl.store(out_ptr + r, x[:] * 2)


@construct("rank-1 value indexed [:]")
def _(t: Tools):
    x, out = t.rand(8), t.zeros(8)
    _full_slice[(1,)](x, out, N=8)
    return [out]


@triton.jit
def _expand_dims(x_ptr, out_ptr, N: tl.constexpr):
    r = tl.arange(0, N)
    x = tl.load(x_ptr + r)
    y = tl.expand_dims(x, 0) + tl.expand_dims(x, 1)
    tl.store(out_ptr + r[:, None] * N + r[None, :], y)


@construct("tl.expand_dims")
def _(t: Tools):
    x, out = t.rand(8), t.zeros(8, 8)
    _expand_dims[(1,)](x, out, N=8)
    return [out]


@triton.jit
def _broadcast_to(s_ptr, out_ptr, N: tl.constexpr):
    r = tl.arange(0, N)
    a = tl.load(s_ptr + r * 0)  # every lane loads the same address
    b = tl.broadcast_to(a[:, None], (N, N))
    tl.store(out_ptr + r[:, None] * N + r[None, :], b)


@construct("tl.broadcast_to and a load of one address by every lane")
def _(t: Tools):
    s, out = t.rand(1), t.zeros(8, 8)
    _broadcast_to[(1,)](s, out, N=8)
    return [out]


@triton.jit
def _reshape_trans(x_ptr, out_ptr, out2_ptr, M: tl.constexpr, N: tl.constexpr):
    r = tl.arange(0, M * N)
    x = tl.load(x_ptr + r)
    y = tl.reshape(x, (M, N))
    rm = tl.arange(0, M)
    rn = tl.arange(0, N)
    tl.store(out_ptr + rn[:, None] * M + rm[None, :], tl.trans(y))
    tl.store(out2_ptr + rn[:, None] * M + rm[None, :], y.T)


@construct("tl.reshape, tl.trans and .T")
def _(t: Tools):
    x, out, out2 = t.rand(32), t.zeros(8, 4), t.zeros(8, 4)
    _reshape_trans[(1,)](x, out, out2, M=4, N=8)
    return [out, out2]


@triton.jit
def _permute(x_ptr, out_ptr, A: tl.constexpr, B: tl.constexpr, C: tl.constexpr):
    ra, rb, rc = tl.arange(0, A), tl.arange(0, B), tl.arange(0, C)
    x = tl.load(x_ptr + ra[:, None, None] * B * C + rb[None, :, None] * C + rc[None, None, :])
    y = tl.permute(x, (2, 0, 1))  # [C, A, B]
    tl.store(out_ptr + rc[:, None, None] * A * B + ra[None, :, None] * B + rb[None, None, :], y)


@construct("tl.permute")
def _(t: Tools):
    x, out = t.rand(2, 4, 8), t.zeros(8, 2, 4)
    _permute[(1,)](x, out, A=2, B=4, C=8)
    return [out]


@triton.jit
def _join_split(x_ptr, y_ptr, out_ptr, out2_ptr, N: tl.constexpr):
    r = tl.arange(0, N)
    x = tl.load(x_ptr + r)
    y = tl.load(y_ptr + r)
    j = tl.join(x, y)  # [N, 2]
    tl.store(out_ptr + r[:, None] * 2 + tl.arange(0, 2)[None, :], j)
    a, b = tl.split(j)
    tl.store(out2_ptr + r, a - b)


@construct("tl.join and tl.split")
def _(t: Tools):
    x, y, out, out2 = t.rand(8), t.rand(8), t.zeros(8, 2), t.zeros(8)
    _join_split[(1,)](x, y, out, out2, N=8)
    return [out, out2]


@triton.jit
def _interleave(x_ptr, y_ptr, out_ptr, N: tl.constexpr):
    r = tl.arange(0, N)
    z = tl.interleave(tl.load(x_ptr + r), tl.load(y_ptr + r))
    tl.store(out_ptr + tl.arange(0, 2 * N), z)


@construct("tl.interleave")
def _(t: Tools):
    x, y = t.randint(0, 16, 8, dtype=torch.uint8), t.randint(0, 16, 8, dtype=torch.uint8)
    out = t.zeros(16, dtype=torch.uint8)
    _interleave[(1,)](x, y, out, N=8)
    return [out]


# --- scalars and broadcasting -------------------------------------------------------------------------------------

@triton.jit
def _scalar_args(x_ptr, out_ptr, out2_ptr, f, i, N: tl.constexpr):
    r = tl.arange(0, N)
    x = tl.load(x_ptr + r)
    tl.store(out_ptr + r, x * f + i)
    tl.store(out2_ptr + r, (r + i) * 3)


@construct("float and int scalar arguments broadcast over a block")
def _(t: Tools):
    x, out, out2 = t.rand(8), t.zeros(8), t.zeros(8, dtype=torch.int32)
    _scalar_args[(1,)](x, out, out2, 0.3, 7, N=8)
    return [out, out2]


@triton.jit
def _python_literals(x_ptr, out_ptr, N: tl.constexpr):
    r = tl.arange(0, N)
    x = tl.load(x_ptr + r)
    tl.store(out_ptr + r, 1.5 * x - 2 + x / 3)


@construct("Python literals mixed with a float16 block")
def _(t: Tools):
    x, out = t.rand(8, dtype=torch.float16), t.zeros(8, dtype=torch.float16)
    _python_literals[(1,)](x, out, N=8)
    return [out]


@triton.jit
def _where_scalars(x_ptr, out_ptr, out2_ptr, out3_ptr, N: tl.constexpr):
    r = tl.arange(0, N)
    x = tl.load(x_ptr + r)
    tl.store(out_ptr + r, tl.where(x > 0, x, 0.0))
    tl.store(out2_ptr + r, tl.where(x > 0, 1.0, -1.0))
    tl.store(out3_ptr + r, tl.where(x > 0, 1, 0))


@construct("tl.where with a scalar on one side and on both")
def _(t: Tools):
    x = t.rand(16)
    out, out2, out3 = t.zeros(16), t.zeros(16), t.zeros(16, dtype=torch.int32)
    _where_scalars[(1,)](x, out, out2, out3, N=16)
    return [out, out2, out3]


@triton.jit
def _where_broadcast(x_ptr, out_ptr, N: tl.constexpr):
    r = tl.arange(0, N)
    x = tl.load(x_ptr + r)
    keep = r[:, None] >= r[None, :]
    tl.store(out_ptr + r[:, None] * N + r[None, :], tl.where(keep, x[None, :], float("-inf")))


@construct("tl.where of a 2-D condition, a broadcast row and -inf")
def _(t: Tools):
    x, out = t.rand(8), t.zeros(8, 8)
    _where_broadcast[(1,)](x, out, N=8)
    return [out]


# --- integer arithmetic -------------------------------------------------------------------------------------------

@triton.jit
def _int_div_mod(a_ptr, b_ptr, q_ptr, m_ptr, N: tl.constexpr):
    r = tl.arange(0, N)
    a = tl.load(a_ptr + r)
    b = tl.load(b_ptr + r)
    tl.store(q_ptr + r, a // b)
    tl.store(m_ptr + r, a % b)


@construct("int32 // and % of negative numbers")
def _(t: Tools):
    a = t.tensor([7, -7, 7, -7, 0, -1, 13, -13, 100, -100, 5, -5, 1, -9, 9, -2], torch.int32)
    b = t.tensor([2, 2, -2, -2, 3, 4, -5, 5, 7, 7, -3, -3, 1, 4, -4, 3], torch.int32)
    q, m = t.zeros(16, dtype=torch.int32), t.zeros(16, dtype=torch.int32)
    _int_div_mod[(1,)](a, b, q, m, N=16)
    return [q, m]


@triton.jit
def _int_div_const(a_ptr, q_ptr, m_ptr, N: tl.constexpr):
    r = tl.arange(0, N)
    a = tl.load(a_ptr + r)
    tl.store(q_ptr + r, a // 4)
    tl.store(m_ptr + r, a % 4)


@construct("int32 // and % of negatives by a constant")
def _(t: Tools):
    a = t.randint(-50, 50, 16)
    q, m = t.zeros(16, dtype=torch.int32), t.zeros(16, dtype=torch.int32)
    _int_div_const[(1,)](a, q, m, N=16)
    return [q, m]


@triton.jit
def _uint_div(a_ptr, q_ptr, m_ptr, N: tl.constexpr):
    r = tl.arange(0, N)
    a = tl.load(a_ptr + r)
    tl.store(q_ptr + r, a // 3)
    tl.store(m_ptr + r, a % 3)


@construct("uint8 // and %")
def _(t: Tools):
    a = t.randint(0, 256, 16, dtype=torch.uint8)
    q, m = t.zeros(16, dtype=torch.uint8), t.zeros(16, dtype=torch.uint8)
    _uint_div[(1,)](a, q, m, N=16)
    return [q, m]


@triton.jit
def _cdiv(n_ptr, out_ptr, N: tl.constexpr, BLOCK: tl.constexpr):
    r = tl.arange(0, N)
    n = tl.load(n_ptr + r)
    tl.store(out_ptr + r, tl.cdiv(n, BLOCK))


@construct("tl.cdiv of a block by a constexpr")
def _(t: Tools):
    n, out = t.randint(0, 300, 16), t.zeros(16, dtype=torch.int32)
    _cdiv[(1,)](n, out, N=16, BLOCK=64)
    return [out]


@triton.jit
def _cdiv_scalar(out_ptr, n, BLOCK: tl.constexpr):
    tl.store(out_ptr + tl.program_id(0), tl.cdiv(n, BLOCK) + tl.program_id(0))


@construct("tl.cdiv of a scalar argument")
def _(t: Tools):
    out = t.zeros(4, dtype=torch.int32)
    _cdiv_scalar[(4,)](out, 1000, BLOCK=128)
    return [out]


@triton.jit
def _int32_wrap(a_ptr, out_ptr, N: tl.constexpr):
    r = tl.arange(0, N)
    a = tl.load(a_ptr + r)
    tl.store(out_ptr + r, a * 65537 + 2147483000)


@construct("int32 arithmetic that overflows (wraps)")
def _(t: Tools):
    a, out = t.randint(-100000, 100000, 16), t.zeros(16, dtype=torch.int32)
    _int32_wrap[(1,)](a, out, N=16)
    return [out]


@triton.jit
def _shifts(a_ptr, u_ptr, o1, o2, o3, o4, N: tl.constexpr):
    r = tl.arange(0, N)
    a = tl.load(a_ptr + r)  # int32, negatives among them
    u = tl.load(u_ptr + r)  # uint8
    tl.store(o1 + r, a >> 3)
    tl.store(o2 + r, a << 2)
    tl.store(o3 + r, u >> 4)
    tl.store(o4 + r, (u << 4) | (u >> 4))


@construct("shifts: >> of negative int32 (arithmetic), of uint8 (logical), << and | on uint8")
def _(t: Tools):
    a, u = t.randint(-1000, 1000, 16), t.randint(0, 256, 16, dtype=torch.uint8)
    o1, o2 = t.zeros(16, dtype=torch.int32), t.zeros(16, dtype=torch.int32)
    o3, o4 = t.zeros(16, dtype=torch.uint8), t.zeros(16, dtype=torch.uint8)
    _shifts[(1,)](a, u, o1, o2, o3, o4, N=16)
    return [o1, o2, o3, o4]


@triton.jit
def _bitwise(a_ptr, b_ptr, o1, o2, o3, o4, N: tl.constexpr):
    r = tl.arange(0, N)
    a = tl.load(a_ptr + r)
    b = tl.load(b_ptr + r)
    tl.store(o1 + r, a & b)
    tl.store(o2 + r, a | b)
    tl.store(o3 + r, a ^ b)
    tl.store(o4 + r, ~a)


@construct("&, |, ^ and ~ on int8")
def _(t: Tools):
    a, b = t.randint(-128, 128, 16, dtype=torch.int8), t.randint(-128, 128, 16, dtype=torch.int8)
    outs = [t.zeros(16, dtype=torch.int8) for _ in range(4)]
    _bitwise[(1,)](a, b, *outs, N=16)
    return outs


@triton.jit
def _pack_nibbles(q_ptr, out_ptr, N: tl.constexpr):
    r = tl.arange(0, N)
    lo = tl.load(q_ptr + 2 * r)
    hi = tl.load(q_ptr + 2 * r + 1)
    packed = ((lo & 0xF) | ((hi & 0xF) << 4)).to(tl.uint8)
    tl.store(out_ptr + r, packed)


@construct("packing two signed 4-bit codes into a uint8")
def _(t: Tools):
    q, out = t.randint(-8, 8, 32, dtype=torch.int8), t.zeros(16, dtype=torch.uint8)
    _pack_nibbles[(1,)](q, out, N=16)
    return [out]


@triton.jit
def _unpack_nibbles(p_ptr, out_ptr, N: tl.constexpr):
    r = tl.arange(0, N)
    p = tl.load(p_ptr + r).to(tl.int32)
    lo = ((p & 0xF) ^ 8) - 8  # sign-extend the low nibble
    hi = (p.to(tl.int8) >> 4).to(tl.int32)  # arithmetic shift of the signed byte
    tl.store(out_ptr + 2 * r, lo)
    tl.store(out_ptr + 2 * r + 1, hi)


@construct("unpacking signed 4-bit codes (sign extension by xor and by an arithmetic shift)")
def _(t: Tools):
    p, out = t.randint(0, 256, 16, dtype=torch.uint8), t.zeros(32, dtype=torch.int32)
    _unpack_nibbles[(1,)](p, out, N=16)
    return [out]


@triton.jit
def _promotion(a_ptr, b_ptr, c_ptr, o1, o2, o3, N: tl.constexpr):
    r = tl.arange(0, N)
    a = tl.load(a_ptr + r)  # int8
    b = tl.load(b_ptr + r)  # int32
    c = tl.load(c_ptr + r)  # float16
    tl.store(o1 + r, a + b)  # int32
    tl.store(o2 + r, a * c)  # float16
    tl.store(o3 + r, (a * 100).to(tl.int32))  # int8 * 100 wraps in int8


@construct("type promotion: int8 + int32, int8 * float16, int8 * a literal")
def _(t: Tools):
    a, b, c = t.randint(-128, 128, 16, dtype=torch.int8), t.randint(-1000, 1000, 16), t.rand(16, dtype=torch.float16)
    o1, o2, o3 = t.zeros(16, dtype=torch.int32), t.zeros(16, dtype=torch.float16), t.zeros(16, dtype=torch.int32)
    _promotion[(1,)](a, b, c, o1, o2, o3, N=16)
    return [o1, o2, o3]


@triton.jit
def _true_div_int(a_ptr, b_ptr, out_ptr, N: tl.constexpr):
    r = tl.arange(0, N)
    tl.store(out_ptr + r, tl.load(a_ptr + r) / tl.load(b_ptr + r))


@construct("/ of two int32 blocks (a float32 result)", ulps=2,
           note="the GPU's float32 `/` is approximate (up to 2 ulps; 2 of 16 differed by 1); tl.div_rn is exact")
def _(t: Tools):
    a, b, out = t.randint(-100, 100, 16), t.randint(1, 9, 16), t.zeros(16)
    _true_div_int[(1,)](a, b, out, N=16)
    return [out]


@triton.jit
def _float_floordiv(a_ptr, out_ptr, out2_ptr, N: tl.constexpr):
    r = tl.arange(0, N)
    a = tl.load(a_ptr + r)
    tl.store(out_ptr + r, a // 0.5)
    tl.store(out2_ptr + r, a % 1.5)


@construct("// and % of float32")
def _(t: Tools):
    a, out, out2 = t.rand(16), t.zeros(16), t.zeros(16)
    _float_floordiv[(1,)](a, out, out2, N=16)
    return [out, out2]


@triton.jit
def _compare_cast(a_ptr, out_ptr, out2_ptr, N: tl.constexpr):
    r = tl.arange(0, N)
    a = tl.load(a_ptr + r)
    tl.store(out_ptr + r, (a > 0).to(tl.int32) + (a < -1).to(tl.int32))
    tl.store(out2_ptr + r, (a > 0) & (a < 2))


@construct("comparisons cast to int32 and combined with &")
def _(t: Tools):
    a, out, out2 = t.rand(16), t.zeros(16, dtype=torch.int32), t.zeros(16, dtype=torch.bool)
    _compare_cast[(1,)](a, out, out2, N=16)
    return [out, out2]


# --- casts and rounding -------------------------------------------------------------------------------------------

@triton.jit
def _cast_float_int(x_ptr, o1, o2, o3, N: tl.constexpr):
    r = tl.arange(0, N)
    x = tl.load(x_ptr + r)
    tl.store(o1 + r, x.to(tl.int32))
    tl.store(o2 + r, x.to(tl.int8))
    tl.store(o3 + r, x.to(tl.int16))


@construct("float32 to int32, int8 and int16 in range (truncation toward zero)")
def _(t: Tools):
    x = t.rand(32, lo=-100.0, hi=100.0)
    o1, o2, o3 = t.zeros(32, dtype=torch.int32), t.zeros(32, dtype=torch.int8), t.zeros(32, dtype=torch.int16)
    _cast_float_int[(1,)](x, o1, o2, o3, N=32)
    return [o1, o2, o3]


@triton.jit
def _cast_out_of_range(x_ptr, o1, o2, N: tl.constexpr):
    r = tl.arange(0, N)
    x = tl.load(x_ptr + r)
    tl.store(o1 + r, x.to(tl.int8))
    tl.store(o2 + r, x.to(tl.uint8))


@construct("float32 to int8 and uint8 out of range (undefined in C: what each device does)")
def _(t: Tools):
    x = t.tensor([127.6, 128.0, 200.0, -129.0, -200.0, 255.0, 256.0, -1.0, -0.5, 300.0, 1000.0, -1000.0,
                  127.0, -128.0, 0.0, 50.0], torch.float32)
    o1, o2 = t.zeros(16, dtype=torch.int8), t.zeros(16, dtype=torch.uint8)
    _cast_out_of_range[(1,)](x, o1, o2, N=16)
    return [o1, o2]


@triton.jit
def _cast_nan_inf(x_ptr, o1, N: tl.constexpr):
    r = tl.arange(0, N)
    tl.store(o1 + r, tl.load(x_ptr + r).to(tl.int32))


@construct("float32 NaN and infinities to int32 (undefined in C: what each device does)")
def _(t: Tools):
    x = t.tensor([float("nan"), float("inf"), float("-inf"), 3e9, -3e9, 1.0, -1.0, 0.0], torch.float32)
    o1 = t.zeros(8, dtype=torch.int32)
    _cast_nan_inf[(1,)](x, o1, N=8)
    return [o1]


@triton.jit
def _downcast(x_ptr, o1, o2, o3, N: tl.constexpr):
    r = tl.arange(0, N)
    x = tl.load(x_ptr + r)
    tl.store(o1 + r, x.to(tl.float16))
    tl.store(o2 + r, x.to(tl.float16, fp_downcast_rounding="rtz"))
    tl.store(o3 + r, x.to(tl.bfloat16))


@construct("float32 to float16 (round to nearest even and rtz) and to bfloat16")
def _(t: Tools):
    x = t.rand(64, lo=-70000.0, hi=70000.0)
    x[:8] = t.tensor([1.00048828125, 1.0009765625 + 0.00048828125, 65520.0, 65519.0, -65520.0, 1e-8, 6e-5, -0.0],
                     torch.float32)
    o1, o2, o3 = t.zeros(64, dtype=torch.float16), t.zeros(64, dtype=torch.float16), t.zeros(64, dtype=torch.bfloat16)
    _downcast[(1,)](x, o1, o2, o3, N=64)
    return [o1, o2, o3]


@triton.jit
def _upcast(h_ptr, b_ptr, o1, o2, N: tl.constexpr):
    r = tl.arange(0, N)
    tl.store(o1 + r, tl.load(h_ptr + r).to(tl.float32))
    tl.store(o2 + r, tl.load(b_ptr + r).to(tl.float32))


@construct("float16 and bfloat16 to float32")
def _(t: Tools):
    h, b = t.rand(16, dtype=torch.float16), t.rand(16, dtype=torch.bfloat16)
    o1, o2 = t.zeros(16), t.zeros(16)
    _upcast[(1,)](h, b, o1, o2, N=16)
    return [o1, o2]


@triton.jit
def _int_to_float(a_ptr, o1, o2, N: tl.constexpr):
    r = tl.arange(0, N)
    a = tl.load(a_ptr + r)
    tl.store(o1 + r, a.to(tl.float32))
    tl.store(o2 + r, a.to(tl.float16))


@construct("int32 to float32 and float16 (rounding of large integers)")
def _(t: Tools):
    a = t.randint(-(2 ** 30), 2 ** 30, 16)
    o1, o2 = t.zeros(16), t.zeros(16, dtype=torch.float16)
    _int_to_float[(1,)](a, o1, o2, N=16)
    return [o1, o2]


@triton.jit
def _narrow_int(a_ptr, o1, o2, N: tl.constexpr):
    r = tl.arange(0, N)
    a = tl.load(a_ptr + r)
    tl.store(o1 + r, a.to(tl.int8))  # keeps the low byte
    tl.store(o2 + r, a.to(tl.uint8))


@construct("int32 to int8 and uint8 (truncation of the high bytes)")
def _(t: Tools):
    a = t.randint(-100000, 100000, 16)
    o1, o2 = t.zeros(16, dtype=torch.int8), t.zeros(16, dtype=torch.uint8)
    _narrow_int[(1,)](a, o1, o2, N=16)
    return [o1, o2]


@triton.jit
def _bitcast(x_ptr, o1, o2, N: tl.constexpr):
    r = tl.arange(0, N)
    x = tl.load(x_ptr + r)
    bits = x.to(tl.int32, bitcast=True)
    tl.store(o1 + r, bits)
    tl.store(o2 + r, (bits ^ 0x7FFFFFFF).to(tl.float32, bitcast=True))


@construct(".to(bitcast=True) between float32 and int32")
def _(t: Tools):
    x, o1, o2 = t.rand(16), t.zeros(16, dtype=torch.int32), t.zeros(16)
    _bitcast[(1,)](x, o1, o2, N=16)
    return [o1, o2]


@triton.jit
def _libdevice_round(x_ptr, o1, o2, o3, o4, o5, o6, N: tl.constexpr):
    r = tl.arange(0, N)
    x = tl.load(x_ptr + r)
    tl.store(o1 + r, libdevice.rint(x))
    tl.store(o2 + r, libdevice.round(x))
    tl.store(o3 + r, libdevice.llrint(x))
    tl.store(o4 + r, libdevice.trunc(x))
    tl.store(o5 + r, libdevice.nearbyint(x))
    tl.store(o6 + r, libdevice.float2int_rn(x))


@construct("libdevice rint, round, llrint, trunc, nearbyint, float2int_rn (halves included)")
def _(t: Tools):
    x = t.rand(32, lo=-10.0, hi=10.0)
    x[:12] = t.tensor([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.5, -3.5, 0.49999997, -0.49999997, 126.5, -127.5],
                      torch.float32)
    outs = [t.zeros(32), t.zeros(32), t.zeros(32, dtype=torch.int64), t.zeros(32), t.zeros(32),
            t.zeros(32, dtype=torch.int32)]
    _libdevice_round[(1,)](x, *outs, N=32)
    return outs


@triton.jit
def _floor_ceil(x_ptr, o1, o2, o3, N: tl.constexpr):
    r = tl.arange(0, N)
    x = tl.load(x_ptr + r)
    tl.store(o1 + r, tl.floor(x))
    tl.store(o2 + r, tl.ceil(x))
    tl.store(o3 + r, tl.floor(x + 0.5).to(tl.int8))  # a hand-made round half up


@construct("tl.floor, tl.ceil and floor(x + 0.5)")
def _(t: Tools):
    x = t.rand(32, lo=-100.0, hi=100.0)
    x[:4] = t.tensor([0.5, -0.5, 2.5, -2.5], torch.float32)
    o1, o2, o3 = t.zeros(32), t.zeros(32), t.zeros(32, dtype=torch.int8)
    _floor_ceil[(1,)](x, o1, o2, o3, N=32)
    return [o1, o2, o3]


@triton.jit
def _quantize_int8(x_ptr, q_ptr, N: tl.constexpr):
    r = tl.arange(0, N)
    x = tl.load(x_ptr + r)
    absmax = tl.max(tl.abs(x), axis=0)
    scaled = x * (127.0 / absmax)
    q = tl.where(scaled >= 0, scaled + 0.5, scaled - 0.5).to(tl.int8)  # round half away from zero, then truncate
    tl.store(q_ptr + r, q)


@construct("an int8 quantization: absmax, scale, round half away from zero, truncate")
def _(t: Tools):
    x, q = t.rand(64), t.zeros(64, dtype=torch.int8)
    _quantize_int8[(1,)](x, q, N=64)
    return [q]


# --- Python builtins on tensors -----------------------------------------------------------------------------------

@triton.jit
def _py_minmax(x_ptr, y_ptr, o1, o2, o3, o4, N: tl.constexpr):
    r = tl.arange(0, N)
    x = tl.load(x_ptr + r)
    y = tl.load(y_ptr + r)
    tl.store(o1 + r, min(x, y))
    tl.store(o2 + r, max(x, y))
    tl.store(o3 + r, max(x, 0.0))
    tl.store(o4 + r, min(x, 1.0) + max(y, -1.0))


@construct("Python min and max of two blocks and of a block and a scalar")
def _(t: Tools):
    x, y = t.rand(16), t.rand(16)
    outs = [t.zeros(16) for _ in range(4)]
    _py_minmax[(1,)](x, y, *outs, N=16)
    return outs


@triton.jit
def _py_max_running(x_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr):
    rm = tl.arange(0, M)
    rn = tl.arange(0, N)
    m = tl.full([M], float("-inf"), tl.float32)
    for j in range(0, 4):
        s = tl.load(x_ptr + j * M * N + rm[:, None] * N + rn[None, :])
        m = max(m, tl.max(s, axis=1))  # an online softmax's running maximum
    tl.store(out_ptr + rm, m)


@construct("Python max of a running maximum and a row maximum (online softmax)")
def _(t: Tools):
    x, out = t.rand(4, 8, 16), t.zeros(8)
    _py_max_running[(1,)](x, out, M=8, N=16)
    return [out]


@triton.jit
def _py_abs(x_ptr, i_ptr, o1, o2, N: tl.constexpr):
    r = tl.arange(0, N)
    tl.store(o1 + r, abs(tl.load(x_ptr + r)))
    tl.store(o2 + r, abs(tl.load(i_ptr + r)))


@construct("Python abs of float32 and int8 (-128 included)")
def _(t: Tools):
    x, i = t.rand(16), t.randint(-128, 128, 16, dtype=torch.int8)
    i[0] = -128
    o1, o2 = t.zeros(16), t.zeros(16, dtype=torch.int8)
    _py_abs[(1,)](x, i, o1, o2, N=16)
    return [o1, o2]


@triton.jit
def _tl_minmax_nan(x_ptr, y_ptr, o1, o2, o3, N: tl.constexpr):
    r = tl.arange(0, N)
    x = tl.load(x_ptr + r)
    y = tl.load(y_ptr + r)
    tl.store(o1 + r, tl.maximum(x, y))
    tl.store(o2 + r, tl.minimum(x, y))
    tl.store(o3 + r, tl.maximum(x, y, propagate_nan=tl.PropagateNan.ALL))


@construct("tl.maximum and tl.minimum with NaNs (propagate_nan default and ALL)")
def _(t: Tools):
    nan = float("nan")
    x = t.tensor([nan, 1.0, nan, -0.0, 0.0, 2.0, -3.0, nan], torch.float32)
    y = t.tensor([1.0, nan, nan, 0.0, -0.0, -2.0, 3.0, 5.0], torch.float32)
    outs = [t.zeros(8) for _ in range(3)]
    _tl_minmax_nan[(1,)](x, y, *outs, N=8)
    return outs


@triton.jit
def _clamp(x_ptr, o1, o2, N: tl.constexpr):
    r = tl.arange(0, N)
    x = tl.load(x_ptr + r)
    tl.store(o1 + r, tl.clamp(x, -1.0, 1.0))
    tl.store(o2 + r, tl.minimum(tl.maximum(x, -127.0), 127.0).to(tl.int8))


@construct("tl.clamp and clamping by tl.maximum/tl.minimum before a cast")
def _(t: Tools):
    x = t.rand(16, lo=-200.0, hi=200.0)
    o1, o2 = t.zeros(16), t.zeros(16, dtype=torch.int8)
    _clamp[(1,)](x, o1, o2, N=16)
    return [o1, o2]


# --- float arithmetic ---------------------------------------------------------------------------------------------

@triton.jit
def _mul_add(a_ptr, b_ptr, c_ptr, out_ptr, N: tl.constexpr):
    r = tl.arange(0, N)
    tl.store(out_ptr + r, tl.load(a_ptr + r) * tl.load(b_ptr + r) + tl.load(c_ptr + r))


@construct("a * b + c in float32 (the compiler may contract it to an FMA)", ulps=1)
def _(t: Tools):
    a, b, c, out = t.rand(64), t.rand(64), t.rand(64), t.zeros(64)
    _mul_add[(1,)](a, b, c, out, N=64)
    return [out]


@triton.jit
def _fma(a_ptr, b_ptr, c_ptr, out_ptr, N: tl.constexpr):
    r = tl.arange(0, N)
    tl.store(out_ptr + r, tl.fma(tl.load(a_ptr + r), tl.load(b_ptr + r), tl.load(c_ptr + r)))


@construct("tl.fma in float32")
def _(t: Tools):
    a, b, c, out = t.rand(64), t.rand(64), t.rand(64), t.zeros(64)
    _fma[(1,)](a, b, c, out, N=64)
    return [out]


@triton.jit
def _fp16_arith(a_ptr, b_ptr, o1, o2, o3, N: tl.constexpr):
    r = tl.arange(0, N)
    a = tl.load(a_ptr + r)
    b = tl.load(b_ptr + r)
    tl.store(o1 + r, a + b)
    tl.store(o2 + r, a * b)
    tl.store(o3 + r, a / b)


@construct("float16 +, * and / (float16 results)")
def _(t: Tools):
    a, b = t.rand(64, dtype=torch.float16), t.rand(64, dtype=torch.float16, lo=0.5, hi=4.0)
    outs = [t.zeros(64, dtype=torch.float16) for _ in range(3)]
    _fp16_arith[(1,)](a, b, *outs, N=64)
    return outs


@triton.jit
def _fp32_div(a_ptr, b_ptr, out_ptr, N: tl.constexpr, RN: tl.constexpr):
    r = tl.arange(0, N)
    a = tl.load(a_ptr + r)
    b = tl.load(b_ptr + r)
    if RN:
        tl.store(out_ptr + r, tl.div_rn(a, b))
    else:
        tl.store(out_ptr + r, a / b)


@construct("float32 /", ulps=2, note="approximate on the GPU (up to 2 ulps; 19 of 64 differed by 1)")
def _(t: Tools):
    a, b, out = t.rand(64), t.rand(64, lo=0.1, hi=8.0), t.zeros(64)
    _fp32_div[(1,)](a, b, out, N=64, RN=False)
    return [out]


@construct("tl.div_rn of float32 (correctly rounded)")
def _(t: Tools):
    a, b, out = t.rand(64), t.rand(64, lo=0.1, hi=8.0), t.zeros(64)
    _fp32_div[(1,)](a, b, out, N=64, RN=True)
    return [out]


@triton.jit
def _division_by_zero(a_ptr, o1, N: tl.constexpr):
    r = tl.arange(0, N)
    a = tl.load(a_ptr + r)
    tl.store(o1 + r, a / 0.0)


@construct("float32 division by zero (inf and NaN)")
def _(t: Tools):
    a = t.tensor([1.0, -1.0, 0.0, 5.0, -0.0, 3.0, -2.0, 0.5], torch.float32)
    o1 = t.zeros(8)
    _division_by_zero[(1,)](a, o1, N=8)
    return [o1]


@triton.jit
def _exp_log(x_ptr, o1, o2, o3, o4, N: tl.constexpr):
    r = tl.arange(0, N)
    x = tl.load(x_ptr + r)
    tl.store(o1 + r, tl.exp(x))
    tl.store(o2 + r, tl.log(tl.abs(x) + 1.0))
    tl.store(o3 + r, tl.exp2(x))
    tl.store(o4 + r, tl.log2(tl.abs(x) + 1.0))


@construct("tl.exp, tl.log, tl.exp2, tl.log2 (approximate on the GPU)", ulps=4)
def _(t: Tools):
    x = t.rand(64)
    outs = [t.zeros(64) for _ in range(4)]
    _exp_log[(1,)](x, *outs, N=64)
    return outs


@triton.jit
def _sqrt(x_ptr, o1, o2, o3, N: tl.constexpr):
    r = tl.arange(0, N)
    x = tl.abs(tl.load(x_ptr + r))
    tl.store(o1 + r, tl.sqrt(x))
    tl.store(o2 + r, tl.sqrt_rn(x))
    tl.store(o3 + r, tl.rsqrt(x + 1.0))


@construct("tl.sqrt, tl.sqrt_rn and tl.rsqrt", ulps=2)
def _(t: Tools):
    x = t.rand(64)
    outs = [t.zeros(64) for _ in range(3)]
    _sqrt[(1,)](x, *outs, N=64)
    return outs


@triton.jit
def _sigmoid_erf(x_ptr, o1, o2, o3, N: tl.constexpr):
    r = tl.arange(0, N)
    x = tl.load(x_ptr + r)
    tl.store(o1 + r, tl.sigmoid(x))
    tl.store(o2 + r, tl.erf(x))
    tl.store(o3 + r, libdevice.tanh(x))


@construct("tl.sigmoid, tl.erf and libdevice.tanh", ulps=4)
def _(t: Tools):
    x = t.rand(64)
    outs = [t.zeros(64) for _ in range(3)]
    _sigmoid_erf[(1,)](x, *outs, N=64)
    return outs


@triton.jit
def _libdevice_unary(x_ptr, out_ptr, N: tl.constexpr, FN: tl.constexpr):
    r = tl.arange(0, N)
    x = tl.load(x_ptr + r)
    if FN == "tanh":
        y = libdevice.tanh(x)
    elif FN == "sinh":
        y = libdevice.sinh(x)
    elif FN == "atan":
        y = libdevice.atan(x)
    elif FN == "expm1":
        y = libdevice.expm1(x)
    elif FN == "log1p":
        y = libdevice.log1p(tl.abs(x))
    elif FN == "cbrt":
        y = libdevice.cbrt(x)
    elif FN == "erf":
        y = libdevice.erf(x)
    elif FN == "exp":
        y = libdevice.exp(x)
    elif FN == "fast_expf":
        y = libdevice.fast_expf(x)
    else:
        y = libdevice.rsqrt(tl.abs(x) + 0.5)
    tl.store(out_ptr + r, y)


_UNARY = ("tanh", "sinh", "atan", "expm1", "log1p", "cbrt", "erf", "exp", "fast_expf", "rsqrt")


@construct("libdevice tanh, sinh, atan, expm1, log1p, cbrt, erf, exp, fast_expf, rsqrt", ulps=4,
           note="libdevice is within a few ulps of the exact value; the interpreter rounds NumPy's")
def _(t: Tools):
    x = t.rand(64, lo=-3.0, hi=3.0)
    outs = []
    for fn in _UNARY:
        outs.append(t.zeros(64))
        _libdevice_unary[(1,)](x, outs[-1], N=64, FN=fn)
    return outs


@triton.jit
def _libdevice_binary(x_ptr, y_ptr, o1, o2, o3, o4, o5, N: tl.constexpr):
    r = tl.arange(0, N)
    x = tl.load(x_ptr + r)
    y = tl.load(y_ptr + r)
    tl.store(o1 + r, libdevice.pow(tl.abs(x), y))
    tl.store(o2 + r, libdevice.fmod(x, y))
    tl.store(o3 + r, libdevice.atan2(x, y))
    tl.store(o4 + r, libdevice.hypot(x, y))
    tl.store(o5 + r, libdevice.copysign(x, y))


@construct("libdevice pow, fmod, atan2, hypot, copysign", ulps=4)
def _(t: Tools):
    x, y = t.rand(64), t.rand(64, lo=0.25, hi=3.0)
    y[::2] = -y[::2]
    outs = [t.zeros(64) for _ in range(5)]
    _libdevice_binary[(1,)](x, y, *outs, N=64)
    return outs


@triton.jit
def _libdevice_int(x_ptr, o1, o2, o3, o4, o5, N: tl.constexpr):
    r = tl.arange(0, N)
    x = tl.load(x_ptr + r)
    tl.store(o1 + r, libdevice.float2int_rz(x))
    tl.store(o2 + r, libdevice.float2int_rd(x))
    tl.store(o3 + r, libdevice.float2int_ru(x))
    tl.store(o4 + r, libdevice.isnan(x))
    tl.store(o5 + r, libdevice.signbit(x))


@construct("libdevice float2int_rz/rd/ru, isnan, signbit")
def _(t: Tools):
    x = t.rand(32, lo=-10.0, hi=10.0)
    x[:6] = t.tensor([float("nan"), -0.0, 0.0, -2.5, 2.5, float("-inf")], torch.float32)
    outs = [t.zeros(32, dtype=torch.int32) for _ in range(5)]
    _libdevice_int[(1,)](x, *outs, N=32)
    return outs


# --- reductions and scans -----------------------------------------------------------------------------------------

@triton.jit
def _masked_sum(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    r = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + r, mask=r < n, other=0.0)
    tl.store(out_ptr, tl.sum(x, axis=0))


@construct("a masked tl.sum over a block larger than the data", ulps=2,
           note="the order of a float sum may differ")
def _(t: Tools):
    x, out = t.rand(100), t.zeros(1)
    _masked_sum[(1,)](x, out, 100, BLOCK=128)
    return [out]


@triton.jit
def _masked_max(x_ptr, o1, o2, n, BLOCK: tl.constexpr):
    r = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + r, mask=r < n, other=float("-inf"))
    tl.store(o1, tl.max(x, axis=0))
    tl.store(o2, tl.max(tl.abs(tl.load(x_ptr + r, mask=r < n, other=0.0)), axis=0))


@construct("masked tl.max with other=-inf and of tl.abs with other=0")
def _(t: Tools):
    x, o1, o2 = t.rand(100, lo=-10.0, hi=-1.0), t.zeros(1), t.zeros(1)
    _masked_max[(1,)](x, o1, o2, 100, BLOCK=128)
    return [o1, o2]


@triton.jit
def _sum_axes(x_ptr, o0, o1, M: tl.constexpr, N: tl.constexpr):
    rm = tl.arange(0, M)
    rn = tl.arange(0, N)
    x = tl.load(x_ptr + rm[:, None] * N + rn[None, :])
    tl.store(o0 + rn, tl.sum(x, axis=0))
    tl.store(o1 + rm, tl.sum(x, axis=1))


@construct("tl.sum over axis 0 and 1 of int32 (exact)")
def _(t: Tools):
    x, o0, o1 = t.randint(-1000, 1000, 8, 16), t.zeros(16, dtype=torch.int32), t.zeros(8, dtype=torch.int32)
    _sum_axes[(1,)](x, o0, o1, M=8, N=16)
    return [o0, o1]


@triton.jit
def _sum_int8(x_ptr, out_ptr, N: tl.constexpr):
    r = tl.arange(0, N)
    tl.store(out_ptr, tl.sum(tl.load(x_ptr + r), axis=0))


@construct("tl.sum of int8 (the accumulator type)")
def _(t: Tools):
    x, out = t.randint(60, 128, 64, dtype=torch.int8), t.zeros(1, dtype=torch.int32)
    _sum_int8[(1,)](x, out, N=64)
    return [out]


@triton.jit
def _sum_fp16(x_ptr, out_ptr, N: tl.constexpr):
    r = tl.arange(0, N)
    tl.store(out_ptr, tl.sum(tl.load(x_ptr + r), axis=0))


@construct("tl.sum of float16 (the accumulator type)", rel=2e-3,
           note="float16 accumulates in float16, in an order of each device's own (the GPU's 11616, the "
                "interpreter's 11608, the exact sum 11611.2)")
def _(t: Tools):
    x, out = t.rand(256, dtype=torch.float16, lo=0.0, hi=100.0), t.zeros(1, dtype=torch.float32)
    _sum_fp16[(1,)](x, out, N=256)
    return [out]


@triton.jit
def _argmax_min(x_ptr, o1, o2, o3, N: tl.constexpr):
    r = tl.arange(0, N)
    x = tl.load(x_ptr + r)
    tl.store(o1, tl.argmax(x, axis=0))
    tl.store(o2, tl.argmin(x, axis=0))
    tl.store(o3, tl.min(x, axis=0))


@construct("tl.argmax and tl.argmin with ties (the first index)")
def _(t: Tools):
    x = t.randint(-3, 4, 32)
    o1, o2, o3 = t.zeros(1, dtype=torch.int32), t.zeros(1, dtype=torch.int32), t.zeros(1, dtype=torch.int32)
    _argmax_min[(1,)](x, o1, o2, o3, N=32)
    return [o1, o2, o3]


@triton.jit
def _cumsum(x_ptr, i_ptr, o1, o2, o3, N: tl.constexpr):
    r = tl.arange(0, N)
    tl.store(o1 + r, tl.cumsum(tl.load(i_ptr + r), axis=0))
    tl.store(o2 + r, tl.cumsum(tl.load(x_ptr + r), axis=0))
    tl.store(o3 + r, tl.cumsum(tl.load(i_ptr + r), axis=0, reverse=True))


@construct("tl.cumsum of int32 and float32, forward and reverse",
           note="the float32 values are quarters: every partial sum is exact, whatever the scan's order")
def _(t: Tools):
    x, i = t.randint(-64, 64, 32).to(torch.float32) / 4, t.randint(-100, 100, 32)
    o1, o2, o3 = t.zeros(32, dtype=torch.int32), t.zeros(32), t.zeros(32, dtype=torch.int32)
    _cumsum[(1,)](x, i, o1, o2, o3, N=32)
    return [o1, o2, o3]


@triton.jit
def _cumprod(x_ptr, o1, N: tl.constexpr):
    r = tl.arange(0, N)
    tl.store(o1 + r, tl.cumprod(tl.load(x_ptr + r), axis=0))


@construct("tl.cumprod of int32")
def _(t: Tools):
    x, o1 = t.randint(-2, 3, 16), t.zeros(16, dtype=torch.int32)
    _cumprod[(1,)](x, o1, N=16)
    return [o1]


@triton.jit
def _add_combine(a, b):
    return a + b


@triton.jit
def _reduce_custom(x_ptr, o1, o2, N: tl.constexpr):
    r = tl.arange(0, N)
    x = tl.load(x_ptr + r)
    tl.store(o1, tl.reduce(x, 0, _add_combine))
    tl.store(o2 + r, tl.associative_scan(x, 0, _add_combine))


@construct("tl.reduce and tl.associative_scan with a combine function of one's own")
def _(t: Tools):
    x, o1, o2 = t.randint(-50, 50, 32), t.zeros(1, dtype=torch.int32), t.zeros(32, dtype=torch.int32)
    _reduce_custom[(1,)](x, o1, o2, N=32)
    return [o1, o2]


@triton.jit
def _sort(x_ptr, o1, o2, N: tl.constexpr):
    r = tl.arange(0, N)
    x = tl.load(x_ptr + r)
    tl.store(o1 + r, tl.sort(x))
    tl.store(o2 + r, tl.sort(x, descending=True))


@construct("tl.sort ascending and descending")
def _(t: Tools):
    x, o1, o2 = t.randint(-100, 100, 32), t.zeros(32, dtype=torch.int32), t.zeros(32, dtype=torch.int32)
    _sort[(1,)](x, o1, o2, N=32)
    return [o1, o2]


@triton.jit
def _softmax_row(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    r = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n + r, mask=r < n, other=float("-inf"))
    x = x - tl.max(x, axis=0)
    e = tl.exp(x)
    tl.store(out_ptr + row * n + r, e / tl.sum(e, axis=0), mask=r < n)


@construct("a masked softmax of a row", ulps=8,
           note="tl.exp is approximate on the GPU and a float sum's order may differ")
def _(t: Tools):
    x, out = t.rand(4, 50), t.zeros(4, 50)
    _softmax_row[(4,)](x, out, 50, BLOCK=64)
    return [out]


# --- tl.dot -------------------------------------------------------------------------------------------------------

@triton.jit
def _dot(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr, PRECISION: tl.constexpr):
    rm, rn, rk = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])
    if PRECISION == "default":
        c = tl.dot(a, b)
    else:
        c = tl.dot(a, b, input_precision=PRECISION)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], c)


@construct("tl.dot of int8 blocks (an int32 accumulator, exact)")
def _(t: Tools):
    a, b = t.randint(-128, 128, 32, 64, dtype=torch.int8), t.randint(-128, 128, 64, 32, dtype=torch.int8)
    c = t.zeros(32, 32, dtype=torch.int32)
    _dot[(1,)](a, b, c, M=32, N=32, K=64, PRECISION="default")
    return [c]


@construct("tl.dot of float16 blocks of small integers (exact in float32)")
def _(t: Tools):
    a = t.randint(-8, 8, 32, 32).to(torch.float16)
    b = t.randint(-8, 8, 32, 32).to(torch.float16)
    c = t.zeros(32, 32)
    _dot[(1,)](a, b, c, M=32, N=32, K=32, PRECISION="default")
    return [c]


@construct("tl.dot of float32 blocks with input_precision='ieee'", rel=1e-5, note="a float sum's order may differ")
def _(t: Tools):
    a, b, c = t.rand(32, 32), t.rand(32, 32), t.zeros(32, 32)
    _dot[(1,)](a, b, c, M=32, N=32, K=32, PRECISION="ieee")
    return [c]


@construct("tl.dot of float32 blocks, default precision (tf32 on the GPU)", rel=1e-2,
           note="tf32 keeps 10 mantissa bits of each input: the interpreter multiplies in full float32")
def _(t: Tools):
    a, b, c = t.rand(32, 32), t.rand(32, 32), t.zeros(32, 32)
    _dot[(1,)](a, b, c, M=32, N=32, K=32, PRECISION="default")
    return [c]


@construct("tl.dot of float32 blocks with input_precision='tf32x3'", rel=1e-5,
           note="three tf32 products: close to float32, not bit for bit")
def _(t: Tools):
    a, b, c = t.rand(32, 32), t.rand(32, 32), t.zeros(32, 32)
    _dot[(1,)](a, b, c, M=32, N=32, K=32, PRECISION="tf32x3")
    return [c]


@triton.jit
def _dot_allow_tf32(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    rm, rn, rk = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], tl.dot(a, b, allow_tf32=False))


@construct("tl.dot of float32 blocks with allow_tf32=False (the older spelling of 'ieee')", rel=1e-5,
           note="a float sum's order may differ")
def _(t: Tools):
    a, b, c = t.rand(32, 32), t.rand(32, 32), t.zeros(32, 32)
    _dot_allow_tf32[(1,)](a, b, c, M=32, N=32, K=32)
    return [c]


@triton.jit
def _dot_acc(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr, BK: tl.constexpr,
             OUT_DTYPE: tl.constexpr):
    rm, rn, rk = tl.arange(0, M), tl.arange(0, N), tl.arange(0, BK)
    acc = tl.zeros((M, N), dtype=tl.int32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :])
        b = tl.load(b_ptr + (k + rk)[:, None] * N + rn[None, :])
        if OUT_DTYPE:
            acc = tl.dot(a, b, acc, out_dtype=tl.int32)
        else:
            acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc)


@construct("tl.dot(a, b, acc) of int8 tiles into an int32 accumulator, no out_dtype (3.6 refuses it)")
def _(t: Tools):
    a, b = t.randint(-128, 128, 16, 128, dtype=torch.int8), t.randint(-128, 128, 128, 16, dtype=torch.int8)
    c = t.zeros(16, 16, dtype=torch.int32)
    _dot_acc[(1,)](a, b, c, M=16, N=16, K=128, BK=32, OUT_DTYPE=False)
    return [c]


@construct("tl.dot(a, b, acc, out_dtype=tl.int32) over a K loop of int8 tiles")
def _(t: Tools):
    a, b = t.randint(-128, 128, 16, 128, dtype=torch.int8), t.randint(-128, 128, 128, 16, dtype=torch.int8)
    c = t.zeros(16, 16, dtype=torch.int32)
    _dot_acc[(1,)](a, b, c, M=16, N=16, K=128, BK=32, OUT_DTYPE=True)
    return [c]


@triton.jit
def _dot_out_fp16(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    rm, rn, rk = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], tl.dot(a, b).to(tl.float16))


@construct("tl.dot of float16 blocks cast to float16", ulps=1, note="a float sum's order may differ")
def _(t: Tools):
    a, b = t.rand(32, 32, dtype=torch.float16), t.rand(32, 32, dtype=torch.float16)
    c = t.zeros(32, 32, dtype=torch.float16)
    _dot_out_fp16[(1,)](a, b, c, M=32, N=32, K=32)
    return [c]


@triton.jit
def _dot_trans(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    rm, rn, rk = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
    w = tl.load(b_ptr + rn[:, None] * K + rk[None, :])  # [N, K], as a linear layer's weight
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], tl.dot(a, tl.trans(w)))


@construct("tl.dot with a transposed operand (x @ w.T of int8)")
def _(t: Tools):
    a, w = t.randint(-128, 128, 16, 32, dtype=torch.int8), t.randint(-128, 128, 32, 32, dtype=torch.int8)
    c = t.zeros(16, 32, dtype=torch.int32)
    _dot_trans[(1,)](a, w, c, M=16, N=32, K=32)
    return [c]


@triton.jit
def _dot_scale_epilogue(a_ptr, b_ptr, s_ptr, bias_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    rm, rn, rk = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    acc = tl.dot(tl.load(a_ptr + rm[:, None] * K + rk[None, :]), tl.load(b_ptr + rk[:, None] * N + rn[None, :]))
    out = acc.to(tl.float32) * tl.load(s_ptr + rn)[None, :] + tl.load(bias_ptr + rn)[None, :].to(tl.float32)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], out.to(tl.float16))


@construct("an int8 matmul's epilogue: int32 to float32, per-column scale, float16 bias, float16 out", ulps=1,
           note="the multiply and add may contract to an FMA")
def _(t: Tools):
    a, b = t.randint(-128, 128, 16, 64, dtype=torch.int8), t.randint(-128, 128, 64, 16, dtype=torch.int8)
    s, bias, c = t.rand(16, lo=1e-4, hi=1e-3), t.rand(16, dtype=torch.float16), t.zeros(16, 16, dtype=torch.float16)
    _dot_scale_epilogue[(1,)](a, b, s, bias, c, M=16, N=16, K=64)
    return [c]


# --- control flow, constexprs, tuples, helpers --------------------------------------------------------------------

@triton.jit
def _constexpr_arith(out_ptr, BLOCK: tl.constexpr):
    HALF: tl.constexpr = BLOCK // 2
    r = tl.arange(0, HALF)
    tl.store(out_ptr + r, r * (BLOCK * 2) + HALF)
    tl.store(out_ptr + HALF + r, tl.full([HALF], BLOCK % 5, tl.int32))


@construct("constexpr arithmetic (//, *, %) in tl.arange and values")
def _(t: Tools):
    out = t.zeros(16, dtype=torch.int32)
    _constexpr_arith[(1,)](out, BLOCK=16)
    return [out]


@triton.jit
def _constexpr_if(x_ptr, out_ptr, N: tl.constexpr, MODE: tl.constexpr):
    r = tl.arange(0, N)
    x = tl.load(x_ptr + r)
    if MODE == "double":
        y = x * 2
    elif MODE == "neg":
        y = -x
    else:
        y = x
    tl.store(out_ptr + r, y)


@construct("if on a constexpr string (three branches)")
def _(t: Tools):
    x = t.rand(8)
    outs = [t.zeros(8) for _ in range(3)]
    for mode, out in zip(("double", "neg", "same"), outs):
        _constexpr_if[(1,)](x, out, N=8, MODE=mode)
    return outs


@triton.jit
def _runtime_if(x_ptr, out_ptr, flag, N: tl.constexpr):
    r = tl.arange(0, N)
    x = tl.load(x_ptr + r)
    if flag > 0:
        x = x + 1
    else:
        x = x - 1
    tl.store(out_ptr + r, x)


@construct("if on a runtime scalar")
def _(t: Tools):
    x, o1, o2 = t.rand(8), t.zeros(8), t.zeros(8)
    _runtime_if[(1,)](x, o1, 1, N=8)
    _runtime_if[(1,)](x, o2, 0, N=8)
    return [o1, o2]


@triton.jit
def _early_return(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    if pid * BLOCK >= n:
        return
    r = pid * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + r, tl.load(x_ptr + r, mask=r < n) + 1.0, mask=r < n)


@construct("an early return in a program past the data")
def _(t: Tools):
    x, out = t.rand(40), t.zeros(64)
    _early_return[(8,)](x, out, 40, BLOCK=8)
    return [out]


@triton.jit
def _runtime_loop(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    acc = tl.zeros([BLOCK], dtype=tl.int32)
    for start in range(0, n, BLOCK):
        r = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + r, mask=r < n, other=0)
    tl.store(out_ptr + tl.arange(0, BLOCK), acc)


@construct("a loop to a runtime bound with a constexpr step")
def _(t: Tools):
    x, out = t.randint(-100, 100, 100), t.zeros(16, dtype=torch.int32)
    _runtime_loop[(1,)](x, out, 100, BLOCK=16)
    return [out]


@triton.jit
def _while_loop(out_ptr, n):
    i = 0
    total = 0
    while i < n:
        total += i * i
        i += 1
    tl.store(out_ptr, total)


@construct("a while loop on a runtime condition")
def _(t: Tools):
    out = t.zeros(1, dtype=torch.int32)
    _while_loop[(1,)](out, 37)
    return [out]


@triton.jit
def _static_range(x_ptr, out_ptr, N: tl.constexpr, STEPS: tl.constexpr):
    r = tl.arange(0, N)
    acc = tl.zeros([N], dtype=tl.float32)
    for i in tl.static_range(STEPS):
        acc += tl.load(x_ptr + i * N + r) * (i + 1)
    tl.store(out_ptr + r, acc)


@construct("tl.static_range", ulps=1, note="the multiply and add may contract to an FMA")
def _(t: Tools):
    x, out = t.rand(4, 8), t.zeros(8)
    _static_range[(1,)](x, out, N=8, STEPS=4)
    return [out]


@triton.jit
def _tl_range(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    acc = tl.zeros([BLOCK], dtype=tl.int32)
    for start in tl.range(0, n, BLOCK, num_stages=2):
        r = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + r, mask=r < n, other=0)
    tl.store(out_ptr + tl.arange(0, BLOCK), acc)


@construct("tl.range with num_stages")
def _(t: Tools):
    x, out = t.randint(-100, 100, 70), t.zeros(16, dtype=torch.int32)
    _tl_range[(1,)](x, out, 70, BLOCK=16)
    return [out]


@triton.jit
def _helper_pair(x, y):
    return x + y, x - y


@triton.jit
def _tuples(x_ptr, y_ptr, o1, o2, N: tl.constexpr):
    r = tl.arange(0, N)
    s, d = _helper_pair(tl.load(x_ptr + r), tl.load(y_ptr + r))
    pair = (s, d)
    tl.store(o1 + r, pair[0])
    tl.store(o2 + r, pair[1])


@construct("a helper returning a tuple, unpacked and indexed")
def _(t: Tools):
    x, y, o1, o2 = t.rand(8), t.rand(8), t.zeros(8), t.zeros(8)
    _tuples[(1,)](x, y, o1, o2, N=8)
    return [o1, o2]


@triton.jit
def _helper_constexpr(x, SCALE: tl.constexpr):
    return x * SCALE


@triton.jit
def _helper_call(x_ptr, out_ptr, N: tl.constexpr):
    r = tl.arange(0, N)
    tl.store(out_ptr + r, _helper_constexpr(tl.load(x_ptr + r), 3))


@construct("a jit helper with a constexpr parameter")
def _(t: Tools):
    x, out = t.rand(8), t.zeros(8)
    _helper_call[(1,)](x, out, N=8)
    return [out]


@triton.jit
def _two_d_grid(out_ptr, n_cols):
    pm = tl.program_id(0)
    pn = tl.program_id(axis=1)
    tl.store(out_ptr + pm * n_cols + pn, pm * 100 + pn + tl.num_programs(0) * 10000 + tl.num_programs(1) * 1000000)


@construct("a 2-D grid: tl.program_id(axis) and tl.num_programs")
def _(t: Tools):
    out = t.zeros(3, 5, dtype=torch.int32)
    _two_d_grid[(3, 5)](out, 5)
    return [out]


@triton.jit
def _grouped_order(out_ptr, num_m, num_n, GROUP: tl.constexpr):
    pid = tl.program_id(0)
    in_group = GROUP * num_n
    group = pid // in_group
    first_m = group * GROUP
    size = min(num_m - first_m, GROUP)
    pm = first_m + (pid % in_group) % size
    pn = (pid % in_group) // size
    tl.store(out_ptr + pid * 2, pm)
    tl.store(out_ptr + pid * 2 + 1, pn)


@construct("grouped tile order with Python min of scalars")
def _(t: Tools):
    out = t.zeros(35, 2, dtype=torch.int32)
    _grouped_order[(35,)](out, 7, 5, GROUP=3)
    return [out]


@triton.jit
def _swizzle(out_ptr, num_m, num_n, GROUP: tl.constexpr):
    i = tl.program_id(0)
    j = tl.program_id(1)
    a, b = tl.swizzle2d(i, j, num_m, num_n, GROUP)
    tl.store(out_ptr + (i * num_n + j) * 2, a)
    tl.store(out_ptr + (i * num_n + j) * 2 + 1, b)


@construct("tl.swizzle2d")
def _(t: Tools):
    out = t.zeros(35, 2, dtype=torch.int32)
    _swizzle[(7, 5)](out, 7, 5, GROUP=3)
    return [out]


@triton.jit
def _autotuned_body(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    r = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + r, tl.load(x_ptr + r, mask=r < n) * 2, mask=r < n)


_autotuned = triton.autotune(configs=[triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 32})], key=["n"])(
    _autotuned_body)


@construct("@triton.autotune, each config forced in turn as the grader runs them (the grid a function of META)")
def _(t: Tools):
    configs, outs = list(_autotuned.configs), []
    try:
        for config in configs:
            _autotuned.configs = [config]  # one config: the autotuner runs it without benchmarking
            x, out = t.rand(100), t.zeros(100)
            _autotuned[lambda meta: (triton.cdiv(100, meta["BLOCK"]),)](x, out, 100)
            outs.append(out)
    finally:
        _autotuned.configs = configs
    return outs


@triton.jit
def _heuristic_body(x_ptr, out_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    r = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if EVEN:
        tl.store(out_ptr + r, tl.load(x_ptr + r) + 1)
    else:
        tl.store(out_ptr + r, tl.load(x_ptr + r, mask=r < n) + 1, mask=r < n)


_heuristic = triton.heuristics({"EVEN": lambda args: args["n"] % args["BLOCK"] == 0})(_heuristic_body)


@construct("@triton.heuristics choosing a constexpr")
def _(t: Tools):
    x, o1 = t.rand(64), t.zeros(64)
    x2, o2 = t.rand(50), t.zeros(50)
    _heuristic[(4,)](x, o1, 64, BLOCK=16)
    _heuristic[(4,)](x2, o2, 50, BLOCK=16)
    return [o1, o2]


# --- memory: masks, pointers, atomics -----------------------------------------------------------------------------

@triton.jit
def _mask_2d(x_ptr, out_ptr, M, N, stride, BM: tl.constexpr, BN: tl.constexpr):
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    x = tl.load(x_ptr + rm[:, None] * stride + rn[None, :], mask=mask, other=-7.0)
    tl.store(out_ptr + rm[:, None] * BN + rn[None, :], x)


@construct("a 2-D masked load with other=-7 over a strided view")
def _(t: Tools):
    x, out = t.rand(5, 12), t.zeros(8, 8)
    _mask_2d[(1,)](x, out, 5, 6, 12, BM=8, BN=8)
    return [out]


@triton.jit
def _masked_store(x_ptr, out_ptr, N: tl.constexpr):
    r = tl.arange(0, N)
    x = tl.load(x_ptr + r)
    tl.store(out_ptr + r, x, mask=x > 0)


@construct("a store masked by the data (what is left untouched keeps its value)")
def _(t: Tools):
    x = t.rand(16)
    out = t.rand(16) * 0 + 9.0
    _masked_store[(1,)](x, out, N=16)
    return [out]


@triton.jit
def _scalar_pointer(s_ptr, out_ptr):
    v = tl.load(s_ptr)
    tl.store(out_ptr, v * 2)
    tl.store(out_ptr + 1, tl.load(s_ptr + 1) - v)


@construct("a load and a store of one element through a scalar pointer")
def _(t: Tools):
    s, out = t.rand(2), t.zeros(2)
    _scalar_pointer[(1,)](s, out)
    return [out]


@triton.jit
def _int64_offsets(x_ptr, out_ptr, stride, N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    r = tl.arange(0, N).to(tl.int64)
    tl.store(out_ptr + row * N + r, tl.load(x_ptr + row * stride + r))


@construct("int64 pointer arithmetic (program_id and arange cast to int64)")
def _(t: Tools):
    x, out = t.rand(4, 24), t.zeros(4, 8)
    _int64_offsets[(4,)](x, out, 24, N=8)
    return [out]


@triton.jit
def _hints(x_ptr, out_ptr, n, BLOCK: tl.constexpr, HINT: tl.constexpr):
    start = tl.multiple_of(tl.program_id(0) * BLOCK, BLOCK)
    r = tl.max_contiguous(start + tl.arange(0, BLOCK), BLOCK)
    if HINT == "evict_last":
        x = tl.load(x_ptr + r, mask=r < n, eviction_policy="evict_last")
    elif HINT == ".cg":
        x = tl.load(x_ptr + r, mask=r < n, cache_modifier=".cg")
    elif HINT == "both":
        x = tl.load(x_ptr + r, mask=r < n, eviction_policy="evict_last", cache_modifier=".cg")
    else:
        x = tl.load(x_ptr + r, mask=r < n)
    tl.store(out_ptr + r, x * 3, mask=r < n)


@construct("tl.multiple_of and tl.max_contiguous")
def _(t: Tools):
    x, out = t.rand(64), t.zeros(64)
    _hints[(4,)](x, out, 64, BLOCK=16, HINT="none")
    return [out]


@construct("a load with eviction_policy='evict_last'")
def _(t: Tools):
    x, out = t.rand(64), t.zeros(64)
    _hints[(4,)](x, out, 64, BLOCK=16, HINT="evict_last")
    return [out]


@construct("a load with cache_modifier='.cg'")
def _(t: Tools):
    x, out = t.rand(64), t.zeros(64)
    _hints[(4,)](x, out, 64, BLOCK=16, HINT=".cg")
    return [out]


@construct("a load with both evict_last and '.cg' (ptxas refuses the pair on the H200)")
def _(t: Tools):
    x, out = t.rand(64), t.zeros(64)
    _hints[(4,)](x, out, 64, BLOCK=16, HINT="both")
    return [out]


@triton.jit
def _pointer_types(x_ptr, out_ptr, N: tl.constexpr):
    r = tl.arange(0, N)
    p = x_ptr.to(tl.pointer_type(tl.int32))  # read float32 storage as int32 words
    tl.store(out_ptr + r, tl.load(p + r))


@construct("a pointer cast to another element type")
def _(t: Tools):
    x, out = t.rand(8), t.zeros(8, dtype=torch.int32)
    _pointer_types[(1,)](x, out, N=8)
    return [out]


@triton.jit
def _atomic_add_int(x_ptr, out_ptr, N: tl.constexpr):
    r = tl.arange(0, N)
    tl.atomic_add(out_ptr + (r % 4), tl.load(x_ptr + tl.program_id(0) * N + r))


@construct("tl.atomic_add of int32 from several programs into shared cells")
def _(t: Tools):
    x, out = t.randint(-100, 100, 8, 16), t.zeros(4, dtype=torch.int32)
    _atomic_add_int[(8,)](x, out, N=16)
    return [out]


@triton.jit
def _atomic_add_float(x_ptr, out_ptr, N: tl.constexpr):
    r = tl.arange(0, N)
    tl.atomic_add(out_ptr + r, tl.load(x_ptr + tl.program_id(0) * N + r))


@construct("tl.atomic_add of float32 values whose sum is exact in any order")
def _(t: Tools):
    x = (t.randint(-64, 64, 8, 16).to(torch.float32) / 4)  # quarters: every partial sum is exact
    out = t.zeros(16)
    _atomic_add_float[(8,)](x, out, N=16)
    return [out]


@triton.jit
def _atomic_max_min(x_ptr, o1, o2, N: tl.constexpr):
    r = tl.arange(0, N)
    x = tl.load(x_ptr + tl.program_id(0) * N + r)
    tl.atomic_max(o1 + r, x)
    tl.atomic_min(o2 + r, x)


@construct("tl.atomic_max and tl.atomic_min of int32 and of float32 (negatives included)")
def _(t: Tools):
    xi = t.randint(-1000, 1000, 6, 8)
    xf = t.rand(6, 8)
    o1, o2 = t.zeros(8, dtype=torch.int32), t.zeros(8, dtype=torch.int32)
    o3, o4 = t.zeros(8) - 100.0, t.zeros(8) + 100.0
    _atomic_max_min[(6,)](xi, o1, o2, N=8)
    _atomic_max_min[(6,)](xf, o3, o4, N=8)
    return [o1, o2, o3, o4]


@triton.jit
def _atomic_returns(out_ptr, old_ptr):
    pid = tl.program_id(0)
    old = tl.atomic_xchg(out_ptr, pid + 1)
    tl.store(old_ptr + pid, (old >= 0).to(tl.int32))
    tl.atomic_cas(out_ptr + 1, 0, 42)


@construct("tl.atomic_xchg and tl.atomic_cas (a value independent of the programs' order)")
def _(t: Tools):
    out, old = t.zeros(2, dtype=torch.int32), t.zeros(4, dtype=torch.int32)
    _atomic_returns[(4,)](out, old)
    return [out[1:], old]


@triton.jit
def _atomic_masked(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    r = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.atomic_add(out_ptr + tl.zeros([BLOCK], dtype=tl.int32), tl.load(x_ptr + r, mask=r < n, other=0), mask=r < n)


@construct("a masked tl.atomic_add into one cell (a global sum)")
def _(t: Tools):
    x, out = t.randint(-100, 100, 50), t.zeros(1, dtype=torch.int32)
    _atomic_masked[(4,)](x, out, 50, BLOCK=16)
    return [out]


@triton.jit
def _block_ptr(x_ptr, out_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    src = tl.make_block_ptr(x_ptr, shape=(M, N), strides=(N, 1), offsets=(0, 0), block_shape=(BM, BN),
                            order=(1, 0))
    dst = tl.make_block_ptr(out_ptr, shape=(M, N), strides=(N, 1), offsets=(0, 0), block_shape=(BM, BN),
                            order=(1, 0))
    for _ in range(0, tl.cdiv(N, BN)):
        tl.store(dst, tl.load(src, boundary_check=(0, 1), padding_option="zero") * 2, boundary_check=(0, 1))
        src = tl.advance(src, (0, BN))
        dst = tl.advance(dst, (0, BN))


@construct("tl.make_block_ptr, tl.advance and boundary_check (removed in triton 3.9)")
def _(t: Tools):
    x, out = t.rand(6, 20), t.zeros(6, 20)
    _block_ptr[(1,)](x, out, 6, 20, BM=8, BN=8)
    return [out]


@triton.jit
def _static_assert(x_ptr, out_ptr, BLOCK: tl.constexpr):
    tl.static_assert(BLOCK % 8 == 0)
    r = tl.arange(0, BLOCK)
    tl.store(out_ptr + r, tl.load(x_ptr + r) - 1)


@construct("tl.static_assert on a constexpr")
def _(t: Tools):
    x, out = t.rand(16), t.zeros(16)
    _static_assert[(1,)](x, out, BLOCK=16)
    return [out]


# --- randomness and odds and ends ---------------------------------------------------------------------------------

@triton.jit
def _philox(out_ptr, out2_ptr, seed, N: tl.constexpr):
    r = tl.arange(0, N)
    tl.store(out_ptr + r, tl.rand(seed, r))
    tl.store(out2_ptr + r, tl.randint(seed, r))


@construct("tl.rand and tl.randint (Philox, from a seed and offsets)")
def _(t: Tools):
    out, out2 = t.zeros(16), t.zeros(16, dtype=torch.int32)
    _philox[(1,)](out, out2, 1234, N=16)
    return [out, out2]


@triton.jit
def _full_zeros(o1, o2, o3, N: tl.constexpr):
    r = tl.arange(0, N)
    tl.store(o1 + r, tl.full([N], 3, tl.int8))
    tl.store(o2 + r, tl.zeros([N], dtype=tl.float16) + 0.1)
    tl.store(o3 + r, tl.zeros_like(r) + 5)


@construct("tl.full, tl.zeros and tl.zeros_like with a literal added")
def _(t: Tools):
    o1, o2, o3 = t.zeros(8, dtype=torch.int8), t.zeros(8, dtype=torch.float16), t.zeros(8, dtype=torch.int32)
    _full_zeros[(1,)](o1, o2, o3, N=8)
    return [o1, o2, o3]


@triton.jit
def _arange_offset(out_ptr, N: tl.constexpr):
    r = tl.arange(8, 8 + N)
    tl.store(out_ptr + tl.arange(0, N), r * r)


@construct("tl.arange not starting at 0")
def _(t: Tools):
    out = t.zeros(8, dtype=torch.int32)
    _arange_offset[(1,)](out, N=8)
    return [out]


@triton.jit
def _ravel_view(x_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr):
    rm, rn = tl.arange(0, M), tl.arange(0, N)
    x = tl.load(x_ptr + rm[:, None] * N + rn[None, :])
    tl.store(out_ptr + tl.arange(0, M * N), tl.ravel(x) + 1)


@construct("tl.ravel")
def _(t: Tools):
    x, out = t.rand(4, 8), t.zeros(32)
    _ravel_view[(1,)](x, out, M=4, N=8)
    return [out]


@triton.jit
def _unsigned_neg(u_ptr, out_ptr, N: tl.constexpr):
    r = tl.arange(0, N)
    u = tl.load(u_ptr + r)
    tl.store(out_ptr + r, -u)


@construct("unary minus of uint8 (wraps)")
def _(t: Tools):
    u, out = t.randint(0, 256, 16, dtype=torch.uint8), t.zeros(16, dtype=torch.uint8)
    _unsigned_neg[(1,)](u, out, N=16)
    return [out]


@triton.jit
def _umulhi(a_ptr, b_ptr, out_ptr, N: tl.constexpr):
    r = tl.arange(0, N)
    tl.store(out_ptr + r, tl.umulhi(tl.load(a_ptr + r), tl.load(b_ptr + r)))


@construct("tl.umulhi of uint32")
def _(t: Tools):
    a = t.randint(0, 2 ** 32, 16, dtype=torch.int64).to(torch.uint32)
    b = t.randint(0, 2 ** 32, 16, dtype=torch.int64).to(torch.uint32)
    out = t.zeros(16, dtype=torch.uint32)
    _umulhi[(1,)](a, b, out, N=16)
    return [out]
