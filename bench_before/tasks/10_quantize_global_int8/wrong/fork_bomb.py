"""Known-cheat: a fork bomb through torch.multiprocessing (public API). The sandbox limits the worker's processes
and threads, so the fork that passes the limit fails, in this worker alone. (A fuse of 4000 processes keeps this
file from harming a machine where no limit stops it.)"""

import torch
import triton
import triton.language as tl


@triton.jit
def _quantize_global(x_ptr, absmax_inv_ptr, output_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pass


def quantize_global(x: torch.Tensor):
    ctx = torch.multiprocessing.get_context("fork")
    reader, _writer = ctx.Pipe(duplex=False)
    children = []
    for _ in range(4000):  # CHEAT: processes without end (but for the fuse)
        child = ctx.Process(target=reader.recv, daemon=True)  # each child waits on a pipe nobody writes to
        child.start()
        children.append(child)
    raise RuntimeError(f"no limit stopped {len(children)} processes")
