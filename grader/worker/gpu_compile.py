"""On the CPU interpreter, does each launched kernel also compile for a GPU?

The interpreter runs Python that Triton's compiler rejects (a lambda inside a kernel, `tl.arange` with a runtime
start), so a kernel could earn full marks on a laptop and nothing on the course's GPU. Every launch the
interpreter runs is therefore also compiled, through Triton's own front end, for CUDA targets (Hopper and
Ampere), with the launch's argument types, its constexprs and its config's num_warps/num_stages. No GPU is
needed. Compilation stops after the TTGIR stage (the GPU-specific layout pass): measured with triton 3.9 on a
CPU machine, 0.04-0.11 s per kernel and target, against 1.3 s down to a cubin. Results are cached per worker by
kernel, types, constexprs and options, so every case of one config costs one compilation.

Runs inside the worker (sandboxed); the judge reads the message from the launch record.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import inspect
import os
import re
import sys

from grader.worker.interpreter import PRISTINE as _PRISTINE
from grader.worker.interpreter import language_snapshot, restore_language, swapped

TARGETS = (("cuda", 90, 32), ("cuda", 80, 32))
"""(backend, compute capability, warp size): an H100 and an A100."""
STAGES = ("ttir", "ttgir")
OPTION_KEYS = ("num_warps", "num_stages", "num_ctas")
_TORCH_TYPES = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "float64": "fp64", "int8": "i8",
                "int16": "i16", "int32": "i32", "int64": "i64", "uint8": "u8", "bool": "i1"}


def _type_of(value) -> str | None:
    """Triton's signature type of a runtime argument, or None for a value that Triton treats as a constant."""
    import torch

    from grader.protocol.guards import dtype_name

    if isinstance(value, torch.Tensor):
        return "*" + _TORCH_TYPES.get(dtype_name(value.dtype), "fp32")
    if isinstance(value, bool):
        return "i1"
    if isinstance(value, int):
        return "i32" if -(2**31) <= value < 2**31 else "i64"
    if isinstance(value, float):
        return "fp32"
    return None


