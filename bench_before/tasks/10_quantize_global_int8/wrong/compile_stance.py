"""Known cheat: a right answer that makes the speed tier's baseline slow.

torch.compiler.set_stance("force_eager") at import makes torch.compile's baseline, which the grader times in this
process, run as eager torch: a speedup of several times against it, for an ordinary kernel. The staff's timing
run of the reference, in a process no submission touched, shows how fast the baseline really is; the speed test
fails when the baseline ran much slower beside the submission (grader/judge/speed.py STAFF_SLACK). The static policy
stops it first (torch.compiler is refused); tests/test_integrity.py grades it with that layer off on CUDA."""

import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice

# THE CHEAT: every torch.compile'd function in this process now runs eagerly, the speed tier's baseline included,
# which makes it several times slower and this file's speedup look large. Public API, and no torch work on x's data
# in the call for the op audit to see; the static policy refuses torch.compiler.
torch.compiler.set_stance("force_eager")


@triton.autotune(
    configs=[
        # 1-D streaming kernel: the block size only sets how many elements one program handles.
        triton.Config({"BLOCK_SIZE": 1024}, num_warps=4),
        triton.Config({"BLOCK_SIZE": 2048}, num_warps=8),
        triton.Config({"BLOCK_SIZE": 4096}, num_warps=8),
    ],
    key=["n_elements"],
)
@triton.jit
def _quantize_global(
    x_ptr,            # *fp16 | *fp32, the input, contiguous
    absmax_inv_ptr,   # *fp32, one element: 1 / max(|x|)
    output_ptr,       # *int8, the codes, same length as x
    n_elements,       # number of elements of x
    BLOCK_SIZE: tl.constexpr,
):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements  # the last block may run past the end of x
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    absmax_inv = tl.load(absmax_inv_ptr)
    # rint rounds half to even, like torch.round.
    q = libdevice.rint(127.0 * x * absmax_inv)
    tl.store(output_ptr + offsets, q.to(tl.int8), mask=mask)


def quantize_global(x: torch.Tensor):
    """Return (Q, absmax): Q = round(127 * x / max|x|) as int8 with x's shape, absmax a 0-dim tensor of x's dtype."""
    assert x.dtype in (torch.float16, torch.float32), f"x must be float16 or float32, got {x.dtype}"
    assert x.is_contiguous(), "x must be contiguous"
    absmax = x.abs().max()
    absmax_inv = (1.0 / absmax.float()).reshape(1)
    output = torch.empty(x.shape, dtype=torch.int8, device=x.device)
    n_elements = x.numel()
    grid = lambda meta: (triton.cdiv(n_elements, meta["BLOCK_SIZE"]),)  # noqa: E731
    _quantize_global[grid](x, absmax_inv, output, n_elements)
    return output, absmax
