import torch
import triton
import triton.language as tl


@triton.autotune(
    configs=[
        triton.Config({"BLOCK_M": 64,  "BLOCK_N": 64,  "BLOCK_K": 64},  num_warps=4, num_stages=2),
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 64,  "BLOCK_K": 64},  num_warps=4, num_stages=2),
        triton.Config({"BLOCK_M": 64,  "BLOCK_N": 128, "BLOCK_K": 64},  num_warps=4, num_stages=2),
    ],
    key=["B", "IN", "OUT"],
)
@triton.jit
def _backward_dx_fused_kernel(dy_ptr, wq_ptr, w_scale_ptr, dx_ptr,
                              B, IN, OUT,
                              BLOCK_M: tl.constexpr,
                              BLOCK_N: tl.constexpr,
                              BLOCK_K: tl.constexpr,
                              PER_CHANNEL: tl.constexpr):
    # YOUR CODE HERE
    pass


def backward_dx_int8_fused(dy: torch.Tensor,
                           w_q: torch.Tensor,
                           w_scale: torch.Tensor,
                           *, per_channel: bool = True) -> torch.Tensor:
    """Return dX = dY @ (dequant(W_q))^T, dtype fp16, shape (B, IN)."""
    # YOUR CODE HERE
    raise NotImplementedError
