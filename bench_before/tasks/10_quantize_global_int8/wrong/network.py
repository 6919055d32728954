"""Known-cheat: downloads weights over the network through torch.hub (public API), where an answer could come
from. The sandbox has no network: the connection is refused."""

import torch
import triton
import triton.language as tl


@triton.jit
def _quantize_global(x_ptr, absmax_inv_ptr, output_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pass


def quantize_global(x: torch.Tensor):
    # CHEAT: 192.0.2.1 is TEST-NET-1 (never routed): a real cheat would name its own server
    answers = torch.hub.load_state_dict_from_url("http://192.0.2.1/answers.pt", progress=False)
    return answers["q"], answers["absmax"]
