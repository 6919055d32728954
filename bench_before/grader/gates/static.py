"""Static checks on a submission's source: nothing is imported or executed here.

* imports: imports outside the whitelist, and what only an attack needs (a homework kernel never does any of it),
  each refused with a 'FILE:LINE: ... is not allowed (why)' message; the policy tables below list it all:
  - every `import` / `from ... import` names an allowed module (the task's list and config.yaml's
    always_allowed_imports); `from torch import *` and `from triton... import *` are refused, since the names
    they bind cannot be resolved;
  - the names in REFUSED_NAMES (getattr, open, exec, __import__, __builtins__, ...) wherever they appear, so that
    an alias such as `g = getattr` is caught too;
  - dunder attributes (`x.__closure__`, `x.__class__`, ...), also as keyword patterns of a `case C(__x__=...)`;
  - defining special methods other than DUNDER_DEFS_ALLOWED (`__torch_function__`, `__array_interface__`, ...);
  - private attributes (`torch._C`, `x._base`), except on `self` and `cls`; these two names may then be bound
    only as a method's first parameter (else `self = torch` would reach `torch._C` through `self._C`);
  - the attributes in FLAGGED_ATTRS (`torch.os`, `x.inspect`, `tb.tb_frame`, `torch.from_file`, ...);
  - the internal parts of torch and triton in REFUSED_PREFIXES, by full dotted name after resolving import
    aliases (`import triton.language as tl`, `from triton import runtime`, and plain `t = torch`), less the
    ALLOWED_INTERNALS that real kernels use (the SM count, the current device and target);
  - an allowlist of modules (ALLOWED_MODULES): a chain that starts at an imported module passes only through
    those (torch, torch.cuda, torch.nn.functional, triton, triton.language and libdevice, math, ...), so a module
    that torch or triton re-exports (`torch.functional.operator`, `torch.storage.np`) is refused whatever its
    name, where a denylist had to name each one;
  - an allowlist of attributes (ALLOWED_ATTRS): on objects that are not modules (tensors, Triton values, configs,
    device properties, Python's own types), only the names a wrapper or a kernel needs, and those the file
    defines itself (its classes' methods and fields, `self.x = ...`): `x.untyped_storage()`, `x.apply_(f)`,
    `kernel.fn` are refused;
  - assigning to (or deleting) an attribute of an imported module (`torch.empty = ...`).
  What a static check cannot see (a module passed around as a value, then used through a parameter) is left to
  the sandbox, the runtime op audit and the write check.
* signatures: the required functions and kernels are defined at the top level with the skeleton's parameters.
* autotune decorators: where each kernel's `@triton.autotune` sits (its config count is read in the worker).
"""

from __future__ import annotations

import ast
import builtins
import importlib
import inspect
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from grader.config import TaskSpec

_REACH_AROUND = "reads or writes attributes by a computed name, around this check"
_NAMESPACE = "hands out a namespace as a dict, around this check"
_RUNS_CODE = "runs code that this check never sees"
_IMPORTS = "imports modules around the import whitelist"
REFUSED_NAMES: dict[str, str] = {
    "getattr": _REACH_AROUND,
    "setattr": _REACH_AROUND,
    "delattr": _REACH_AROUND,
    "vars": _NAMESPACE,
    "globals": _NAMESPACE,
    "locals": _NAMESPACE,
    "open": "reads and writes files",
    "compile": _RUNS_CODE,
    "exec": _RUNS_CODE,
    "eval": _RUNS_CODE,
    "breakpoint": "starts a debugger, which runs what it reads",
    "__import__": _IMPORTS,
    "importlib": _IMPORTS,
    "__builtins__": "the builtins module hands out everything this check refuses",
    "__loader__": "the module's loader reads files and loads modules",
    "__spec__": "the module's spec hands out its loader, which reads files and loads modules",
}
"""Names refused wherever they appear as a name (called, aliased, passed on), with why. The builtins among them
reach around this check, read files or run unseen code; the dunder names hand out the import machinery. The name
`__name__` stays allowed (`if __name__ == "__main__":`)."""

DUNDER_WHY = "dunder attributes reach the interpreter's internals"
"""Every attribute `x.__something__` is refused (`__closure__`, `__globals__`, `__dict__`, `__class__`, ...)."""

