"""What the speed tier measures against (staff code, never graded): the task's math in plain torch, compiled by
torch.compile. `torch_math` is also what scripts/bench_references.py times, eager and compiled (max-autotune)."""

import torch


def torch_math(x: torch.Tensor):
    absmax = x.abs().amax(dim=1)
    q = torch.round(127.0 * x.float() / absmax.float()[:, None]).to(torch.int8)
    return q, absmax.to(torch.float16)


# Inductor's default mode (see task 10's baseline.py): one kernel, a row's max and its codes.
quantize_rowwise = torch.compile(torch_math, dynamic=False)
