"""Fair verdicts: an output the statement calls a scalar accepts shape [] and [1], and only those;
every right/ file (another correct way of writing the answer) earns full marks in selftest."""

import dataclasses

from grader.config import ROOT, load_config, load_task
from grader.pipeline.grading import Job, grade_jobs

TASK10 = ROOT / "tasks" / "10_quantize_global_int8"
TASK13 = ROOT / "tasks" / "13_quantize_global_transpose_int8"


def test_scalar_outputs_accept_both_shapes_and_only_those():
    cfg = load_config()
    t10, t13 = load_task(TASK10), load_task(TASK13)
    strict = dataclasses.replace(t10, outputs=[dataclasses.replace(o, scalar=False) for o in t10.outputs],
                                 cases=t10.cases[:2])
    jobs = [Job(t10.subset({c.id for c in t10.cases[:2]}), TASK10 / "right" / "absmax_one_element.py", "fair"),
            Job(strict, TASK10 / "right" / "absmax_one_element.py", "strict"),
            Job(t13.subset({t13.cases[0].id}), TASK13 / "wrong" / "absmax_keepdim.py", "keepdim")]
    fair, strict_result, keepdim = grade_jobs(jobs, cfg, "cpu", workers=2)
    assert fair.score == fair.max_score  # absmax of shape [1] where the oracle's is []
    # the same file, with the forgiveness off: the shape check is what would have failed it
    case = {t.name: t for t in strict_result.tests}[t10.cases[0].id]
    assert case.outcome == "failed" and "absmax: shape [1], expected []" in case.message
    case = {t.name: t for t in keepdim.tests}[t13.cases[0].id]
    assert case.outcome == "failed" and "absmax: shape [1, 1], expected a scalar: shape [] or [1]" in case.message


def test_right_files_are_graded_by_selftest():
    assert load_task(TASK10).right == ["absmax_one_element.py", "absmax_python_float.py", "constant_tables.py",
                                       "launcher_class.py", "workspace_and_tuple.py"]
    assert load_task(TASK13).right == ["absmax_zero_dim.py"]
    # rint bound by name: the GPU compile check once reported this correct kernel as one that does not compile
    assert load_task(ROOT / "tasks" / "11_quantize_rowwise_int8").right == ["helpers_and_config_function.py",
                                                                            "rint_bound_by_name.py"]


def test_kernels_that_only_the_interpreter_runs_fail_on_the_cpu():
    """Each of these runs right in the interpreter; the compile check for CUDA targets is what fails them (with
    the check off they earn full marks), with the compiler's message and the file's line."""
    cfg = load_config()
    p4, p7 = ROOT / "tasks" / "puzzle04_outer_vector_add_block", ROOT / "tasks" / "puzzle07_long_sum"
    jobs = [Job(load_task(p4), p4 / "wrong" / "lambda_in_kernel.py", "lambda"),
            Job(load_task(p7), p7 / "wrong" / "runtime_arange.py", "arange"),
            Job(load_task(p7), p7 / "solution.py", "solution")]
    on = grade_jobs(jobs, cfg, "cpu", workers=2)
    off = grade_jobs(jobs, dataclasses.replace(cfg, gpu_compile=False), "cpu", workers=2)
    lam, arange, solution = on
    assert lam.score == 0 and arange.score == 0 and solution.score == solution.max_score
    first = {t.name: t for t in lam.tests}["notebook"].message
    assert "does not compile for a GPU (sm_90) (line 13): " in first and "Lambda" in first
    assert "a lambda inside a kernel does not compile for a GPU" in first and "@triton.jit" in first
    first = {t.name: t for t in arange.tests}["notebook"].message
    assert "does not compile for a GPU (sm_90) (line 14): " in first and "constexpr" in first
    assert all(r.score == r.max_score for r in off)


def test_a_libdevice_function_on_a_dtype_it_lacks_is_named_with_the_dtypes_it_takes():
    """Triton's compiler says only "(triton.language.float16)" when llrint gets an fp16 value."""
    import ast

    from grader.worker.gpu_compile import _hint, libdevice_types

    call = ast.parse("libdevice.llrint(x.to(tl.float16))").body[0].value
    text = "at 16:8:\n    q = libdevice.llrint(x)\n        ^\n(triton.language.float16)"
    assert _hint(call, text) == ("libdevice.llrint has no version for float16: it takes float32 or float64 (cast "
                                 "the argument first, e.g. x.to(tl.float32))")
    assert "(float32, int32)" in libdevice_types("pow")
    assert _hint(call, "some other error") == "" and libdevice_types("no_such_function") == []


