from grader.static import check_source

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


def test_reaching_around_the_whitelist_is_flagged(task10):
    src = GOOD + "\nt = torch.os.getcwd()\nf = open('reference/x.py')\ntorch.empty = None\ntl.store.x = 1\n"
    problems = "\n".join(check_source(src, task10).imports)
    assert "use of .os" in problems
    assert "use of open" in problems
    assert "assigning to torch.empty" in problems and "assigning to tl.store.x" in problems


def test_messages_carry_the_file_name(task10):
    report = check_source("import numpy\n" + GOOD, task10, filename="mine.py")
    assert report.imports[0] == "mine.py:1: import numpy is not allowed"
