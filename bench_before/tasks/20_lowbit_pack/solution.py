"""Reference solution for task 20: pack low-bit codes into int32 words, and unpack words into codes."""

import torch
import triton
import triton.language as tl


@triton.jit
def _pack_kernel(codes_ptr, words_ptr, n_words, BITS: tl.constexpr, BLOCK_W: tl.constexpr):
    # A program packs BLOCK_W consecutive words. Word w is made of the VPW codes w*VPW .. w*VPW + VPW-1, so the
    # flat code array, seen as [n_words, VPW], gives one word per row.
    VPW: tl.constexpr = 32 // BITS
    offs_w = tl.program_id(0) * BLOCK_W + tl.arange(0, BLOCK_W)
    offs_j = tl.arange(0, VPW)
    mask_w = offs_w < n_words
    codes = tl.load(codes_ptr + offs_w[:, None] * VPW + offs_j[None, :], mask=mask_w[:, None], other=0)
    # Code j goes to bits [j*BITS, (j+1)*BITS). The shifted codes have no bit in common, so their sum is their
    # bitwise OR; the top code may set bit 31, which int32 arithmetic keeps as the sign bit (same bits).
    words = tl.sum(codes << (offs_j[None, :] * BITS), axis=1)
    tl.store(words_ptr + offs_w, words, mask=mask_w)


@triton.jit
def _unpack_kernel(words_ptr, codes_ptr, n_words, BITS: tl.constexpr, BLOCK_W: tl.constexpr):
    VPW: tl.constexpr = 32 // BITS
    QMAX: tl.constexpr = (1 << BITS) - 1
    offs_w = tl.program_id(0) * BLOCK_W + tl.arange(0, BLOCK_W)
    offs_j = tl.arange(0, VPW)
    mask_w = offs_w < n_words
    words = tl.load(words_ptr + offs_w, mask=mask_w, other=0)
    # >> on int32 is arithmetic (copies the sign bit in from the left); the & QMAX drops whatever came in.
    codes = (words[:, None] >> (offs_j[None, :] * BITS)) & QMAX
    tl.store(codes_ptr + offs_w[:, None] * VPW + offs_j[None, :], codes, mask=mask_w[:, None])


def pack_unpack(codes: torch.Tensor, words: torch.Tensor, *, bits: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Return (pack(codes), unpack(words)): [R, N] codes -> [R, N*bits/32] words; [R2, W] words -> [R2, W*32/bits]."""
    assert bits in (1, 2, 4, 8), f"bits must be 1, 2, 4 or 8, got {bits}"
    vpw = 32 // bits
    assert codes.dtype == torch.int32 and words.dtype == torch.int32, "codes and words must be int32"
    assert codes.dim() == 2 and words.dim() == 2, "codes and words must be 2-D"
    assert codes.shape[1] % vpw == 0, f"a row of codes must be a multiple of {vpw} long"
    assert codes.is_contiguous() and words.is_contiguous(), "codes and words must be contiguous"
    BLOCK_W = 128

    packed = torch.empty((codes.shape[0], codes.shape[1] // vpw), dtype=torch.int32, device=codes.device)
    n = packed.numel()
    if n:
        _pack_kernel[(triton.cdiv(n, BLOCK_W),)](codes, packed, n, BITS=bits, BLOCK_W=BLOCK_W)

    unpacked = torch.empty((words.shape[0], words.shape[1] * vpw), dtype=torch.int32, device=words.device)
    n = words.numel()
    if n:
        _unpack_kernel[(triton.cdiv(n, BLOCK_W),)](words, unpacked, n, BITS=bits, BLOCK_W=BLOCK_W)
    return packed, unpacked