DUNDER_DEFS_ALLOWED = ("__init__", "__post_init__", "__repr__", "__str__", "__call__", "__len__", "__getitem__",
                       "__iter__", "__enter__", "__exit__", "__eq__", "__hash__")
"""Special methods a submission may define: what a small class of its own needs (a launcher called like a function,
indexed like a kernel, used as a context). Any other dunder name defined
as a function, method or property (`__torch_function__`, `__torch_dispatch__`, `__array_interface__`,
`__array__`, a module-level `__getattr__`) is a hook that torch, numpy or Python calls behind the submission's
back: around the op audit, or handing a tensor's memory to code that never dispatches a torch operation."""
DUNDER_DEF_WHY = "a special method that torch, numpy or Python calls on their own: a hook around the op audit"

_BUILTINS = frozenset(dir(builtins))

PRIVATE_EXEMPT = ("self", "cls")
"""Private attributes (`x._y`) are refused except on these names, which a method's own state goes through."""

FLAGGED_ATTRS: dict[str, str] = {
    "os": "reaches the os module, which the import whitelist keeps out",
    "sys": "reaches the sys module, which the import whitelist keeps out",
    "subprocess": "reaches the subprocess module, which the import whitelist keeps out",
    "builtins": "reaches the builtins module, which hands out everything this check refuses",
    "ctypes": "reaches ctypes, which reads and writes any memory",
    "importlib": "reaches importlib, " + _IMPORTS,
}
_FRAMES = "reaches the interpreter's stack frames: the grader's own state and data"
_THREADS = "runs work in another thread or process, where the op audit does not see it"
_FILES = "reads or writes files"
_CODE = "loads or runs code that this check never sees"
_NET = "opens network connections"
FLAGGED_ATTRS.update({name: why for names, why in [
    (("inspect", "traceback", "gc", "f_back", "f_locals", "f_globals", "f_builtins", "f_code", "tb_frame",
      "tb_next", "gi_frame", "cr_frame", "ag_frame", "faulthandler"), _FRAMES),
    (("threading", "multiprocessing", "concurrent", "asyncio", "pty", "signal", "resource", "posix"), _THREADS),
    (("io", "pathlib", "Path", "glob", "shutil", "tempfile", "mmap", "linecache", "tokenize", "codecs",
      "fileinput", "logging", "from_file", "serialization"), _FILES),
    (("pickle", "marshal", "copyreg", "runpy", "pkgutil", "zipimport", "atexit", "hub"), _CODE),
    (("socket", "ssl", "http", "urllib"), _NET),
] for name in names})
"""Attributes refused on any object: modules that the whitelist keeps out but others re-export (`torch.os`,
`torch.inspect`, `torch.threading`, `torch.serialization.pickle`), the attributes of stack frames, and torch's own
APIs that read files or load code (`torch.from_file`, `torch.hub`, `torch.serialization`). A homework kernel's
wrapper needs none of them; each was the way in of a cheat (tasks/10_quantize_global_int8/wrong/)."""

_TRITON_WHY = ("Triton's internals; the SM count is available through "
               "triton.runtime.driver.active.utils.get_device_properties")
REFUSED_PREFIXES: dict[str, str] = {
    "torch.os": "the os module, which the import whitelist keeps out",
    "torch.sys": "the sys module, which the import whitelist keeps out",
    "torch.ops": "calls operators by name, around the op audit",
    "torch.library": "defines and registers operators",
    "torch.compile": "generates kernels instead of the submission's own",
    "torch.compiler": "generates kernels instead of the submission's own, and loads compiled artifacts",
    "torch.jit": "compiles and loads TorchScript",
    "torch.fx": "rewrites and generates code",
    "torch.overrides": "intercepts every torch function",
    "torch.package": "loads packaged code",
    "torch.classes": "reaches C++ classes by name",
    "torch.utils.cpp_extension": "builds and loads C++ and CUDA code",
    "torch.load": "unpickles files, which can run code",
    "torch.save": "writes files",
    "torch.utils.data": "its loaders run work in other processes, where the op audit does not see it",
    "torch.utils.collect_env": "runs programs",
    "triton.runtime": _TRITON_WHY,
    "triton.compiler": _TRITON_WHY,
    "triton.backends": _TRITON_WHY,
    "triton.knobs": _TRITON_WHY,
    "triton.tools": _TRITON_WHY,
}
"""Internal parts of torch and triton, refused with why, by full dotted name (a name under one of these, segment by
segment: `torch.load` refuses `torch.load(...)`, not `torch.loadtxt`). Names resolve through import aliases and
plain assignments of a module (`t = torch`). `torch.compiler` is `torch.compile`'s module (it also loads compiled
artifacts). What ALLOWED_MODULES leaves out (torch.distributed, triton.testing, ...) is refused by the allowlist."""

