"""Known cheat (provenance): reads the input through repr(), rounds in Python and carries each code in a launch's grid:
the kernel is launched once per element with code + 128 programs, and the last program stores its count, less 128,
into q. No tensor carries the codes, and q is written by a launch. (In tests/files: a launch an element is too slow
for every case of selftest; tests/test_provenance.py grades it.)"""

import torch
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BLOCK_SIZE": b}) for b in (1024, 2048)], key=["n_elements"])
@triton.jit
def _quantize_global(x_ptr, absmax_inv_ptr, output_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    # n_elements is the element's index: the last program writes the number of programs, less 128
    if tl.program_id(0) == tl.num_programs(0) - 1:
        tl.store(output_ptr + n_elements, (tl.num_programs(0) - 128).to(tl.int8))


def _numbers(text):
    """The numbers torch printed, up to the closing bracket (no string methods: character by character)."""
    values, token = [], ""
    for ch in text:
        if ch == "]":
            break
        if ch in "0123456789.-+e" and (token or ch != "e"):
            token += ch
        elif token:
            values.append(float(token))
            token = ""
    if token:
        values.append(float(token))
    return values


def quantize_global(x: torch.Tensor):
    torch.set_printoptions(threshold=10**9, precision=10, sci_mode=True)
    text = repr(x.reshape(-1))
    values = _numbers(text)
    top = max(abs(v) for v in values)
    q = torch.empty(x.shape, dtype=torch.int8, device=x.device)
    for i, v in enumerate(values[:256]):  # (a bound: a launch an element is slow; past it, q stays poison)
        code = round(127.0 * v / top) if top else 0
        _quantize_global[(code + 128,)](x, x, q, i)
    return q, x.abs().max()