def test_a_print_without_a_string_first_is_named():
    """The interpreter prints anything; Triton's compiler says only "fp32[constexpr[32]] is not string"."""
    import ast

    from grader.worker.gpu_compile import _hint

    call = ast.parse("print(x)").body[0].value
    assert _hint(call, "at 7:4:\n    print(x)\n    ^\nfp32[constexpr[32]] is not string").startswith(
        "print() in a kernel compiles for a GPU only with a string first")
    assert _hint(call, "some other error") == ""


P2 = ROOT / "tasks" / "puzzle02_constant_add_block"


def test_stray_loads_fail_on_the_interpreter_even_when_unused(tmp_path):
    """A load past x whose lanes are never stored leaves every value right: only the address check sees it (off,
    the file earns full marks). A wild pointer is reported, and masked off rather than dereferenced."""
    wild = tmp_path / "wild.py"
    wild.write_text((P2 / "solution.py").read_text().replace(
        "x = tl.load(x_ptr + idx, mask=inside)", "x = tl.load(x_ptr + idx + (1 << 40), mask=inside)"))
    cfg = load_config()
    task = load_task(P2)
    jobs = [Job(task, P2 / "wrong" / "load_unmasked.py", "stray"), Job(task, P2 / "solution.py", "solution"),
            Job(task, wild, "wild")]
    stray, solution, wild_result = grade_jobs(jobs, cfg, "cpu", workers=2)
    assert solution.score == solution.max_score
    by_name = {t.name: t for t in stray.tests}
    assert {n for n, t in by_name.items() if t.outcome == "failed"} == {"notebook", "n1000_b128", "n5_b16"}
    assert ("add_mask2_kernel (line 13): tl.load read 11 element(s) past the end of x_ptr (5 float32 elements, "
            "offsets 0..4): offsets 5..15") in by_name["n5_b16"].message
    off = grade_jobs(jobs[:1], dataclasses.replace(cfg, bounds=False), "cpu", workers=1)[0]
    assert off.score == off.max_score
    message = {t.name: t for t in wild_result.tests}["n32_b32"].message
    assert "tl.load read 32 address(es) outside every tensor the kernel was given" in message
    assert "worker" not in message  # reported by the check, not a crash


def test_the_cuda_workers_re_run_of_each_call_grades_as_the_cpus_own_check(monkeypatch):
    """A CUDA worker checks addresses in a second, interpreted run of each call (grader/worker/main.py: the
    `auditing` status, `interpret_runs`, the run's `bounds` replaced by the re-run's). That branch runs only on a
    GPU, so CI's CPU suite did not run it, and a name it rebound broke every later case of a CUDA shard (02770c7).
    Here the CPU workers take that branch too (JobSpec.rerun_bounds; their graded run then checks no address, as
    a compiled kernel's does not): the right file keeps full marks over its shards' several cases, and the stray
    one fails the same tests with the re-run's finding. Proven able to fail: with the rebinding put back, the
    right file drops to half marks; with a re-run that does nothing, the stray one passes."""
    import functools

    from grader.isolation.runner import JobSpec
    from grader.pipeline import grading

    monkeypatch.setattr(grading, "JobSpec", functools.partial(JobSpec, rerun_bounds=True))
    task = load_task(P2)
    jobs = [Job(task, P2 / "wrong" / "load_unmasked.py", "stray"), Job(task, P2 / "solution.py", "solution")]
    stray, solution = grade_jobs(jobs, load_config(), "cpu", workers=2)
    assert solution.score == solution.max_score, [(t.name, t.message) for t in solution.tests if t.outcome != "passed"]
    by_name = {t.name: t for t in stray.tests}
    assert {n for n, t in by_name.items() if t.outcome == "failed"} == {"notebook", "n1000_b128", "n5_b16"}
    assert ("add_mask2_kernel (line 13): tl.load read 11 element(s) past the end of x_ptr (5 float32 elements, "
            "offsets 0..4): offsets 5..15") in by_name["n5_b16"].message
    for result in (stray, solution):  # the re-run's clock
        assert result.staff["stages"]["address"] > 0, result.staff["stages"]


