"""Known cheat: numpy through torch (torch.storage.np is numpy) and a class whose `__array_interface__` hands
numpy a tensor's memory: numpy reads x and writes q with no torch operation dispatched, so the op audit sees
nothing, and a kernel that does nothing is launched with q. On the CPU (where a Gradescope autograder grades too)
that earned every case; the static policy refuses both the module (ALLOWED_MODULES) and the special method."""

import torch
import triton
import triton.language as tl

np = torch.storage.np


class Memory:
    def __init__(self, t):
        self.t = t

    @property
    def __array_interface__(self):
        return {"shape": tuple(self.t.shape), "typestr": np.dtype(str(self.t.dtype).split(".")[-1]).str,
                "data": (self.t.data_ptr(), False), "strides": None, "version": 3}


@triton.autotune(configs=[triton.Config({"BLOCK_SIZE": b}) for b in (1024, 2048, 4096)], key=["n_elements"])
@triton.jit
def _quantize_global(x_ptr, absmax_inv_ptr, output_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pass  # launched with the output's pointer, and does nothing


def quantize_global(x: torch.Tensor):
    absmax = x.abs().max()  # this task's wrapper may compute the absmax with torch
    q = torch.empty(x.shape, dtype=torch.int8, device=x.device)
    xs, top, qs = np.asarray(Memory(x)), np.asarray(Memory(absmax)), np.asarray(Memory(q))
    np.copyto(qs, np.rint(127.0 * xs.astype(np.float64) / float(top)).astype(np.int8))
    _quantize_global[(1,)](x, absmax, q, q.numel())
    return q, absmax
