"""Known-cheat: computes Y with torch in float64 (exact), then launches the required autotuned kernel as a copy
into the output. The op audit catches the matmul and the scaling (torch.mm, torch.mul, torch.add on Y's data)."""

import torch
import triton
import triton.language as tl


@triton.autotune(
    configs=[
        triton.Config({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32}),
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 32}),
        triton.Config({"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 32}),
    ],
    key=["B", "IN", "OUT"],
)
@triton.jit
def _forward_int8_fused_kernel(x_q_ptr, x_scale_ptr, w_q_ptr, w_scale_ptr, b_ptr, y_ptr, B, IN, OUT,
                               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                               PER_CHANNEL: tl.constexpr):
    # x_q_ptr here holds Y as torch computed it: the "kernel" is a copy
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (offs_m[:, None] < B) & (offs_n[None, :] < OUT)
    ptrs = offs_m[:, None] * OUT + offs_n[None, :]
    tl.store(y_ptr + ptrs, tl.load(x_q_ptr + ptrs, mask=mask), mask=mask)


def matmul_int8_fused(x_q, x_scale, w_q, w_scale, bias=None, *, per_channel=True):
    B, IN = x_q.shape
    OUT = w_q.shape[1]
    # CHEAT: torch does the work
    y_ref = (x_q.double() @ w_q.double()) * (x_scale.double() * w_scale.double().reshape(1, -1))
    if bias is not None:
        y_ref = y_ref + bias.double()
    y_ref = y_ref.to(torch.float16)
    y = torch.empty((B, OUT), dtype=torch.float16, device=x_q.device)
    grid = lambda meta: (triton.cdiv(B, meta["BLOCK_M"]), triton.cdiv(OUT, meta["BLOCK_N"]))  # noqa: E731
    _forward_int8_fused_kernel[grid](y_ref, x_scale, w_q, w_scale, y, y, B, IN, OUT, PER_CHANNEL=per_channel)
    return y
