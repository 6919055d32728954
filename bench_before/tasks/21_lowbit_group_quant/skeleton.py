import torch
import triton
import triton.language as tl

GROUP = 256


@triton.jit
def _quant_pack_kernel(x_ptr, p_ptr, s_ptr, m_ptr, K, CIN, G, BITS: tl.constexpr):
    # YOUR CODE HERE (you may add constexpr parameters after BITS)
    pass


@triton.jit
def _dequant_unpack_kernel(p_ptr, s_ptr, m_ptr, y_ptr, K, CIN, G, BITS: tl.constexpr):
    # YOUR CODE HERE (you may add constexpr parameters after BITS)
    pass


def group_quant(x: torch.Tensor, p: torch.Tensor, s: torch.Tensor, m: torch.Tensor, *,
                bits: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Return (P, S, M) of x, and the dequantized [K, CIN] activation that (p, s, m) describe."""
    # YOUR CODE HERE
    raise NotImplementedError