class CompileCheck:
    """One per worker: `check(fn, args, kwargs)` returns None, or the student's message for a launch whose kernel
    does not compile for a GPU target."""

    def __init__(self, originals: dict | None = None, known: list[str] | tuple[str, ...] = ()) -> None:
        self.known = frozenset(known)
        """Digests (`digest`) of keys that an earlier worker of the same job found compiling (WorkerJob
        `compile_passed`): passed without compiling them again."""
        self.compiled = 0
        """How many keys this worker compiled (each for every target)."""
        self.originals = originals or {}
        """{(module, name): function} that the interpreter's patches replaced (grader/worker/main.py): the compiler
        must see the real libdevice functions."""
        self.cache: dict[tuple, str | None] = {}
        self._jit: dict = {}
        """Python function -> its JITFunction (the launched kernels and the jit functions they call)."""
        try:  # imported in the interpreter's mode, as the rest of triton was (gluon asserts it at import)
            import triton.compiler.code_generator  # noqa: F401
        except Exception:  # noqa: BLE001, S110 - the first check reports it
            pass
        self.internal: list[str] = []
        """Failures of the check itself (not of the kernel): in the worker log for staff; the launch passes."""

    def check(self, fn, args: tuple, kwargs: dict) -> str | None:
        try:
            jit = self._jit_of(fn)
            sig, consts, key = {}, {}, [fn.__module__, fn.__qualname__, jit.src]
            names = [p.name for p in jit.params]
            values = dict(zip(names, args))
            values.update({k: v for k, v in kwargs.items() if k in names})
            for i, p in enumerate(jit.params):
                value = values.get(p.name, p.default if p.default is not inspect.Parameter.empty else None)
                kind = None if p.is_constexpr else _type_of(value)
                if kind is None:
                    sig[p.name] = "constexpr"
                    consts[(i,)] = value
                    key.append((p.name, repr(value)))
                else:
                    sig[p.name] = kind
                    key.append((p.name, kind))
            options = {k: kwargs[k] for k in OPTION_KEYS if kwargs.get(k) is not None}
            key.append(tuple(sorted(options.items())))
            key = tuple(key)
        except Exception as exc:  # noqa: BLE001 - the check's own failure is staff business
            self._note(f"gpu compile check skipped: {type(exc).__name__}: {exc}")
            return None
        if key not in self.cache:
            if digest(key) in self.known:
                self.cache[key] = None
            else:
                self.compiled += 1
                with self._compiler_view(fn):
                    self.cache[key] = self._compile(jit, sig, consts, options)
        return self.cache[key]

    def passed(self, limit: int = 512) -> list[str]:
        """Digests of the keys that compiled for every target (at most `limit`): the done STATUS reports them, and
        the job's later workers (its hidden shards, which start after its public ones) skip them."""
        return sorted(digest(k) for k, message in self.cache.items() if message is None)[:limit]

    @contextlib.contextmanager
    def _compiler_view(self, fn):
        """What Triton's compiler must see, put in place for one compilation and undone after it.

        Under the interpreter, every `@triton.jit` function is an InterpretedFunction: triton.language's own
        (tl.sum, tl.max, tl.cdiv...) and the submission's helpers. The code generator would call one as plain
        Python, and that call patches triton.language for the interpreter without undoing it. So: JITFunctions
        in their place, the real libdevice functions (the worker patched the rounding ones), TRITON_INTERPRET off
        (the code generator reads it), and afterwards every attribute of the language's objects as it was."""
        from triton.runtime.interpreter import InterpretedFunction

        holders = [h for h, _ in _PRISTINE]
        snapshot = language_snapshot()
        swaps: list[tuple[object, str, object]] = [(mod, name, f) for (mod, name), f in self.originals.items()]
        # The language as it was when this module was imported, before any kernel ran: the interpreter's calls of
        # jit functions (tl.sum inside a kernel) leave their patches on.
        for holder, attrs in _PRISTINE:
            current = vars(holder)
            swaps += [(holder, name, value) for name, value in attrs.items() if current.get(name) is not value]
        # A rounding function the submission bound by name (`from ...libdevice import rint`, `r = libdevice.rint`)
        # holds the interpreter's patch too: its own globals get the real one back.
        patched = {id(getattr(mod, name)): f for (mod, name), f in self.originals.items()}
        for space in [*holders, fn.__globals__]:
            items = space.items() if isinstance(space, dict) else list(vars(space).items())
            for name, value in list(items):
                if isinstance(value, InterpretedFunction):
                    swaps.append((space, name, self._jit_of(value.fn)))
                elif space is fn.__globals__ and id(value) in patched:
                    swaps.append((space, name, patched[id(value)]))
                elif (wrapped := _member_wrapper_target(value)) is not None:
                    # tl.tensor's methods (x.sum(1), x.max(1), ...) are wrappers around tl.standard's jit
                    # functions, made when triton.language was imported: under the interpreter they call an
                    # InterpretedFunction, which the code generator would run as plain Python. The compiler
                    # sees the method as Triton does outside the interpreter: the JITFunction itself.
                    swaps.append((space, name, self._jit_of(wrapped.fn)))
        interpret = os.environ.get("TRITON_INTERPRET")
        try:
            with swapped(swaps):
                os.environ["TRITON_INTERPRET"] = "0"
                try:
                    yield
                finally:
                    if interpret is None:
                        os.environ.pop("TRITON_INTERPRET", None)
                    else:
                        os.environ["TRITON_INTERPRET"] = interpret
        finally:
            restore_language(snapshot)  # back to the interpreter's state, whatever the compilation patched

    def _jit_of(self, fn):
        """The JITFunction of a Python function, made once per worker (it reads and parses the source)."""
        if fn not in self._jit:
            from triton.runtime.jit import JITFunction

            self._jit[fn] = JITFunction(fn)
        return self._jit[fn]

    def _note(self, text: str) -> None:
        if len(self.internal) < 5:
            print(text, file=sys.stderr, flush=True)
        self.internal.append(text)

    def _compile(self, jit, sig: dict, consts: dict, options: dict) -> str | None:
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource
        from triton.compiler.errors import CompilationError

        for backend_name, arch, warp in TARGETS:
            try:
                src = ASTSource(fn=jit, signature=sig, constexprs=consts)
                target = GPUTarget(backend_name, arch, warp)
                _front_end(src, target, options)
            except CompilationError as exc:
                return _message(exc, jit, arch)
            except Exception as exc:  # noqa: BLE001 - a compiler error that is not a CompilationError
                if type(exc).__module__.startswith("triton") or "PassManager" in str(exc):
                    return _message(exc, jit, arch)
                self._note(f"gpu compile check skipped for sm_{arch}: {type(exc).__name__}: {exc}")
                return None
        return None


def digest(key: tuple) -> str:
    """A key of `CompileCheck.cache` as 64 hex digits (kernel, source, types, constexprs, options)."""
    return hashlib.sha256(repr(key).encode()).hexdigest()


