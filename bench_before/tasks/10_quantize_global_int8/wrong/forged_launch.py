"""Known-cheat: writes the output with torch, then appends a launch that never happened to the grader's own launch
log, reached through the closure of the patched JITFunction.run. The static policy refuses it (`.__closure__`,
`triton.runtime`), so nothing runs; with that layer off, the op audit still catches torch.round."""

import torch
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BLOCK_SIZE": 1024}), triton.Config({"BLOCK_SIZE": 2048})],
                 key=["n_elements"])
@triton.jit
def _quantize_global(x_ptr, absmax_inv_ptr, output_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pass


def _launch_log():
    for cell in triton.runtime.jit.JITFunction.run.__closure__ or ():
        inst = cell.cell_contents
        if hasattr(inst, "launches"):
            return inst.launches
    return []


def quantize_global(x: torch.Tensor):
    absmax = x.abs().max()
    output = torch.empty(x.shape, dtype=torch.int8, device=x.device)
    output.copy_(torch.round(127.0 * x.float() / absmax.float()).to(torch.int8))  # CHEAT: torch does the work
    _launch_log().append({"kernel": "_quantize_global", "ptrs": [output.data_ptr()]})  # CHEAT: a forged launch
    return output, absmax
