"""The task's math in plain torch (staff code, never graded; this task has no speed test). `torch_math` is what
scripts/bench_references.py times, eager and compiled (max-autotune), against the reference solution."""

import torch
import torch.nn.functional as F


def torch_math(x: torch.Tensor, dy: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    bit = torch.arange(32, dtype=torch.int32, device=x.device)
    n = x.numel()
    positive = F.pad((x.reshape(-1) > 0).to(torch.int32), (0, mask.numel() * 32 - n)).reshape(-1, 32)
    mask_out = (positive << bit).sum(dim=1, dtype=torch.int32)
    keep = ((mask.reshape(-1, 1) >> bit) & 1).reshape(-1)[:dy.numel()].reshape(dy.shape)
    return torch.relu(x), mask_out, torch.where(keep.bool(), dy, torch.zeros_like(dy))
