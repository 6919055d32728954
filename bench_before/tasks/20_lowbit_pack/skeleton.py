import torch
import triton
import triton.language as tl


@triton.jit
def _pack_kernel(codes_ptr, words_ptr, n_words, BITS: tl.constexpr):
    # YOUR CODE HERE (you may add constexpr parameters after BITS, e.g. a block size)
    pass


@triton.jit
def _unpack_kernel(words_ptr, codes_ptr, n_words, BITS: tl.constexpr):
    # YOUR CODE HERE (you may add constexpr parameters after BITS)
    pass


def pack_unpack(codes: torch.Tensor, words: torch.Tensor, *, bits: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Return (pack(codes), unpack(words)): [R, N] codes -> [R, N*bits/32] words; [R2, W] words -> [R2, W*32/bits]."""
    # YOUR CODE HERE
    raise NotImplementedError
