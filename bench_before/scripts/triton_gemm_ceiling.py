"""Triton's own ceiling for task 14: a plain fp16 GEMM, C = A @ B^T, handed B already dequantized.

Task 14's fused kernel does this GEMM's tensor-core work and converts every W tile on top, so on a GPU where this
kernel is no faster than torch.compile (which dequantizes W once and calls cuBLAS), a fused Triton kernel cannot
be either. scripts/bench_references.py times it beside the reference, as the row's "Triton fp16 GEMM" column.

The kernel is written the way Triton's persistent-matmul tutorial writes its fastest Hopper variant: one program
per SM, walking output tiles with a stride of the SM count, and every load and store through a tensor descriptor
(TMA). On the H100 (triton 3.6, 8192^3) that reached 1629-1642 us where the same math written with pointer loads
and one program per tile reached 1917 us at best (7 configs); cuBLAS took 1454-1668 us in those runs (three machines).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

# (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages); the caller keeps the fastest. The first was the fastest at
# 8192^3 and at 2048 x 8192^2 on the H100 (1629 and 406 us); 4 stages of it do not fit in shared memory.
CONFIGS = [(128, 256, 64, 8, 3), (256, 128, 64, 8, 3), (128, 128, 64, 8, 4), (64, 128, 128, 4, 4)]


@triton.jit
def _gemm_persistent_tma(a_ptr, b_ptr, c_ptr, M, N, K,
                         BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                         GROUP_M: tl.constexpr, NUM_SMS: tl.constexpr):
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    # At least one step, so that ptxas does not serialize the tensor-core instructions (task 14's comment, C7515).
    k_tiles = tl.maximum(tl.cdiv(K, BLOCK_K), 1)
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BLOCK_M, BLOCK_K])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[K, 1], block_shape=[BLOCK_N, BLOCK_K])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BLOCK_M, BLOCK_N])
    tiles_per_group = GROUP_M * num_pid_n
    # flatten: the next tile's loads start while this tile's epilogue runs (1642 vs 1664 us at 8192^3).
    for tile in tl.range(tl.program_id(0), num_pid_m * num_pid_n, NUM_SMS, flatten=True):
        first_m = (tile // tiles_per_group) * GROUP_M
        group_m = tl.minimum(num_pid_m - first_m, GROUP_M)
        pid_m = first_m + tile % group_m
        pid_n = (tile % tiles_per_group) // group_m
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k in range(k_tiles):
            a = a_desc.load([pid_m * BLOCK_M, k * BLOCK_K])  # out of bounds reads as 0
            b = b_desc.load([pid_n * BLOCK_N, k * BLOCK_K])
            acc = tl.dot(a, b.T, acc)
        c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(tl.float16))  # out of bounds is not written


def _scratch(size: int, alignment: int, stream) -> torch.Tensor:
    return torch.empty(size, dtype=torch.int8, device="cuda" if torch.cuda.is_available() else "cpu")


def gemm_fp16(a: torch.Tensor, b: torch.Tensor, config: tuple[int, int, int, int, int] = CONFIGS[0],
              num_sms: int | None = None) -> torch.Tensor:
    """C = A @ B^T for fp16 A (M, K) and B (N, K), both contiguous, K a multiple of 8 (TMA's 16-byte rows)."""
    assert a.dtype == b.dtype == torch.float16 and a.is_contiguous() and b.is_contiguous()
    (m, k), n = a.shape, b.shape[0]
    assert b.shape[1] == k and k % 8 == 0 and n % 8 == 0, f"shapes {tuple(a.shape)} and {tuple(b.shape)}"
    if num_sms is None:
        num_sms = torch.cuda.get_device_properties(a.device).multi_processor_count if a.is_cuda else 4
    triton.set_allocator(_scratch)  # device-side descriptors need a little global memory
    c = torch.empty((m, n), dtype=torch.float16, device=a.device)
    block_m, block_n, block_k, warps, stages = config
    _gemm_persistent_tma[(num_sms,)](a, b, c, m, n, k, BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, GROUP_M=8,
                                     NUM_SMS=num_sms, num_warps=warps, num_stages=stages)
    return c
