"""What the speed tier measures against (staff code, never graded): the task's math in plain torch, compiled by
torch.compile. `torch_math` is also what scripts/bench_references.py times, eager and compiled (max-autotune)."""

import torch


def torch_math(x: torch.Tensor):
    absmax = x.abs().max().float()
    q = torch.round(127.0 * x.float() / torch.clamp(absmax, min=127e-8)).to(torch.int8)
    return q.t().contiguous(), absmax.reshape(1)


# Inductor's default mode (see task 10's baseline.py): a max kernel, then the codes written transposed.
quantize_global_transpose = torch.compile(torch_math, dynamic=False)
