from grader.gates.static import check_source

GOOD = '''
import torch
import triton
import triton.language as tl

@triton.autotune(configs=[], key=["n_elements"])
@triton.jit
def _quantize_global(x_ptr, absmax_inv_ptr, output_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pass

def quantize_global(x):
    pass
'''


def test_allowed_source_passes(task10):
    report = check_source(GOOD, task10)
    assert report.ok, report
    assert report.decorators["_quantize_global"]["autotune_line"] == 6


def test_forbidden_imports_are_reported_with_lines(task10):
    src = "import numpy as np\nfrom os import path\nimport torch\n" + GOOD
    report = check_source(src, task10)
    assert report.imports[:2] == ["line 1: import numpy is not allowed", "line 2: from os import path is not allowed"]


def test_dynamic_imports_and_eval_are_flagged(task10):
    src = GOOD + "\nm = __import__('os')\neval('1')\nexec('x = 1')\nimport importlib\n"
    problems = "\n".join(check_source(src, task10).imports)
    for word in ("__import__", "eval", "exec", "importlib"):
        assert word in problems


def test_always_allowed_modules(task10):
    src = "from triton.language.extra import libdevice\n" + GOOD
    assert check_source(src, task10).imports  # not in the task's own list
    assert check_source(src, task10, ["triton.language.extra"]).ok


def test_signature_mismatch_names_the_line(task10):
    src = GOOD.replace("def quantize_global(x):", "def quantize_global(inp, scale):")
    problems = check_source(src, task10).signatures
    assert any("line 11" in p and "quantize_global must take (x)" in p for p in problems)


def test_missing_kernel_and_missing_jit(task10):
    src = GOOD.replace("@triton.jit\n", "")
    assert any("must be decorated with @triton.jit" in p for p in check_source(src, task10).signatures)
    src = GOOD.replace("def _quantize_global", "def _other")
    assert any("_quantize_global" in p and "not defined" in p for p in check_source(src, task10).signatures)


def test_syntax_error_fails_both_gates(task10):
    report = check_source("def broken(:\n", task10)
    assert report.imports and report.signatures and "syntax error" in report.imports[0]


def test_a_syntax_error_shows_its_line_and_a_caret(task10):
    """As Python prints it: the line and a caret under where parsing stopped (it once read only ':119: syntax
    error: invalid syntax')."""
    report = check_source("import torch\n\n\ndef f(x):\n    y = x +* 2\n    return y\n", task10, filename="s.py")
    assert report.imports[0].splitlines() == ["s.py:5: syntax error: invalid syntax", "    y = x +* 2",
                                              "           ^"]  # under the '*', where parsing stopped


def test_reaching_around_the_whitelist_is_flagged(task10):
    src = GOOD + "\nt = torch.os.getcwd()\nf = open('reference/x.py')\ntorch.empty = None\ntl.store.x = 1\n"
    problems = "\n".join(check_source(src, task10).imports)
    assert "use of .os" in problems
    assert "use of open" in problems
    assert "assigning to torch.empty" in problems and "assigning to tl.store.x" in problems


def test_messages_carry_the_file_name(task10):
    report = check_source("import numpy\n" + GOOD, task10, filename="mine.py")
    assert report.imports[0] == "mine.py:1: import numpy is not allowed"


# The policy of the imports gate (grader/gates/static.py's tables): each refusal names the file, the line, what was used
# and why. `_policy` checks GOOD followed by some lines, numbered from 1 as `at(n)`.
_FIRST = GOOD.count("\n")


def _at(n):
    return f"sub.py:{_FIRST + n}:"


def _policy(task, *lines):
    imports = check_source(GOOD + "\n".join(lines) + "\n", task, filename="sub.py").imports
    assert not imports or imports[-1].startswith("allowed imports: ")
    return imports[:-1]


