"""Known wrong: the mask is x >= 0."""

import torch
import triton
import triton.language as tl


@triton.jit
def _relu_fwd_kernel(x_ptr, y_ptr, mask_ptr, n, BLOCK_W: tl.constexpr):
    # A program handles BLOCK_W mask words, i.e. the 32 * BLOCK_W elements they cover, seen as [BLOCK_W, 32]:
    # element 32*w + i is bit i of word w.
    offs_w = tl.program_id(0) * BLOCK_W + tl.arange(0, BLOCK_W)
    offs_i = tl.arange(0, 32)
    idx = offs_w[:, None].to(tl.int64) * 32 + offs_i[None, :]
    inside = idx < n
    x = tl.load(x_ptr + idx, mask=inside, other=0.0)
    positive = x > 0
    tl.store(y_ptr + idx, tl.where(positive, x, 0.0), mask=inside)
    words = tl.sum(((x >= 0) & inside).to(tl.int32) << offs_i[None, :], axis=1)  # disjoint bits: the sum is the OR
    n_words = (n + 31) // 32
    tl.store(mask_ptr + offs_w, words, mask=offs_w < n_words)


@triton.jit
def _relu_bwd_kernel(dy_ptr, mask_ptr, dx_ptr, n, BLOCK_W: tl.constexpr):
    offs_w = tl.program_id(0) * BLOCK_W + tl.arange(0, BLOCK_W)
    offs_i = tl.arange(0, 32)
    idx = offs_w[:, None].to(tl.int64) * 32 + offs_i[None, :]
    inside = idx < n
    n_words = (n + 31) // 32
    words = tl.load(mask_ptr + offs_w, mask=offs_w < n_words, other=0)
    keep = ((words[:, None] >> offs_i[None, :]) & 1) != 0
    dy = tl.load(dy_ptr + idx, mask=inside, other=0.0)
    tl.store(dx_ptr + idx, tl.where(keep, dy, 0.0), mask=inside)


def relu_mask(x: torch.Tensor, dy: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Return (relu(x), the packed mask of x > 0, dy where the given packed mask is set and 0 elsewhere)."""
    assert x.is_contiguous() and dy.is_contiguous() and mask.is_contiguous(), "inputs must be contiguous"
    assert mask.dtype == torch.int32 and mask.numel() == triton.cdiv(dy.numel(), 32), \
        f"mask must be int32 with ceil(n / 32) = {triton.cdiv(dy.numel(), 32)} words"
    BLOCK_W = 32
    y = torch.empty_like(x)
    packed = torch.empty(triton.cdiv(x.numel(), 32), dtype=torch.int32, device=x.device)
    if x.numel():
        _relu_fwd_kernel[(triton.cdiv(packed.numel(), BLOCK_W),)](x, y, packed, x.numel(), BLOCK_W=BLOCK_W)
    dx = torch.empty_like(dy)
    if dy.numel():
        _relu_bwd_kernel[(triton.cdiv(mask.numel(), BLOCK_W),)](dy, mask, dx, dy.numel(), BLOCK_W=BLOCK_W)
    return y, packed, dx
