"""Another right answer to task 11, written the way a larger code base would: the autotune configs come from a
function, the kernel calls two @triton.jit helpers, and the wrapper keeps the row layout in a small class of its
own and allocates the outputs in a helper function. It proves that the static policy's allowlists (modules,
attributes: grader/gates/static.py) and the write check (grader/worker/write_check.py) refuse none of these styles: the class's
attributes are the file's own, the buffers are allocated in the file, and the kernel writes every value.
"""

import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice


def _tuning_space(warps=(2, 4, 8)):
    """One config per warp count: the tile is the whole row, so only the launch is tuned."""
    return [triton.Config({}, num_warps=w, num_stages=1) for w in warps]


@triton.jit
def _row_absmax(values):
    return tl.max(tl.abs(values), axis=0)


@triton.jit
def _codes(values, absmax):
    return libdevice.rint(127.0 * values / absmax).to(tl.int8)  # half to even, like torch.round


@triton.autotune(configs=_tuning_space(), key=["n_elements"])
@triton.jit
def _quantize_rowwise(x_ptr, output_ptr, output_maxs, n_elements, BLOCK_SIZE: tl.constexpr, P2: tl.constexpr):
    row = tl.program_id(axis=0)
    cols = tl.arange(0, P2)
    inside = cols < BLOCK_SIZE
    values = tl.load(x_ptr + row * BLOCK_SIZE + cols, mask=inside, other=0.0).to(tl.float32)
    absmax = _row_absmax(values)  # masked lanes are 0: never the maximum
    tl.store(output_ptr + row * BLOCK_SIZE + cols, _codes(values, absmax), mask=inside)
    tl.store(output_maxs + row, absmax.to(tl.float16))


class RowLayout:
    """The shape facts the launch needs, computed once."""

    def __init__(self, x: torch.Tensor):
        self.rows, self.cols = x.shape
        self.padded = triton.next_power_of_2(self.cols)

    def grid(self):
        return (self.rows,)


def _out_buffers(x: torch.Tensor, layout: RowLayout):
    codes = torch.empty((layout.rows, layout.cols), dtype=torch.int8, device=x.device)
    maxs = torch.empty((layout.rows,), dtype=torch.float16, device=x.device)
    return codes, maxs


def quantize_rowwise(x: torch.Tensor):
    layout = RowLayout(x)
    codes, maxs = _out_buffers(x, layout)
    if x.numel() == 0:
        return codes, maxs
    _quantize_rowwise[layout.grid()](x, codes, maxs, x.numel(), BLOCK_SIZE=layout.cols, P2=layout.padded)
    return codes, maxs