def test_dunder_attributes_and_names_are_refused(task10):
    problems = _policy(task10, "c = quantize_global.__closure__", "if __name__ == '__main__':",
                       "    x = torch.Tensor.__dict__", "spec = __loader__", "f'{x.__class__}'")
    assert problems == [
        f"{_at(1)} use of .__closure__ is not allowed (dunder attributes reach the interpreter's internals)",
        f"{_at(3)} use of .__dict__ is not allowed (dunder attributes reach the interpreter's internals)",
        f"{_at(4)} use of __loader__ is not allowed (the module's loader reads files and loads modules)",
        f"{_at(5)} use of .__class__ is not allowed (dunder attributes reach the interpreter's internals)",
    ]
    # also as a keyword pattern, which reads the attribute too
    assert "use of .__globals__ is not allowed" in _policy(task10, "match x:", "    case object(__globals__=g):",
                                                           "        pass")[0]


def test_builtins_that_reach_around_the_policy_are_refused_even_aliased(task10):
    problems = _policy(task10, "g = getattr", "g(torch, 'ops')")
    assert problems == [f"{_at(1)} use of getattr is not allowed (reads or writes attributes by a computed name, "
                        "around this check)"]
    for name in ("setattr", "delattr", "vars", "globals", "locals", "open", "compile", "exec", "eval", "__import__",
                 "breakpoint", "__builtins__", "__spec__"):
        (problem,) = _policy(task10, "", f"f = {name}")
        assert problem.startswith(f"{_at(2)} use of {name} is not allowed (")


def test_private_attributes_are_refused_once_per_chain(task10):
    problems = _policy(task10, "torch._C._foo(x)", "y = torch._int_mm(a, b)", "z = x._base", "w = tl._foo",
                       "v = torch.empty(3)._cdata")
    assert problems == [
        f"{_at(1)} use of torch._C is not allowed (private part of torch)",
        f"{_at(2)} use of torch._int_mm is not allowed (private part of torch)",
        f"{_at(3)} use of x._base is not allowed (private attribute: the object's internals)",
        f"{_at(4)} use of triton.language._foo is not allowed (private part of triton)",
        f"{_at(5)} use of torch.empty(3)._cdata is not allowed (private attribute: the object's internals)",
    ]


def test_self_and_cls_are_exempt_only_as_a_methods_first_parameter(task10):
    assert _policy(task10, "class A:", "    def f(self):", "        return self._x, [self._y for _ in ()]",
                   "    @classmethod", "    def g(cls):", "        return cls._z") == []
    problems = _policy(task10, "self = torch", "self._C")
    assert problems[0] == (f"{_at(1)} binding self here is not allowed (self may use private attributes, so it may "
                           "only be a method's first parameter)")
    assert problems[1] == f"{_at(2)} use of torch._C is not allowed (private part of torch)"
    assert _policy(task10, "def f(cls):", "    return cls._C")[0].startswith(f"{_at(1)} binding cls here")


def test_internal_parts_of_torch_and_triton_are_refused(task10):
    problems = _policy(task10, "f = triton.runtime.jit", "torch.ops.aten.mm.default(a, b)", "torch.load('w.pt')",
                       "@torch.compile", "def g(): pass", "torch.utils.cpp_extension.load_inline('', '')",
                       "triton.knobs.cache.dir", "t = torch.os.getcwd()")
    assert problems == [
        f"{_at(1)} use of triton.runtime.jit is not allowed (Triton's internals; the SM count is available through "
        "triton.runtime.driver.active.utils.get_device_properties)",
        f"{_at(2)} use of torch.ops is not allowed (calls operators by name, around the op audit)",
        f"{_at(3)} use of torch.load is not allowed (unpickles files, which can run code)",
        f"{_at(4)} use of torch.compile is not allowed (generates kernels instead of the submission's own)",
        f"{_at(6)} use of torch.utils.cpp_extension is not allowed (builds and loads C++ and CUDA code)",
        f"{_at(7)} use of triton.knobs is not allowed (Triton's internals; the SM count is available through "
        "triton.runtime.driver.active.utils.get_device_properties)",
        f"{_at(8)} use of .os is not allowed (reaches the os module, which the import whitelist keeps out)",
    ]
    assert _policy(task10, "from torch import *")[0] == (
        f"{_at(1)} from torch import * is not allowed (the names it binds cannot be checked; import them by name)")