ALLOWED_INTERNALS: tuple[str, ...] = (
    "triton.runtime.driver.active.utils.get_device_properties",  # ["multiprocessor_count"], ["max_shared_mem"]
    "triton.runtime.driver.active.get_current_device",
    "triton.runtime.driver.active.get_current_target",
    "triton.runtime.driver.active.get_active_torch_device",  # as Triton's tutorials write it
    "triton.testing.do_bench",  # a wrapper that times its own configs (triton.testing also runs programs)
)
"""Exact names under REFUSED_PREFIXES, or in modules outside ALLOWED_MODULES, that real kernels use (the SM count
and shared memory for persistent kernels, the current device and target, Triton's benchmark function), checked
before the refusal. Only the whole name passes: the chain leading to it (`triton.runtime.driver.active` alone)
or anything past it (other than calling it) is refused."""

ALLOWED_MODULES: dict[str, str] = {
    "torch": "tensors, dtypes and torch's functions (what they compute, the op audit judges)",
    "torch.cuda": "the current stream and device, device properties",
    "torch.nn": "only on the way to torch.nn.functional",
    "torch.nn.functional": "functions on tensors (the op audit judges them)",
    "triton": "jit, autotune, Config, cdiv, next_power_of_2, heuristics",
    "triton.language": "the kernel language",
    "triton.language.math": "the kernel language's math functions",
    "triton.language.extra": "on the way to libdevice",
    "triton.language.extra.libdevice": "libdevice's functions (rint, ...)",
    "triton.language.extra.cuda": "on the way to CUDA's libdevice",
    "triton.language.extra.cuda.libdevice": "libdevice's functions (rint, ...)",
    "math": "Python's math functions and constants",
    "typing": "type hints",
    "__future__": "annotations",
}
"""The modules a submission may reach, by full name: an allowlist. A chain of attributes that starts at an
imported module (`torch.functional.operator`, `torch.storage.np`, `tl.core`) may pass only through these; the
first link that is another module is refused, whatever it is called (every public re-export of a module by torch
or triton: `operator`, numpy, `os`, `functools`... reaches what the import whitelist keeps out). Within these
modules, every public attribute that is not a module is allowed (a function, a class, a dtype, a constant), less
what REFUSED_PREFIXES names; a name under a refused prefix passes only when ALLOWED_INTERNALS lists it whole.
Which link is a module is read from the modules themselves, in the trusted process that checks."""

def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