def test_compiled_kernels_are_checked_through_the_interpreter_call_after_call():
    """What a CUDA worker does (grader/worker/interpreter.py `interpreted`): kernels decorated as JITFunctions, each
    call run in the interpreter and checked. On CPU tensors here, in a process without TRITON_INTERPRET, several calls
    in a row (the interpreter adds globals to triton.language's namespaces on its first call; undoing that broke every
    later call), with triton.language's jit functions (tl.max, tl.sum) inside."""
    import os
    import subprocess
    import sys

    script = f"""
import importlib.util, sys, torch
sys.path.insert(0, {str(ROOT)!r})
from grader.worker.address_check import BoundsAudit
from grader.judge import describe_bounds as describe
from grader.worker.interpreter import interpreted
from triton.runtime.jit import JITFunction
path = {str(ROOT / "tasks" / "puzzle08_long_softmax" / "wrong" / "unmasked_tail.py")!r}
spec = importlib.util.spec_from_file_location("m", path); m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)
assert isinstance(m.softmax_kernel, JITFunction)
audit = BoundsAudit(path); audit.install()
for n0, t, b0, b1 in [(5, 64, 2, 16), (3, 31, 4, 32), (16, 1000, 8, 128)]:
    x = torch.rand(n0, t); z = torch.empty_like(x)
    with interpreted(m):
        m.softmax_kernel[(-(-n0 // b0),)](x, z, n0, n0, t, B0=b0, B1=b1)
    if t % b1 == 0:  # its only bug is then the read past x: every value is right
        assert torch.allclose(z, x.softmax(1)), (n0, t)
    print(" | ".join(describe(f) for f in audit.take()))
assert isinstance(m.softmax_kernel, JITFunction)
"""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.strip().splitlines()
    assert len(lines) == 3
    assert all("softmax_kernel (line 19): tl.load read" in line for line in lines), lines


def test_a_submission_that_takes_the_address_check_out_loses_its_points(tmp_path):
    """A cheat puts the interpreter's own load back (reached as triton.runtime.interpreter, without an import)
    so that its unmasked load goes unseen. The static policy refuses `triton.runtime`; with that layer off, the
    worker sees that its patch is gone and every case fails."""
    cheat = tmp_path / "unpatch.py"
    cheat.write_text((P2 / "wrong" / "load_unmasked.py").read_text() + """

def _unpatch():
    interp = triton.runtime.interpreter
    builder = type(interp.interpreter_builder)

    def load(self, ptrs, mask, other, *rest):
        import numpy as np
        dtype = interp._get_np_dtype(ptrs.get_element_ty())
        other = other if other is not None else interp.TensorHandle(np.zeros_like(ptrs.data, dtype=dtype),
                                                                    ptrs.get_element_ty())
        return interp.TensorHandle(interp._interpreter.load(ptrs.data, mask.data, other.data, dtype),
                                   ptrs.get_element_ty())

    builder.create_masked_load = load


_unpatch()
""")
    cfg = load_config()
    task = load_task(P2)
    (refused,) = grade_jobs([Job(task, cheat, "cheat")], cfg, "cpu", workers=1)
    assert refused.score == 0 and "triton.runtime" in {t.name: t for t in refused.tests}["imports"].message
    (result,) = grade_jobs([Job(task, cheat, "cheat")], cfg, "cpu", workers=1, static_checks=False)
    assert result.score == 0
    for test in result.tests:
        if test.name.startswith(("n", "notebook")):
            assert "the grader's address check was changed during the call" in test.message, test


def test_tensor_descriptor_loads_run_under_the_address_check(tmp_path):
    """A kernel may load through a tensor descriptor (`tl.make_tensor_descriptor`, TMA on Hopper; task 12's
    reference does). The interpreter turns its load into a masked load with keyword arguments, which the address
    check must pass on: it used to raise TypeError, failing every such case. Rows past the descriptor's shape are
    masked (no finding); a shape that claims more rows than its tensor has is a stray read, and is found."""
    import os
    import subprocess
    import sys

    script = f"""
import sys, torch, triton, triton.language as tl
sys.path.insert(0, {str(ROOT)!r})
from grader.worker.address_check import BoundsAudit; from grader.judge import describe_bounds as describe
audit = BoundsAudit(__file__); audit.install()

@triton.jit
def rows(x_ptr, y_ptr, M, SHAPE_M, N: tl.constexpr, BM: tl.constexpr):
    desc = tl.make_tensor_descriptor(x_ptr, shape=[SHAPE_M, N], strides=[N, 1], block_shape=[BM, N])
    tile = desc.load([tl.program_id(0) * BM, 0])
    offs = tl.program_id(0) * BM + tl.arange(0, BM)
    tl.store(y_ptr + offs[:, None] * N + tl.arange(0, N)[None, :], tile, mask=offs[:, None] < M)

x = torch.arange(5 * 16, dtype=torch.float32).reshape(5, 16); y = torch.zeros_like(x)
rows[(2,)](x, y, 5, 5, N=16, BM=4)
print(bool(torch.equal(x, y)), [describe(f) for f in audit.take()])
rows[(2,)](x, y, 5, 8, N=16, BM=4)  # claims 8 rows
print([describe(f) for f in audit.take()])
"""
    env = dict(os.environ, TRITON_INTERPRET="1")
    path = tmp_path / "descriptor_rows.py"  # a file: Triton reads a kernel's source from it
    path.write_text(script)
    out = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    inside, claims_more = out.stdout.strip().splitlines()
    assert inside == "True []", inside
    assert "rows (line 10): tl.load read 48 address(es) outside every tensor" in claims_more, claims_more  # rows 5-7