def test_the_allowance_for_device_properties_passes(task10):
    assert _policy(task10, "props = triton.runtime.driver.active.utils.get_device_properties(0)",
                   "sms = props['multiprocessor_count']",
                   "n = triton.runtime.driver.active.utils.get_device_properties(0)['multiprocessor_count']",
                   "dev = triton.runtime.driver.active.get_current_device()",
                   "arch = triton.runtime.driver.active.get_current_target().arch") == []
    # only the allowed names themselves: the way to them, or past them, is refused
    (problem,) = _policy(task10, "d = triton.runtime.driver.active")
    assert problem.startswith(f"{_at(1)} use of triton.runtime.driver.active is not allowed (Triton's internals")
    (problem,) = _policy(task10, "d = triton.runtime.driver.active.utils.get_device_properties.cache")
    assert "use of triton.runtime.driver.active.utils.get_device_properties.cache is not allowed" in problem


def test_names_resolve_through_import_aliases(task10):
    problems = _policy(task10, "from triton import runtime", "j = runtime.jit.JITFunction",
                       "from torch import ops as o", "o.aten.mm(a, b)", "from torch import load", "load('w.pt')",
                       "t = torch", "t.jit.script(g)", "from torch import _C", "_C._foo()")
    assert problems == [
        f"{_at(2)} use of triton.runtime.jit is not allowed (Triton's internals; the SM count is available through "
        "triton.runtime.driver.active.utils.get_device_properties)",
        f"{_at(4)} use of torch.ops is not allowed (calls operators by name, around the op audit)",
        f"{_at(6)} use of torch.load is not allowed (unpickles files, which can run code)",
        f"{_at(8)} use of torch.jit is not allowed (compiles and loads TorchScript)",
        f"{_at(10)} use of torch._C is not allowed (private part of torch)",
    ]
    # the allowance resolves the same way
    assert _policy(task10, "from triton import runtime", "runtime.driver.active.utils.get_device_properties(0)") == []


def test_modules_re_exported_by_torch_and_frames_are_refused(task10):
    """Each was the way in of a cheat found in an audit: frames reached the grader's state (switch the op audit
    off, forge a launch, read the hidden cases), a thread ran torch where the audit did not look, pickle called
    os.fork, torch.serialization rewrote the grader's records, a DataLoader's workers compute elsewhere."""
    problems = _policy(task10, "f = torch.inspect.currentframe()", "t = torch.threading.Thread",
                       "p = torch.serialization.pickle.loads(b'')", "a = torch.from_file('f.bin', size=4)",
                       "q = torch.multiprocessing.get_context('spawn')", "h = torch.hub.list",
                       "e = torch.utils.collect_env.get_pretty_env_info()", "d = torch.utils.data.DataLoader",
                       "def g(e):", "    return e.tb_frame.f_locals")
    assert problems == [
        f"{_at(1)} use of .inspect is not allowed (reaches the interpreter's stack frames: the grader's own state "
        "and data)",
        f"{_at(2)} use of .threading is not allowed (runs work in another thread or process, where the op audit "
        "does not see it)",
        f"{_at(3)} use of .serialization is not allowed (reads or writes files)",
        f"{_at(4)} use of .from_file is not allowed (reads or writes files)",
        f"{_at(5)} use of .multiprocessing is not allowed (runs work in another thread or process, where the op "
        "audit does not see it)",
        f"{_at(6)} use of .hub is not allowed (loads or runs code that this check never sees)",
        f"{_at(7)} use of torch.utils.collect_env is not allowed (runs programs)",
        f"{_at(8)} use of torch.utils.data is not allowed (its loaders run work in other processes, where the op "
        "audit does not see it)",
        f"{_at(10)} use of .tb_frame is not allowed (reaches the interpreter's stack frames: the grader's own "
        "state and data)",
    ]


def test_public_apis_and_own_private_state_pass(task10):
    assert _policy(task10, "n = torch.cuda.get_device_properties(0).multi_processor_count", "r = torch.round(x)",
                   "s = x.select(0, 1)", "m = tl.math.exp", "c2 = x.copy_(y)", "tr = torch.trace(x)",
                   "b = triton.testing.do_bench", "c = torch.loadtxt if False else triton.cdiv(3, 2)",
                   "class Cache:", "    def __init__(self):", "        self._x = {}",
                   "    def get(self, k):", "        return self._x.get(k)") == []