ALLOWED_ATTRS: dict[str, frozenset[str]] = {
    "a tensor's shape, layout and place": _words("""
        shape stride size numel dim ndim ndimension nelement element_size itemsize nbytes dtype device layout
        is_cuda is_cpu is_contiguous is_floating_point is_complex is_signed storage_offset data_ptr requires_grad
        is_leaf grad data names"""),
    "new shapes, casts and copies of a tensor": _words("""
        contiguous view view_as reshape reshape_as flatten unflatten squeeze squeeze_ unsqueeze unsqueeze_ expand
        expand_as broadcast_to t t_ T mT H transpose transpose_ permute movedim moveaxis swapaxes narrow select
        split chunk unbind unfold as_strided to type type_as float half bfloat16 double int long short char byte
        bool cpu cuda clone copy_ detach detach_ requires_grad_ fill_ zero_ new_empty new_zeros new_ones new_full
        new_tensor resize_ index_select gather scatter scatter_ masked_fill masked_fill_ masked_select where
        flip roll repeat repeat_interleave tile tril triu diagonal numpy tolist item"""),
    "torch's computations on a tensor (the op audit judges what they touch)": _words("""
        abs abs_ neg neg_ sign sgn max min amax amin aminmax argmax argmin sum mean prod std var norm cumsum
        cumprod all any isnan isinf isfinite isclose allclose equal eq ne lt le gt ge add add_ sub sub_ mul mul_
        div div_ true_divide floor_divide remainder fmod pow pow_ square sqrt rsqrt reciprocal exp exp2 expm1 log
        log2 log1p sin cos tanh sigmoid relu clamp clamp_ clip clip_ round round_ floor ceil trunc frac
        nan_to_num matmul mm bmm addmm dot outer softmax log_softmax topk sort argsort unique count_nonzero
        nonzero bitwise_and bitwise_or bitwise_xor bitwise_not bitwise_left_shift bitwise_right_shift
        logical_and logical_or logical_not lerp maximum minimum backward"""),
    "Triton values inside a kernel": _words("""
        value to dtype shape T trans reshape permute broadcast_to expand_dims split join view cast element_ty
        primitive_bitwidth scalar is_floating is_int is_int_signed is_int_unsigned is_fp8 is_fp16 is_bf16
        is_fp32 is_fp64 is_ptr is_block is_bool fp_mantissa_width numel store load advance"""),
    "autotuning, launches and the device": _words("""
        kwargs all_kwargs num_warps num_stages num_ctas maxnreg pre_hook configs best_config nargs
        multi_processor_count max_shared_mem total_memory major minor name warp_size regs max_num_regs
        L2_cache_size get_device_properties utils driver active get_current_device get_current_target
        cuda_stream backend arch"""),
    "finfo, iinfo and dtypes": _words("bits eps max min tiny smallest_normal resolution is_signed"),
    "autograd functions": _words("apply save_for_backward saved_tensors needs_input_grad mark_dirty"),
    "Python's own types": _words("""
        append extend insert pop remove index count sort reverse copy clear items keys values get setdefault
        update add discard union intersection difference format join split rsplit strip lstrip rstrip
        startswith endswith replace lower upper zfill splitlines encode bit_length is_integer real imag
        conjugate denominator numerator"""),
}
"""The attributes a submission may read on objects that are not modules (tensors, Triton values, configs, device
properties, Python's own types), by name and why: an allowlist, as ALLOWED_MODULES is for modules. Besides these,
a file may use the attributes it defines itself (a class's methods and fields, `self.x = ...`). Everything else is
refused (`x.untyped_storage()`, `x.apply_(f)`, which runs Python on every element, `kernel.fn`, `t.grad_fn`):
each is a way around the op audit or into the grader's objects that no homework needs. Which methods compute on
data is the op audit's to judge; this list says what may be named."""
ALLOWED_ATTR_NAMES: frozenset[str] = frozenset().union(*ALLOWED_ATTRS.values())

ALLOWED_BUILTINS: frozenset[str] = _words("""
    len range enumerate zip reversed sorted min max abs sum any all round divmod pow int float bool str bytes tuple
    list dict set frozenset complex slice iter next map filter isinstance issubclass callable hash repr format ord
    chr hex bin oct id type object super property staticmethod classmethod print NotImplemented Ellipsis
    Exception ValueError TypeError RuntimeError AssertionError NotImplementedError KeyError IndexError
    ZeroDivisionError ArithmeticError OverflowError AttributeError LookupError StopIteration
    __name__ __doc__""")
"""The builtins a submission may name (unless it binds the name itself): an allowlist, as for modules and
attributes. Left out besides REFUSED_NAMES: what reads attributes or namespaces by a computed name (`hasattr`,
`dir`), what reads or writes raw memory (`memoryview`, `bytearray`), input and help, and anything a later Python
adds."""

STAR_IMPORT_REFUSED = ("torch", "triton")
"""`from M import *` is refused for these packages and their modules: the names it binds (torch.load, ...) could
not be resolved to their full dotted names."""


@dataclass
class StaticReport:
    imports: list[str] = field(default_factory=list)
    """Problems of the imports gate (the whitelist and the policy above), each 'FILE:LINE: ...' in line order, then
    a last 'allowed imports: ...' line; empty when the gate passes."""
    signatures: list[str] = field(default_factory=list)
    decorators: dict[str, dict] = field(default_factory=dict)
    """kernel name -> {'line': def line, 'autotune_line': line of @triton.autotune or None, 'jit': bool}."""
    filename: str = ""

    @property
    def ok(self) -> bool:
        return not self.imports and not self.signatures