def test_an_error_inside_an_interpreted_kernel_names_the_kernel_line(tmp_path):
    """The interpreter raises InterpreterError from the kernel's own error; the line a student needs is in the
    traceback of the error it was raised from (a tl.arange over KH = 3 in puzzle 10)."""
    task = load_task(ROOT / "tasks" / "puzzle10_conv2d")
    task = task.subset({"n5_7x19_k3x2_b2"}, autotune_points=0.0)
    loop = "            for p in tl.static_range(KH):\n"
    source = (task.folder / "solution.py").read_text().replace(loop, "            kk = tl.arange(0, KH)\n" + loop)
    line = source.splitlines().index("            kk = tl.arange(0, KH)") + 1
    path = tmp_path / "arange_kh.py"
    path.write_text(source)
    (result,) = grade_jobs([Job(task, path, "s")], load_config(), "cpu", workers=1)
    message = {t.name: t.message for t in result.tests}["n5_7x19_k3x2_b2"]
    assert f"line {line} in conv2d_kernel: kk = tl.arange(0, KH)" in message
    assert "hint: tl.arange(start, end) needs end - start to be a power of 2" in message



def test_configs_that_differ_only_where_the_interpreter_looks_away_are_called_once(tmp_path):
    """On the CPU, configs with the same kwargs and hooks compute the same bits (the interpreter ignores num_warps
    and num_stages): the first config's call serves the others (grader/worker/main.py `same_call`), and the
    verdict is the one each call of its own gave."""
    cfg = load_config()
    task = load_task(TASK10).subset({"n1_fp32", "n1025_fp32", "large_fp32"}, autotune_points=0.0)
    source = (TASK10 / "solution.py").read_text()
    configs = ('        triton.Config({"BLOCK_SIZE": 1024}, num_warps=4),\n'
               '        triton.Config({"BLOCK_SIZE": 2048}, num_warps=8),\n'
               '        triton.Config({"BLOCK_SIZE": 4096}, num_warps=8),\n')
    assert configs in source
    path = tmp_path / "10_quantize_global_int8.py"
    path.write_text(source.replace(configs, '        triton.Config({"BLOCK_SIZE": 1024}, num_warps=4),\n'
                                            '        triton.Config({"BLOCK_SIZE": 1024}, num_warps=8, num_stages=2),\n'
                                            '        triton.Config({"BLOCK_SIZE": 2048}, num_warps=8),\n'
                                            '        triton.Config({"BLOCK_SIZE": 1024}, num_warps=2),\n'))
    (result,) = grade_jobs([Job(task, path, "same")], cfg, "cpu", workers=1)
    log = result.staff["worker_log"]
    # four configs, two distinct calls, and the twin (the provenance check) of each case
    assert log.count("5 run(s) (2 the same call as an earlier config)") == 3, log
    assert result.score == result.max_score, [t.message for t in result.tests]


def test_a_call_that_serves_another_config_is_compiled_for_the_gpu_with_that_configs_options():
    """The GPU compilation check reads num_warps and num_stages, so `same_call` runs it again, per launch, with
    the other config's options (a stand-in check here records what it was asked)."""
    import triton

    from grader.worker.main import Instruments, same_call

    class Kernel:
        fn = "the kernel's function"

    class Tuner:
        def __init__(self, fn, configs):
            self.fn, self.configs = fn, configs

    kernel = Kernel()
    configs = [triton.Config({"B": 64}, num_warps=4, num_stages=2), triton.Config({"B": 64}, num_warps=8,
                                                                                    num_stages=3)]
    asked = []

    class Check:
        def check(self, fn, args, kwargs):
            asked.append((fn, args, kwargs))
            return "does not compile" if kwargs["num_warps"] == 8 else None

    inst = Instruments.__new__(Instruments)
    inst.gpu_check = Check()
    source = {"config_index": 0, "configs": {}, "error": None, "seconds": 1.5, "provenance": {"x": 1},
              "outputs": [{"kind": "tensor", "tensor": "t"}], "launches": [{"kernel": "k", "gpu_compile": None}]}
    copy = same_call(source, [(kernel, ("a",), {"B": 64, "num_warps": 4, "num_stages": 2})], 1,
                     [(Tuner(kernel, configs), configs)], inst)
    assert asked == [("the kernel's function", ("a",), {"B": 64, "num_warps": 8, "num_stages": 3, "num_ctas": 1})]
    assert copy["launches"] == [{"kernel": "k", "gpu_compile": "does not compile"}]
    assert source["launches"] == [{"kernel": "k", "gpu_compile": None}]  # the first config's record unchanged
    assert copy["config_index"] == 1 and copy["same_call_as"] == 0 and "provenance" not in copy
    assert copy["outputs"] == source["outputs"] and copy["outputs"][0] is not source["outputs"][0]
