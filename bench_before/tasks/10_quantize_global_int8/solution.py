"""Reference solution for task 10: global symmetric INT8 quantization."""

import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice


@triton.autotune(
    configs=[
        # 1-D streaming kernel: the block size only sets how many elements one program handles.
        triton.Config({"BLOCK_SIZE": 1024}, num_warps=4),
        triton.Config({"BLOCK_SIZE": 2048}, num_warps=8),
        triton.Config({"BLOCK_SIZE": 4096}, num_warps=8),
    ],
    key=["n_elements"],
)
@triton.jit
def _quantize_global(
    x_ptr,            # *fp16 | *fp32, the input, contiguous
    absmax_inv_ptr,   # *fp32, one element: 1 / max(|x|)
    output_ptr,       # *int8, the codes, same length as x
    n_elements,       # number of elements of x
    BLOCK_SIZE: tl.constexpr,
):
    # Blocks in reverse order: the first pass (_absmax) read the end of x last, and some of it is still in L2
    # (50 MB on the H100), so start there (8192 x 8192 fp16: 123.7 us in order, 121-123 us reversed).
    pid = tl.num_programs(axis=0) - 1 - tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements  # the last block may run past the end of x
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    absmax_inv = tl.load(absmax_inv_ptr)
    # rint rounds half to even, like torch.round.
    q = libdevice.rint(127.0 * x * absmax_inv)
    tl.store(output_ptr + offsets, q.to(tl.int8), mask=mask)


@triton.jit
def _absmax(
    x_ptr,            # *fp16 | *fp32, the input, contiguous
    state_ptr,        # *int32, two elements, zero at the start: [programs finished, max(|x|) as fp32 bits]
    absmax_inv_ptr,   # *fp32, one element: 1 / max(|x|), written by the last program to finish
    absmax_out_ptr,   # *x.dtype, one element: max(|x|), the second output, written by the last program
    n_elements,
    BLOCK_SIZE: tl.constexpr,
):
    # Each program strides over the blocks (block pid, pid + n_programs, ...) and keeps an element-wise running max
    # of |x|, so it reduces across lanes once and makes one atomic at the end: a few hundred atomics on one
    # address instead of one per block (8192 at 8192 x 8192 with 8192-element blocks).
    pid = tl.program_id(axis=0)
    n_programs = tl.num_programs(axis=0)
    running = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    # tl.range's num_stages prefetches the next blocks while this one is reduced (56.8 us against 58.9 us for the
    # plain loop, 8192 x 8192 fp16 on the H100; best of 144 variants of grid, block, stages and warps).
    for start in tl.range(pid * BLOCK_SIZE, n_elements, n_programs * BLOCK_SIZE, num_stages=4):
        offsets = start + tl.arange(0, BLOCK_SIZE)
        x = tl.load(x_ptr + offsets, mask=offsets < n_elements, other=0.0).to(tl.float32)
        running = tl.maximum(running, tl.abs(x))
    # |x| >= 0, and non-negative floats order like their bits as integers: an integer atomic max is a float one.
    max_ptr = state_ptr + 1
    tl.atomic_max(max_ptr, tl.max(running, axis=0).to(tl.int32, bitcast=True))
    # Atomics are ordered (acquire-release): the program that counts last sees every other program's max. It
    # writes both results, so no torch op sits between the two launches or after them.
    if tl.atomic_add(state_ptr, 1) == n_programs - 1:
        # Take the final max and leave both words zero again, ready for the next call (see _zeroed_state).
        absmax = tl.atomic_xchg(max_ptr, 0).to(tl.float32, bitcast=True)
        tl.atomic_xchg(state_ptr, 0)
        tl.store(absmax_inv_ptr, 1.0 / absmax)
        tl.store(absmax_out_ptr, absmax.to(absmax_out_ptr.dtype.element_ty))


_STATE: dict = {}  # (device, stream) -> _absmax's two int32 words, zero between calls


def _zeroed_state(device: torch.device) -> torch.Tensor:
    """_absmax's state, kept from call to call: the kernel's last program zeroes it again, so only the first call
    on a device and stream pays for a memset. A memset of its own each call was one more launch ahead of the
    kernels, and the GPU idled while the host then issued _absmax (the speed test times the GPU from the first
    launch to the last). Calls on one stream run one after another, so they never share it at the same time."""
    stream = torch.cuda.current_stream(device).cuda_stream if device.type == "cuda" else 0
    state = _STATE.get((device, stream))
    if state is None:
        state = _STATE[(device, stream)] = torch.zeros(2, dtype=torch.int32, device=device)
    return state


def quantize_global(x: torch.Tensor):
    """Return (Q, absmax): Q = round(127 * x / max|x|) as int8 with x's shape, absmax a 0-dim tensor of x's dtype."""
    assert x.dtype in (torch.float16, torch.float32), f"x must be float16 or float32, got {x.dtype}"
    assert x.is_contiguous(), "x must be contiguous"
    n_elements = x.numel()
    output = torch.empty(x.shape, dtype=torch.int8, device=x.device)
    absmax = torch.empty((), dtype=x.dtype, device=x.device)
    absmax_inv = torch.empty(1, dtype=torch.float32, device=x.device)
    state = _zeroed_state(x.device)
    # Reading x to find its max is half of this task's memory traffic: torch's x.abs().max() writes and reads a
    # temporary |x| as well (229 us of a 8192 x 8192 fp16 call on the H100, against 125 us for torch.compile).
    # 2 programs per SM, each with 16 KiB loads in flight several blocks ahead (tl.range below).
    block = 8192
    programs = triton.cdiv(n_elements, block)
    if x.is_cuda:
        programs = min(programs, 2 * torch.cuda.get_device_properties(x.device).multi_processor_count)
    _absmax[(max(programs, 1),)](x, state, absmax_inv, absmax, n_elements, BLOCK_SIZE=block, num_warps=4)
    grid = lambda meta: (triton.cdiv(n_elements, meta["BLOCK_SIZE"]),)  # noqa: E731
    _quantize_global[grid](x, absmax_inv, output, n_elements)
    return output, absmax