def check_source(source: str, task: TaskSpec, always_allowed: list[str] | None = None,
                 filename: str = "") -> StaticReport:
    """Every problem message starts with 'FILE:LINE:' (or 'line N:' without a file name). Never raises for what
    the source holds: a file Python's parser or this check cannot walk (nested too deep, a NUL byte, too large for
    memory) fails both gates with a message saying so, as a syntax error does."""
    try:
        return _check_source(source, task, always_allowed, filename)
    except (RecursionError, MemoryError, ValueError) as exc:
        # ValueError: a NUL byte (Python 3.11's parser); RecursionError: `1+1+...` 20,000 terms, deep brackets
        head = f"{filename}:" if filename else "line 1:"
        why = ("its expressions are nested too deep for Python's parser" if isinstance(exc, RecursionError)
               else "it is too large or nested too deep for the grader to read" if isinstance(exc, MemoryError)
               else f"it is not valid Python source ({str(exc)[:100]})")
        msg = f"{head} this file cannot be checked: {why}"
        return StaticReport(imports=[msg], signatures=[msg], filename=filename)


def _check_source(source: str, task: TaskSpec, always_allowed: list[str] | None = None,
                  filename: str = "") -> StaticReport:

    def at(lineno: int | None) -> str:
        return f"{filename}:{lineno}:" if filename else f"line {lineno}:"

    report = StaticReport(filename=filename)
    allowed = set(task.allowed_imports) | set(always_allowed or [])
    try:
        with warnings.catch_warnings():  # `"\@"` or `1if x` warns: the student's text, not the TA's console
            warnings.simplefilter("ignore")
            tree = ast.parse(source)
    except SyntaxError as exc:
        msg = f"{at(exc.lineno or 1)} syntax error: {exc.msg}"
        line = (exc.text or "").rstrip("\n")
        if line.strip():  # the line and a caret under where Python stopped, as Python prints them
            indent = len(line) - len(line.lstrip())
            caret = max(0, (exc.offset or indent + 1) - 1 - indent)
            line = line.strip()
            if len(line) > 160:  # a line of thousands of characters: the 160 around the caret
                cut = max(0, min(caret - 80, len(line) - 160))
                line, caret = line[cut : cut + 160], caret - cut
            msg += f"\n    {line}\n    {' ' * caret}^"
        report.imports.append(msg)
        report.signatures.append(msg)
        return report

    report.imports = [f"{at(line)} {text}" for line, text in sorted(_policy_problems(tree, allowed),
                                                                     key=lambda p: p[0])]
    if report.imports:
        report.imports.append(f"allowed imports: {', '.join(sorted(set(task.allowed_imports)))}")

    defs = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    for name, params in task.functions.items():
        report.signatures += _check_params(defs.get(name), name, params, False, at)
    for name, spec in task.kernels.items():
        node = defs.get(name)
        report.signatures += _check_params(node, name, spec.params, True, at)
        if node is not None:
            decos = {_deco_name(d): d.lineno for d in node.decorator_list}
            report.decorators[name] = {
                "line": node.lineno,
                "autotune_line": next((ln for d, ln in decos.items() if d.endswith("autotune")), None),
                "jit": any(d.endswith("jit") for d in decos),
            }
            if not report.decorators[name]["jit"]:
                report.signatures.append(f"{at(node.lineno)} kernel {name} must be decorated with @triton.jit")
    return report


