"""Which known error a submission's exception is (grader/protocol/known_errors.py), read from the exception's
objects and the submission's own source, never from an error's text: an API of `UNSUPPORTED_APIS` refused where
it is raised, or a failed `assert` of the submission that asks for CUDA tensors."""

from __future__ import annotations

import ast
import os
import traceback
import types

from grader.protocol.known_errors import CUDA_ASSERT, UNSUPPORTED_API, UNSUPPORTED_APIS


def _chain(exc: BaseException | None) -> list[BaseException]:
    """The exception and those it was raised from (the interpreter raises InterpreterError from the kernel's)."""
    chain, seen = [], set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        chain.append(exc)
        exc = exc.__cause__ or (None if exc.__suppress_context__ else exc.__context__)
    return chain


def _triton_folder() -> str | None:
    try:
        import triton
    except ImportError:  # pragma: no cover - the worker always has triton
        return None
    return os.path.dirname(os.path.abspath(triton.__file__))


def unsupported_api(exc: BaseException) -> str | None:
    """The name (a key of UNSUPPORTED_APIS) of the API whose absence raised `exc`, or None: a NotImplementedError
    raised in the frame of the function the table names, or an AttributeError for one of the table's names on a
    module of triton.language."""
    folder = _triton_folder()
    for e in _chain(exc):
        if isinstance(e, NotImplementedError) and folder:
            frames = traceback.extract_tb(e.__traceback__)
            if frames:
                last = frames[-1]
                where = os.path.relpath(os.path.abspath(last.filename), folder).replace(os.sep, "/")
                for api in UNSUPPORTED_APIS.values():
                    if (where, last.name) == api.raised_in:
                        return api.name
        if isinstance(e, AttributeError):
            obj = getattr(e, "obj", None)
            if isinstance(obj, types.ModuleType) and obj.__name__.startswith("triton.language"):
                for api in UNSUPPORTED_APIS.values():
                    if getattr(e, "name", None) == api.attribute:
                        return api.name
    return None


def _asks_for_cuda(test: ast.expr) -> bool:
    """Whether an assert's test reads whether tensors are on CUDA: `.is_cuda`, `.is_cpu`, a string "cuda" (or
    "cuda:<n>", as in `x.device.type == "cuda"`), or `torch.cuda` (`torch.cuda.is_available()`)."""
    for node in ast.walk(test):
        if isinstance(node, ast.Attribute) and node.attr in ("is_cuda", "is_cpu"):
            return True
        if isinstance(node, ast.Attribute) and node.attr == "cuda" and isinstance(node.value, ast.Name) \
                and node.value.id == "torch":
            return True
        if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and (node.value == "cuda" or node.value.startswith("cuda:")):
            return True
    return False


def cuda_assert(exc: BaseException, path: str) -> bool:
    """Whether `exc` is an AssertionError raised by an `assert` statement of the submission (`path`) whose test
    asks for CUDA tensors. The statement is found by its line in the submission's own source."""
    for e in _chain(exc):
        if not isinstance(e, AssertionError):
            continue
        frames = traceback.extract_tb(e.__traceback__)
        if not frames or os.path.abspath(frames[-1].filename) != path or not frames[-1].lineno:
            continue
        line = frames[-1].lineno
        try:
            with open(path, encoding="utf-8", errors="replace") as fh:
                tree = ast.parse(fh.read())
        except (OSError, SyntaxError, ValueError):
            return False
        return any(isinstance(node, ast.Assert) and node.lineno <= line <= (node.end_lineno or node.lineno)
                   and _asks_for_cuda(node.test) for node in ast.walk(tree))
    return False


def classify(exc: BaseException, path: str) -> dict:
    """The fields a known error adds to an error record: {"error_kind": ..., "api": ...}; {} for any other."""
    api = unsupported_api(exc)
    if api:
        return {"error_kind": UNSUPPORTED_API, "api": api}
    if cuda_assert(exc, path):
        return {"error_kind": CUDA_ASSERT}
    return {}
