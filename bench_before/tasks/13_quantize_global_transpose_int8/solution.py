"""Reference solution for task 13: global symmetric INT8 quantization, stored transposed."""

import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice


@triton.autotune(
    configs=[
        # 2-D tiles of A. The small tile makes more programs than GROUP_M rows of tiles, so the grouped
        # ordering (and its short last group) is exercised even on modest shapes.
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 128, "GROUP_M": 8}, num_warps=4),
        triton.Config({"BLOCK_M": 64, "BLOCK_N": 128, "GROUP_M": 8}, num_warps=4, num_stages=2),
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 64, "GROUP_M": 8}, num_warps=4, num_stages=2),
        triton.Config({"BLOCK_M": 32, "BLOCK_N": 64, "GROUP_M": 4}, num_warps=2, num_stages=1),
    ],
    key=["M", "N"],
)
@triton.jit
def _quantize_global_transpose(
    A,                # *fp16 | *fp32, the input X[M, N], any strides
    absmax_inv_ptr,   # *fp32, one element: 1 / max(absmax, 127e-8)
    B,                # *int8, the output Q^T[N, M]
    stride_am, stride_an,  # element strides of A: X[m, n] lives at A + m * stride_am + n * stride_an
    stride_bn, stride_bm,  # element strides of B: Q^T[n, m] lives at B + n * stride_bn + m * stride_bm
    M, N,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    GROUP_M: tl.constexpr,
):
    # Grouped ordering: consecutive programs walk down a group of GROUP_M tile-rows before moving to the next
    # tile-column, so the tiles that run together touch nearby rows of A and nearby columns of B (better L2 reuse).
    # The groups run in reverse order: the first pass (_absmax_2d) read the last rows of A last, and some of them
    # are still in L2 (50 MB on the H100), so start there (8192 x 8192 fp16: 128.8 us in order, 125.4 reversed).
    pid = tl.num_programs(axis=0) - 1 - tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = tl.minimum(num_pid_m - first_pid_m, GROUP_M)  # the last group may be shorter
    pid_m = first_pid_m + (pid % num_pid_in_group) % group_size_m
    pid_n = (pid % num_pid_in_group) // group_size_m

    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)  # rows of X handled by this tile
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)  # columns of X handled by this tile
    # Edge tiles hang over the last row and/or column: mask both edges, on the load and on the store.
    mask = (rm[:, None] < M) & (rn[None, :] < N)

    a = tl.load(A + rm[:, None] * stride_am + rn[None, :] * stride_an, mask=mask, other=0.0).to(tl.float32)
    absmax_inv = tl.load(absmax_inv_ptr)
    # rint rounds half to even, like torch.round.
    q = libdevice.rint(127.0 * a * absmax_inv)
    # Element (m, n) of the tile goes to Q^T[n, m]: the same tile, addressed with B's strides swapped.
    tl.store(B + rn[None, :] * stride_bn + rm[:, None] * stride_bm, q.to(tl.int8), mask=mask)