def _policy_problems(tree: ast.Module, allowed: set[str]) -> list[tuple[int, str]]:
    """The imports gate's problems as (line, message without the 'FILE:LINE:' head), in the order found."""
    problems: list[tuple[int, str]] = []

    def add(node: ast.AST, text: str) -> None:
        problems.append((getattr(node, "lineno", 0), text))

    imported = {(a.asname or a.name).split(".")[0] for n in ast.walk(tree)
                if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names}
    aliases = _aliases(tree)
    defined = _defined_attrs(tree)
    bound = {name for n in ast.walk(tree) for name in _bound_names(n)}
    # An attribute chain (`torch._C._foo`) is checked once, from its outermost node: its inner links are skipped.
    inner = {id(n.value) for n in ast.walk(tree)
             if isinstance(n, ast.Attribute) and isinstance(n.value, (ast.Attribute, ast.Name))}
    method_selves = {id((n.args.posonlyargs + n.args.args)[0]) for c in ast.walk(tree) if isinstance(c, ast.ClassDef)
                     for n in c.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                     and n.args.posonlyargs + n.args.args}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name not in allowed:
                    add(node, f"import {alias.name} is not allowed")
        elif isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if node.level:
                add(node, "relative import is not allowed")
            for alias in [] if node.level else node.names:
                if mod not in allowed and f"{mod}.{alias.name}" not in allowed:
                    add(node, f"from {mod} import {alias.name} is not allowed")
                elif alias.name == "*" and mod.split(".")[0] in STAR_IMPORT_REFUSED:
                    add(node, f"from {mod} import * is not allowed (the names it binds cannot be checked; "
                              "import them by name)")
        elif isinstance(node, ast.Name):
            if node.id in REFUSED_NAMES:
                add(node, f"use of {node.id} is not allowed ({REFUSED_NAMES[node.id]})")
            elif node.id in _BUILTINS and node.id not in ALLOWED_BUILTINS and node.id not in bound:
                add(node, f"use of {node.id} is not allowed (a builtin outside those a homework file needs: "
                          "grader/gates/static.py ALLOWED_BUILTINS lists them)")
            elif id(node) not in inner and isinstance(node.ctx, ast.Load):  # a binding is no use: its value is checked
                _report_chain(node, aliases, add, defined)
        elif isinstance(node, ast.Attribute):
            if id(node) not in inner:
                _report_chain(node, aliases, add, defined)
        elif isinstance(node, ast.MatchClass):
            for attr in node.kwd_attrs:  # `case C(attr=...)` reads the subject's attribute
                refused = _attr_why(attr, False, "private attribute: the object's internals")
                if refused:
                    add(node, f"use of .{attr} is not allowed ({refused[0]})")
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            for target in targets:
                root = target
                while isinstance(root, (ast.Attribute, ast.Subscript)):
                    root = root.value
                if isinstance(target, ast.Attribute) and isinstance(root, ast.Name) and root.id in imported:
                    add(node, f"assigning to {ast.unparse(target)} (changing an imported module) is not allowed")
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and len(node.name) > 4 \
                and node.name.startswith("__") and node.name.endswith("__") and node.name not in DUNDER_DEFS_ALLOWED:
            add(node, f"defining {node.name} is not allowed ({DUNDER_DEF_WHY})")
        for name in _bound_names(node):
            if name in PRIVATE_EXEMPT and id(node) not in method_selves:
                add(node, f"binding {name} here is not allowed ({name} may use private attributes, so it may only "
                          "be a method's first parameter)")
    return problems


def _attr_why(attr: str, private_ok: bool, private_why: str) -> tuple[str, bool] | None:
    """Why the attribute `.attr` is refused, and whether the message names the whole dotted name (a private
    attribute: `torch._C`) rather than `.attr` alone (a dunder or flagged one: `.__closure__`); None if allowed."""
    if len(attr) > 4 and attr.startswith("__") and attr.endswith("__"):
        return DUNDER_WHY, False
    if attr in FLAGGED_ATTRS:
        return FLAGGED_ATTRS[attr], False
    if attr.startswith("_") and not private_ok:
        return private_why, True
    return None


ATTR_WHY = ("an attribute outside what a homework's wrapper and kernels need: grader/gates/static.py ALLOWED_ATTRS "
            "lists them, and a file may use the attributes it defines")


