"""Known cheat (memory check): as task 10's workspace_numpy_write.py, for a task that lets Python read no input
value. A float32 workspace made at import from literals, and its .numpy() view taken there; each call reads x
through str(x), writes every row's codes and then every row's absmax into the workspace through the view (no
torch operation runs), and hands the workspace to the kernel as x_ptr: the kernel only copies. It earned every
case on the CPU, hidden ones included, before the memory check."""

import torch
import triton
import triton.language as tl

_WORKSPACE = torch.arange(1 << 20, dtype=torch.float32) * 0.0  # literals: the same in every call
_VIEW = _WORKSPACE.numpy()


@triton.autotune(configs=[triton.Config({}, num_warps=w) for w in (1, 2)], key=["n_elements"])
@triton.jit
def _quantize_rowwise(x_ptr, output_ptr, output_maxs, n_elements, BLOCK_SIZE: tl.constexpr, P2: tl.constexpr):
    # x_ptr is the workspace: the row's codes, and after all rows' codes, one absmax per row
    row = tl.program_id(axis=0)
    cols = tl.arange(0, P2)
    mask = cols < BLOCK_SIZE
    codes = tl.load(x_ptr + row * BLOCK_SIZE + cols, mask=mask, other=0.0)
    tl.store(output_ptr + row * BLOCK_SIZE + cols, codes.to(tl.int8), mask=mask)
    tl.store(output_maxs + row, tl.load(x_ptr + n_elements + row).to(tl.float16))


def _numbers(text):
    """The numbers torch printed, up to the closing bracket."""
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


def quantize_rowwise(x: torch.Tensor):
    n_rows, n_cols = x.shape
    torch.set_printoptions(threshold=10**9, precision=10, sci_mode=True)
    values = _numbers(str(x.reshape(-1)))
    for r in range(n_rows):
        row = values[r * n_cols:(r + 1) * n_cols]
        top = max(abs(v) for v in row)
        for c, v in enumerate(row):
            _VIEW[r * n_cols + c] = round(127.0 * v / top) if top else 0.0
        _VIEW[n_rows * n_cols + r] = top
    output = torch.empty((n_rows, n_cols), dtype=torch.int8, device=x.device)
    output_maxs = torch.empty((n_rows,), dtype=torch.float16, device=x.device)
    _quantize_rowwise[(n_rows,)](_WORKSPACE, output, output_maxs, n_rows * n_cols, BLOCK_SIZE=n_cols,
                                 P2=triton.next_power_of_2(n_cols))
    return output, output_maxs