@triton.jit
def _absmax_2d(
    A,                # *fp16 | *fp32, the input X[M, N], any strides
    state_ptr,        # *int32, two elements, zero at the start: [programs finished, max(|X|) as fp32 bits]
    absmax_inv_ptr,   # *fp32, one element: 1 / max(absmax, 127e-8), written by the last program to finish
    absmax_out_ptr,   # *fp32, one element: max(|X|), the second output, written by the last program
    stride_am, stride_an,
    M, N,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    FLAT: tl.constexpr,  # X is contiguous: read its M * N values as one run, ignoring rows
):
    # Each program strides over the tiles (tile pid, pid + n_programs, ...), keeping an element-wise running max
    # of |X|, then makes one atomic: a few hundred atomics on one address instead of one per tile.
    pid = tl.program_id(axis=0)
    n_programs = tl.num_programs(axis=0)
    tiles_n = tl.cdiv(N, BLOCK_N)
    n_tiles = tl.cdiv(M * N, BLOCK_M * BLOCK_N) if FLAT else tl.cdiv(M, BLOCK_M) * tiles_n
    running = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    # tl.range's num_stages prefetches the next tiles while this one is reduced (as in task 10's reference).
    for tile in tl.range(pid, n_tiles, n_programs, num_stages=4):
        if FLAT:
            # Tile t holds values t * BLOCK_M * BLOCK_N onwards. Why: with an odd N (8193), a row starts at an odd
            # element, so the loads of a row-wise tile cannot be 16-byte vectors; runs of the flat buffer can
            # (8195 x 8193 fp16 on the H100: 172.7 -> 167.3 us a call; 8192 x 8192 unchanged, 124 us).
            offs = tile * (BLOCK_M * BLOCK_N) + tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
            a = tl.load(A + offs, mask=offs < M * N, other=0.0)
        else:
            rm = (tile // tiles_n) * BLOCK_M + tl.arange(0, BLOCK_M)
            rn = (tile % tiles_n) * BLOCK_N + tl.arange(0, BLOCK_N)
            mask = (rm[:, None] < M) & (rn[None, :] < N)
            a = tl.load(A + rm[:, None] * stride_am + rn[None, :] * stride_an, mask=mask, other=0.0)
        running = tl.maximum(running, tl.abs(a.to(tl.float32)))
    # |X| >= 0, and non-negative floats order like their bits as integers: an integer atomic max is a float one.
    max_ptr = state_ptr + 1
    tl.atomic_max(max_ptr, tl.max(tl.max(running, axis=1), axis=0).to(tl.int32, bitcast=True))
    # Atomics are ordered (acquire-release): the program that counts last sees every other program's max.
    if tl.atomic_add(state_ptr, 1) == n_programs - 1:
        # Take the final max and leave both words zero again, ready for the next call (see _zeroed_state).
        absmax = tl.atomic_xchg(max_ptr, 0).to(tl.float32, bitcast=True)
        tl.atomic_xchg(state_ptr, 0)
        tl.store(absmax_inv_ptr, 1.0 / tl.maximum(absmax, 127e-8))  # an all-zero X must not divide by zero
        tl.store(absmax_out_ptr, absmax)


_STATE: dict = {}  # (device, stream) -> _absmax_2d's two int32 words, zero between calls


def _zeroed_state(device: torch.device) -> torch.Tensor:
    """_absmax_2d's state, kept from call to call: the kernel's last program zeroes it again, so only the first
    call on a device and stream pays for a memset. A memset of its own each call was one more launch ahead of the
    kernels, and the GPU idled while the host then issued _absmax_2d (the speed test times the GPU from the first
    launch to the last). Calls on one stream run one after another, so they never share it at the same time."""
    stream = torch.cuda.current_stream(device).cuda_stream if device.type == "cuda" else 0
    state = _STATE.get((device, stream))
    if state is None:
        state = _STATE[(device, stream)] = torch.zeros(2, dtype=torch.int32, device=device)
    return state


def quantize_global_transpose(x: torch.Tensor):
    """Return (q_t, absmax): q_t = round(127 * x / max(absmax, 127e-8)).T as int8 [N, M], absmax = max|x| as fp32[1]."""
    assert x.dim() == 2, f"x must be 2-D [M, N], got shape {tuple(x.shape)}"
    assert x.dtype in (torch.float16, torch.float32), f"x must be float16 or float32, got {x.dtype}"
    M, N = x.shape
    # Strides are passed to the kernels, so x may be a view (transposed, sliced): no .contiguous() copy.
    output = torch.empty((N, M), dtype=torch.int8, device=x.device)
    state = _zeroed_state(x.device)
    absmax_inv = torch.empty(1, dtype=torch.float32, device=x.device)
    absmax = torch.empty(1, dtype=torch.float32, device=x.device)
    # The max in a Triton kernel, not torch's x.abs().max(), which also writes and reads a temporary |x|
    # (236 us of a 8192 x 8192 fp16 call on the H100, against 129 us for torch.compile). Tiles of 32 x 256
    # follow whichever dimension is contiguous well enough; 2 programs per SM, each prefetching, fill the GPU.
    block_m, block_n = 32, 256
    programs = triton.cdiv(M, block_m) * triton.cdiv(N, block_n)
    if x.is_cuda:
        programs = min(programs, 2 * torch.cuda.get_device_properties(x.device).multi_processor_count)
    _absmax_2d[(max(programs, 1),)](x, state, absmax_inv, absmax, x.stride(0), x.stride(1), M, N,
                                   BLOCK_M=block_m, BLOCK_N=block_n, FLAT=x.is_contiguous(), num_warps=8)
    grid = lambda meta: (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),)  # noqa: E731
    _quantize_global_transpose[grid](
        x, absmax_inv, output,
        x.stride(0), x.stride(1),
        output.stride(0), output.stride(1),
        M, N,
    )
    return output, absmax  # the original absmax, not the floored divisor