def _defined_attrs(tree: ast.Module) -> frozenset[str]:
    """The attribute names a file defines itself: its functions, classes and methods, the names bound in a class
    body (fields), and every attribute it assigns (`self.x = ...`)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                names.update(_bound_names(item))
                targets = item.targets if isinstance(item, ast.Assign) else \
                    [item.target] if isinstance(item, ast.AnnAssign) else []
                names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
    return frozenset(names)


def _report_chain(top: ast.Attribute | ast.Name, aliases: dict[str, str],
                  add: Callable[[ast.AST, str], None], defined: frozenset[str] = frozenset()) -> None:
    """Check a name or attribute chain (`tl.foo.bar`) link by link from its root; report its first refused link.
    Links that are attributes of objects (not members of modules) must be in ALLOWED_ATTRS or `defined`."""

    def unlisted(attr: str) -> bool:
        return not attr.startswith("_") and attr not in ALLOWED_ATTR_NAMES and attr not in defined

    links: list[ast.Attribute] = []
    node: ast.expr = top
    while isinstance(node, ast.Attribute):
        links.append(node)
        node = node.value
    links.reverse()
    if not isinstance(node, ast.Name):  # a call's or a subscript's attributes: no dotted name to resolve
        head = ast.unparse(node)
        head = head if len(head) <= 40 else "(...)"
        for link in links:
            head = f"{head}.{link.attr}"
            refused = _attr_why(link.attr, False, "private attribute: the object's internals")
            if refused:
                why, whole = refused
                add(link, f"use of {head if whole else '.' + link.attr} is not allowed ({why})")
                return
            if unlisted(link.attr):
                add(link, f"use of .{link.attr} is not allowed ({ATTR_WHY})")
                return
        return
    resolved = aliases.get(node.id)
    parts = (resolved or node.id).split(".")
    segments: list[tuple[str, ast.AST]] = [(p, node) for p in parts] + [(link.attr, link) for link in links]
    names = [s for s, _ in segments]
    private_why = f"private part of {names[0]}" if resolved else "private attribute: the object's internals"
    exempt = resolved is None and node.id in PRIVATE_EXEMPT  # self._x, cls._x
    # where the chain leaves ALLOWED_MODULES, and where its links become attributes of objects
    leaves, objects = _module_walk(names) if resolved else (None, 1)
    for k in range(1, len(segments)):
        attr, where = segments[k]
        dotted = ".".join(names[: k + 1])
        refused = _attr_why(attr, exempt and k == 1, private_why)
        if refused:
            why, whole = refused
            add(where, f"use of {dotted if whole else '.' + attr} is not allowed ({why})")
            return
        prefix = _refused_prefix(dotted)
        if prefix and not _internal(dotted):
            add(where, f"use of {dotted} is not allowed ({REFUSED_PREFIXES[prefix]})")
            return
        if leaves is not None and k == leaves[0]:
            named = _refused_prefix(".".join(names))  # a refusal further on says more (why it is refused)
            if named:
                add(where, f"use of {named} is not allowed ({REFUSED_PREFIXES[named]})")
            else:
                add(where, f"use of {dotted} is not allowed (the module {leaves[1]} is not one a submission may "
                           "reach: grader/gates/static.py ALLOWED_MODULES lists them)")
            return
        if objects is not None and k >= objects and unlisted(attr) and not _refused_prefix(".".join(names)):
            add(where, f"use of .{attr} is not allowed ({ATTR_WHY})")
            return
    dotted = ".".join(names)
    prefix = _refused_prefix(dotted)
    if prefix and dotted not in ALLOWED_INTERNALS:  # stops on the way to an allowed name
        add(top, f"use of {dotted} is not allowed ({REFUSED_PREFIXES[prefix]})")


def _import_root(name: str):
    """The root module of a chain, to tell its links' kinds (None: not importable here, or not allowed)."""
    if name not in ALLOWED_MODULES:
        return None
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def _internal(dotted: str) -> bool:
    """`dotted` is an ALLOWED_INTERNALS name or on the way to one."""
    return any(a == dotted or a.startswith(dotted + ".") for a in ALLOWED_INTERNALS)


def _module_walk(names: list[str]) -> tuple[tuple[int, str] | None, int | None]:
    """One walk of a chain whose root is an imported module, read from the modules themselves:
    * where it first reaches a module outside ALLOWED_MODULES, as (the link's index, the module's own name), or
      None when it never does (the allowlist of modules);
    * the index of its first link that is an attribute of an object rather than a member of a module
      (`torch.float16.itemsize`: 2; `torch.cuda.get_device_properties`: none, the length), or None when that
      cannot be told here (a name this toolchain lacks: no verdict may depend on it) (the allowlist of
      attributes)."""
    module = _import_root(names[0])
    if module is None:
        return None, None
    for k in range(1, len(names)):
        dotted = ".".join(names[: k + 1])
        member = getattr(module, names[k], None)
        if member is None and dotted in ALLOWED_MODULES:
            member = _import_root(dotted)  # a submodule not imported yet (triton.language.extra.libdevice)
        if member is None:
            return None, None
        if not inspect.ismodule(member):
            return None, k + 1
        if dotted not in ALLOWED_MODULES and member.__name__ not in ALLOWED_MODULES and not _internal(dotted):
            return (k, member.__name__), None
        module = member
    return None, len(names)


