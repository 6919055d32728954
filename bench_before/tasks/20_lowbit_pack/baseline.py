"""The task's math in plain torch (staff code, never graded; this task has no speed test). `torch_math` is what
scripts/bench_references.py times, eager and compiled (max-autotune), against the reference solution."""

import torch


def torch_math(codes: torch.Tensor, words: torch.Tensor, *, bits: int) -> tuple[torch.Tensor, torch.Tensor]:
    codes_per_word = 32 // bits
    shifts = torch.arange(codes_per_word, dtype=torch.int32, device=codes.device) * bits
    # Shifted codes share no bit, so their sum is their OR (a code shifted into bit 31 wraps to a negative int32).
    packed = (codes.reshape(-1, codes_per_word) << shifts).sum(dim=1, dtype=torch.int32)
    unpacked = (words.reshape(-1, 1) >> shifts) & ((1 << bits) - 1)
    return packed.reshape(codes.shape[0], -1), unpacked.reshape(words.shape[0], -1)
