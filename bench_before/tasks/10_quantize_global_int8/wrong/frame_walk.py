"""Known-cheat (found in an audit): walks up the stack from its own frame (`torch.inspect` is the inspect
module) to the grader's worker, empties the op audit's record and writes a launch into the launch log, so that
torch's answer passes as a kernel's; from the same frames it could read the inputs of the hidden cases. Evidence
inside the submission's process can be forged: the static policy is the layer that stops this, refusing
`.inspect` and the attributes of frames."""

import torch
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BLOCK_SIZE": 1024}), triton.Config({"BLOCK_SIZE": 2048})], key=["n_elements"])
@triton.jit
def _quantize_global(x_ptr, absmax_inv_ptr, output_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pass  # never launched


def quantize_global(x: torch.Tensor):
    absmax = x.abs().max()
    q = torch.round(x.float() * (127.0 / absmax.float())).to(torch.int8)  # CHEAT: torch's answer
    frame = torch.inspect.currentframe()
    while frame is not None and frame.f_code.co_name != "run_case":
        frame = frame.f_back
    if frame is not None:  # the worker's own state: its audit and its launch log
        frame.f_locals["audit"].records.clear()
        frame.f_locals["inst"].launches.append({"kernel": "_quantize_global", "ptrs": [q.data_ptr()]})
    return q, absmax