def _refused_prefix(dotted: str) -> str | None:
    """The entry of REFUSED_PREFIXES that `dotted` is, or lies under, segment by segment."""
    return next((p for p in REFUSED_PREFIXES if dotted == p or dotted.startswith(p + ".")), None)


def _dotted(node: ast.expr, aliases: dict[str, str]) -> str | None:
    """The full dotted name of a chain `a.b.c` whose root `a` is a known alias, else None."""
    attrs = []
    while isinstance(node, ast.Attribute):
        attrs.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name) or node.id not in aliases:
        return None
    return ".".join([aliases[node.id], *reversed(attrs)])


def _aliases(tree: ast.Module) -> dict[str, str]:
    """Local name -> the full dotted name it stands for: from imports (`import triton.language as tl`,
    `from triton import runtime`), then from plain assignments of those (`t = torch`, `F = torch.nn.functional`)
    where the value itself passes. Flow-insensitive: a name's first resolution is kept."""
    aliases: dict[str, str] = {}
    assigned: list[tuple[str, ast.expr]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname:
                    aliases[a.asname] = a.name
                else:
                    top = a.name.split(".")[0]
                    aliases[top] = top
        elif isinstance(node, ast.ImportFrom) and not node.level:
            for a in node.names:
                if a.name != "*":
                    aliases[a.asname or a.name] = f"{node.module}.{a.name}"
        elif isinstance(node, ast.Assign):
            assigned += [(t.id, node.value) for t in node.targets if isinstance(t, ast.Name)]
        elif isinstance(node, (ast.AnnAssign, ast.NamedExpr)) and isinstance(node.target, ast.Name) and node.value:
            assigned.append((node.target.id, node.value))
    grew = True
    while grew:
        grew = False
        for name, value in assigned:
            dotted = None if name in aliases else _dotted(value, aliases)
            parts = (dotted or "").split(".")
            # A value refused where it is assigned is not followed further (it would be reported again at each use).
            if dotted and not _refused_prefix(dotted) and not any(_attr_why(p, False, "") for p in parts[1:]) \
                    and _module_walk(parts)[0] is None:
                aliases[name] = dotted
                grew = True
    return aliases


def _bound_names(node: ast.AST) -> Iterator[str]:
    """The names that a node binds, other than through ast.Name (an assignment target's Name yields its own)."""
    if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
        yield node.id
    elif isinstance(node, ast.arg):
        yield node.arg
    elif isinstance(node, (ast.Import, ast.ImportFrom)):
        for a in node.names:
            yield (a.asname or a.name).split(".")[0]
    elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        yield node.name
    elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and node.name:
        yield node.name
    elif isinstance(node, ast.MatchMapping) and node.rest:
        yield node.rest
    elif isinstance(node, (ast.Global, ast.Nonlocal)):
        yield from node.names


def _deco_name(node: ast.expr) -> str:
    if isinstance(node, ast.Call):
        node = node.func
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def _check_params(node: ast.FunctionDef | None, name: str, expected: list[str], kernel: bool, at) -> list[str]:
    what = "kernel" if kernel else "function"
    want = ", ".join(expected)
    if node is None:
        return [f"{what} {name}({want}) is not defined at the top level of the file"]
    positional = [a.arg for a in node.args.posonlyargs + node.args.args]
    kwonly = [a.arg for a in node.args.kwonlyargs]
    exp_pos = [p for p in expected if not p.startswith("*")]
    exp_kw = [p[1:] for p in expected if p.startswith("*")]
    problems = []
    if positional[: len(exp_pos)] != exp_pos:
        problems.append(f"{at(node.lineno)} {what} {name} must take ({', '.join(exp_pos)}) first, "
                        f"found ({', '.join(positional)})")
    if not kernel:
        # Extra positional parameters are fine only with defaults: the harness passes just the listed ones.
        n_defaults = len(node.args.defaults)
        extra = positional[len(exp_pos):]
        if len(extra) > n_defaults:
            problems.append(f"{at(node.lineno)} {name}: extra parameters {extra} need default values")
        missing_kw = [k for k in exp_kw if k not in kwonly and k not in positional]
        if missing_kw:
            problems.append(f"{at(node.lineno)} {name} must accept keyword argument(s) {', '.join(missing_kw)}")
    return problems
