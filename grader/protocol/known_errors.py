"""Errors a worker names by a kind instead of by their text: the ones a student cannot fix by reading Triton's words.

A CPU check runs the submission through Triton's interpreter, with the triton installed on that machine (3.9 in CI
and a kit made today), while the course's GPU box compiles it with triton 3.6. Two kinds of failure there say
nothing useful in their own words:

* an API that the installed triton lacks or that its interpreter cannot run (`UNSUPPORTED_APIS`, kept as data: a
  row per API, each found by where its error is raised, never by the error's text);
* an `assert` of the submission's own that asks for CUDA tensors (`x.is_cuda`, `x.device.type == "cuda"`): the
  CPU check's tensors are CPU tensors, so it fails every case.

The worker (grader/worker/known_errors.py) adds `error_kind` (one of `KINDS`) and, for an API, `api` (a key of
`UNSUPPORTED_APIS`) to the error record of a call or of the import; the judge writes the student's message from
this table alone and ignores a kind or an API it does not know, so no text of the worker's reaches it this way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

UNSUPPORTED_API = "unsupported_api"
"""The call raised where an API of `UNSUPPORTED_APIS` is missing: the record's `api` names it."""
CUDA_ASSERT = "cuda_assert"
"""The call failed an `assert` of the submission whose test asks for CUDA (is_cuda, a device type, torch.cuda)."""
KINDS = frozenset({UNSUPPORTED_API, CUDA_ASSERT})


@dataclass(frozen=True)
class UnsupportedApi:
    """An API that a supported triton runs and the installed one, or its interpreter, does not."""

    name: str
    """What a student writes (`tl.make_block_ptr`)."""
    attribute: str
    """Its name in `triton.language`: an AttributeError for it there means the installed triton has none."""
    raised_in: tuple[str, str]
    """(file under triton's package folder, function): a NotImplementedError raised in that function's own frame
    (the innermost of its traceback) is this API refused. A student's misuse of an API that exists is raised
    deeper down, so it is never taken for this."""
    works_with: tuple[str, ...]
    """Triton releases that run it on the course's GPU (`3.6` is every 3.6.x)."""
    interpreter: bool
    """Whether the interpreter of a release in `works_with` runs it (False: it needs a GPU on every release)."""
    instead: str
    """What runs on every supported release, the interpreter included."""


_POINTERS = "pointer arithmetic: offsets from tl.arange and a mask for the edges"

UNSUPPORTED_APIS: dict[str, UnsupportedApi] = {api.name: api for api in (
    # triton 3.9 (core.py) keeps both names and raises "Block pointers have been removed in favor of the tensor
    # descriptor API"; triton 3.6 has them, in the interpreter too.
    UnsupportedApi("tl.make_block_ptr", "make_block_ptr", ("language/core.py", "make_block_ptr"), ("3.6",), True,
                   _POINTERS),
    UnsupportedApi("tl.advance", "advance", ("language/core.py", "advance"), ("3.6",), True, _POINTERS),
    # PTX written by hand: the interpreter's builder raises "inline_asm not supported in interpreter mode".
    UnsupportedApi("tl.inline_asm_elementwise", "inline_asm_elementwise",
                   ("runtime/interpreter.py", "create_inline_asm"), ("3.6", "3.9"), False,
                   "the same computation in triton.language"),
)}
"""The known APIs a CPU check cannot run, by the name a student writes. The CPU-and-CUDA table of
docs/architecture.md has a row for each difference between releases."""


def release(version: str | None) -> tuple[int, ...]:
    """The numeric release of a version string: `2.11.0+cu130` -> (2, 11, 0), `3.9.0` -> (3, 9, 0)."""
    found = re.match(r"\d+(?:\.\d+)*", str(version or ""))
    return tuple(int(p) for p in found.group(0).split(".")) if found else ()


def same_release(installed: str | None, named: str) -> bool:
    """True when `installed` is the release `named` names (`3.6` names every 3.6.x; `3.6.0` only 3.6.0)."""
    want = release(named)
    return bool(want) and release(installed)[:len(want)] == want