def test_a_chain_from_a_module_passes_only_through_allowed_modules(task10):
    """The allowlist (ALLOWED_MODULES): every module that torch or triton re-exports is refused at the link that
    reaches it, whatever it is called and however the chain starts (an alias, `from torch import storage`)."""
    problems = _policy(task10, "op = torch.functional.operator.attrgetter", "np1 = torch.storage.np",
                       "import torch.nn.functional as F", "np2 = F.np", "core = tl.core.tensor",
                       "from torch import storage", "np3 = storage.np", "t = torch", "op2 = t.functional",
                       "ok = (torch.empty, torch.float16, torch.cuda.current_stream, F.pad, tl.math.exp, tl.zeros)")
    refused = [p.split(": use of ", 1)[1].split(" is not allowed")[0] for p in problems if ": use of " in p]
    assert refused == ["torch.functional", "torch.storage", "torch.nn.functional.np", "triton.language.core",
                       "torch.storage", "torch.functional"], problems
    assert all("ALLOWED_MODULES" in p for p in problems if ": use of " in p)


def test_hooks_that_torch_or_numpy_call_on_their_own_cannot_be_defined(task10):
    """A class with `__array_interface__` lets numpy read and write a tensor's memory with no torch operation
    dispatched; `__torch_function__` and `__torch_dispatch__` sit between torch and the op audit."""
    problems = _policy(task10, "class Leak:", "    def __init__(self, t):", "        self.t = t",
                       "    @property", "    def __array_interface__(self):", "        return {}",
                       "    def __torch_function__(self, *a):", "        return None", "    def __repr__(self):",
                       "        return 'ok'", "def __getattr__(name):", "    return name")
    refused = [p.split("defining ", 1)[1].split(" ", 1)[0] for p in problems]
    assert refused == ["__array_interface__", "__torch_function__", "__getattr__"], problems


def test_attributes_of_objects_pass_only_from_the_allowlist_or_the_file(task10):
    """The allowlist of attributes (ALLOWED_ATTRS): on tensors, Triton values, configs and device properties,
    only what a wrapper or a kernel needs; a file's own classes and fields pass too."""
    problems = _policy(task10, "s = x.untyped_storage()", "y = x.apply_(round)", "f = _quantize_global.fn",
                       "g = y.grad_fn", "w = torch.empty(3).storage().data_ptr()",
                       "class Layout:", "    rows = 0", "    def __init__(self, x):", "        self.cols = x.shape[1]",
                       "    def grid(self):", "        return (self.rows,)",
                       "ok = (x.shape, x.stride(0), x.contiguous().view(-1), Layout(x).grid(), Layout(x).cols,",
                       "      triton.Config({}).kwargs, torch.cuda.get_device_properties(0).multi_processor_count,",
                       "      torch.float16.itemsize, torch.finfo(torch.float16).max, [1].append, x.abs().max())")
    refused = [p.split(": use of .", 1)[1].split(" is not allowed")[0] for p in problems if ": use of ." in p]
    assert refused == ["untyped_storage", "apply_", "fn", "grad_fn", "storage"], problems
    assert all("ALLOWED_ATTRS" in p for p in problems), problems


def test_builtins_pass_only_from_the_allowlist_unless_the_file_binds_the_name(task10):
    """ALLOWED_BUILTINS: what a wrapper uses (len, range, min, isinstance, ValueError...) passes; hasattr (an
    attribute by a computed name), memoryview (raw memory) and dir do not, unless the file binds the name."""
    problems = _policy(task10, "a = hasattr(x, 'shape')", "b = memoryview(b'')", "c = dir()",
                       "ok = (len(x), range(3), min(1, 2), isinstance(x, int), ValueError, sorted([2, 1]))",
                       "def help(n):", "    return n", "h = help(1)")
    refused = [p.split(": use of ", 1)[1].split(" is not allowed")[0] for p in problems]
    assert refused == ["hasattr", "memoryview", "dir"], problems
    assert all("ALLOWED_BUILTINS" in p for p in problems), problems