def _member_wrapper_target(value):
    """The InterpretedFunction a tl.tensor method wrapper (triton.language.core._tensor_member_fn) calls, or None."""
    from triton.runtime.interpreter import InterpretedFunction

    cells = getattr(value, "__closure__", None) if callable(value) else None
    found = [c.cell_contents for c in cells or () if isinstance(getattr(c, "cell_contents", None), InterpretedFunction)]
    return found[0] if len(found) == 1 and getattr(value, "__name__", "") == "wrapper" else None


def _front_end(src, target, options: dict) -> None:
    """Triton's compile() up to STAGES, without the cache or the assembler (as triton.compiler.compile does)."""
    from triton._C.libtriton import ir
    from triton.compiler.compiler import make_backend

    backend = make_backend(target)
    opts = backend.parse_options(dict(options))
    stages: dict = {}
    backend.add_stages(stages, opts, src.language)
    context = ir.context()
    ir.load_dialects(context)
    backend.load_dialects(context)
    codegen = backend.get_codegen_implementation(opts)
    module_map = backend.get_module_map()
    make_ir = src.make_ir
    if "target" in inspect.signature(make_ir).parameters:
        module = make_ir(target, opts, codegen, module_map, context)
    else:  # pragma: no cover - older signature
        module = make_ir(opts, codegen, module_map, context)
    metadata: dict = {}
    for name in STAGES:
        module = stages[name](module, metadata)


def _def_line(fn) -> int:
    """The file line of `def` (the compiler counts lines from there; decorators come before it)."""
    try:
        lines, start = inspect.getsourcelines(fn)
    except (OSError, TypeError):
        return 1
    return start + next((i for i, line in enumerate(lines) if line.lstrip().startswith("def ")), 0)


def _message(exc: BaseException, jit, arch: int) -> str:
    text = str(exc).strip()
    node = getattr(exc, "node", None)
    where = ""
    if node is not None and getattr(node, "lineno", None) is not None:
        where = f" (line {_def_line(jit.fn) + node.lineno - 1})"
    head = (f"this kernel runs in the interpreter but does not compile for a GPU (sm_{arch}){where}: "
            f"{type(exc).__name__}")
    hint = _hint(node, text)
    return f"{jit.fn.__name__}: {head}" + (f": {hint}" if hint else "") + f"\n{text[-1200:]}"


DTYPE_NAMES = {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32", "fp64": "float64", "int32": "int32",
               "int64": "int64", "uint32": "uint32", "uint64": "uint64"}


def _hint(node, text: str) -> str:
    """What the compiler's words leave a student to guess, said plainly: a construct Triton's compiler rejects,
    or a libdevice function called on a dtype it has no version for (the compiler says only "(float16)")."""
    if isinstance(node, ast.Lambda):
        return ("a lambda inside a kernel does not compile for a GPU (the interpreter runs it): define the function "
                "with @triton.jit outside the kernel, or write the expression inline")
    last = text.splitlines()[-1].strip() if text else ""
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print"
            and last.endswith("is not string")):
        return ("print() in a kernel compiles for a GPU only with a string first, as in print(\"x\", x) or "
                "tl.device_print(\"x\", x) (the interpreter prints anything); remove it before submitting")
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and re.fullmatch(r"\(triton\.language\.\w+(, triton\.language\.\w+)*,?\)", last)):
        return ""
    takes = libdevice_types(node.func.attr)
    if not takes:
        return ""
    got = ", ".join(part.rsplit(".", 1)[-1] for part in last.strip("(),").split(", "))
    return (f"libdevice.{node.func.attr} has no version for {got}: it takes {' or '.join(takes)} (cast the "
            "argument first, e.g. x.to(tl.float32))")


def libdevice_types(name: str) -> list[str]:
    """The argument dtypes a CUDA libdevice function has versions for, read from Triton's own table (its source
    file: the interpreter's patched functions stand in for some of them in the worker)."""
    try:
        import triton.language.extra.cuda.libdevice as module

        source = open(inspect.getsourcefile(module)).read()  # noqa: SIM115
    except (ImportError, OSError, TypeError):
        return []
    body = re.search(rf"^def {re.escape(name)}\(.*?(?=^def |\Z)", source, re.S | re.M)
    found = []
    for key in re.findall(r"\(\s*(core\.dtype\(\"\w+\"\)(?:\s*,\s*core\.dtype\(\"\w+\"\))*)\s*,?\s*\)\s*:",
                          body.group(0) if body else ""):
        names = [DTYPE_NAMES.get(d, d) for d in re.findall(r'core\.dtype\("(\w+)"\)', key)]
        found.append(names[0] if len(names) == 1 else "(" + ", ".join(names) + ")")
    return list(dict.fromkeys(found))
