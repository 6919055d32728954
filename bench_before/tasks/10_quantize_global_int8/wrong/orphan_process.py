"""Known-cheat (found in an audit): unpickling calls any function by name (torch.serialization re-exports pickle),
here os.fork, and the child leaves the worker's session (os.setsid) so that the runner's kill of the worker's
process group misses it: it would live on beside the grader, holding CPU and memory. The static policy refuses
`.serialization`; with that layer off (tests/test_integrity.py), the sandbox's PID namespace ends the child with
the worker."""

import torch
import triton
import triton.language as tl

_call = torch.serialization.pickle.loads  # unpickling "os.fork()" and friends: calls by name


@triton.jit
def _quantize_global(x_ptr, absmax_inv_ptr, output_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pass


def quantize_global(x: torch.Tensor):
    if _call(b"cposix\nfork\n)R.") == 0:  # the child
        _call(b"cposix\nsetsid\n)R.")
        _call(b"ctime\nsleep\n(I120\ntR.")
        _call(b"cposix\n_exit\n(I0\ntR.")
    return x, x.abs().max()  # nothing right: the file is here for its child
