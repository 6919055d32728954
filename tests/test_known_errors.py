"""Known errors a CPU check cannot grade, named in the student's message (grader/protocol/known_errors.py): an API
the installed triton lacks (block pointers under triton 3.9: tests/files/task10_block_ptr.py, right under 3.6),
and an assert that asks for CUDA tensors. Each message appears for such a file and for no other failure."""

from __future__ import annotations

import dataclasses
import os
import textwrap

import pytest
import torch
import triton
import triton.language as tl

from grader.config import ROOT, load_config
from grader.judge import error_problem
from grader.judge.known_errors import CUDA_ASSERT_NOTE, Tritons
from grader.pipeline.grading import Job, grade_jobs
from grader.protocol.known_errors import CUDA_ASSERT, UNSUPPORTED_API, UNSUPPORTED_APIS, same_release
from grader.worker import known_errors

FILES = ROOT / "tests" / "files"
BLOCK_PTR = FILES / "task10_block_ptr.py"
HAS_BLOCK_PTR = any(same_release(triton.__version__, v) for v in UNSUPPORTED_APIS["tl.make_block_ptr"].works_with)
TRITONS = Tritons(installed="3.9.0", course="3.6.0")


def _raised(call) -> BaseException:
    try:
        call()
    except BaseException as exc:  # noqa: BLE001 - the exception is what the test looks at
        return exc
    raise AssertionError("the call did not raise")


@pytest.mark.skipif(HAS_BLOCK_PTR, reason="this triton has block pointers")
def test_the_worker_names_a_removed_api_where_it_is_raised(monkeypatch):
    """The interpreter's InterpreterError, raised from the NotImplementedError of tl.make_block_ptr's own frame, is
    named by the table's row; a NotImplementedError of the student's own is not, whatever its text says."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")

    @triton.jit
    def copy(x_ptr, n, B: tl.constexpr):
        block = tl.make_block_ptr(x_ptr, shape=(n,), strides=(1,), offsets=(0,), block_shape=(B,), order=(0,))
        tl.store(block, tl.load(block, boundary_check=(0,)), boundary_check=(0,))

    exc = _raised(lambda: copy[(1,)](torch.zeros(16), 16, B=16))
    assert known_errors.classify(exc, __file__) == {"error_kind": UNSUPPORTED_API, "api": "tl.make_block_ptr"}

    def own() -> None:
        raise NotImplementedError("Block pointers have been removed in favor of the tensor descriptor API")

    assert known_errors.classify(_raised(own), __file__) == {}


def test_a_missing_attribute_of_triton_language_is_named():
    """A release that drops the name altogether raises AttributeError on triton.language: named too; the same
    name missing on any other object is not."""
    exc = AttributeError("module 'triton.language' has no attribute 'advance'", name="advance", obj=tl)
    assert known_errors.unsupported_api(exc) == "tl.advance"
    assert known_errors.unsupported_api(AttributeError("no", name="advance", obj=torch)) is None
    assert known_errors.unsupported_api(AttributeError("no", name="load", obj=tl)) is None


def test_the_worker_finds_an_assert_that_asks_for_cuda(tmp_path):
    src = tmp_path / "sub.py"
    src.write_text(textwrap.dedent('''
        import torch

        def on_cuda(x):
            assert x.is_cuda, "x must be on the GPU"

        def device_type(x):
            assert (x.device.type
                    == "cuda")

        def available(x):
            assert torch.cuda.is_available()

        def contiguous(x):
            assert x.dim() == 2, "x must be 2-D"
    '''))
    namespace: dict = {}
    exec(compile(src.read_text(), str(src), "exec"), namespace)  # noqa: S102 - the test's own file
    x = torch.zeros(3)
    for name in ("on_cuda", "device_type"):
        assert known_errors.classify(_raised(lambda n=name: namespace[n](x)), str(src)) == {
            "error_kind": CUDA_ASSERT}, name
    if not torch.cuda.is_available():
        assert known_errors.classify(_raised(lambda: namespace["available"](x)), str(src)) == {
            "error_kind": CUDA_ASSERT}
    # an assert on anything else, and an AssertionError raised outside the submission, are not
    assert known_errors.classify(_raised(lambda: namespace["contiguous"](x)), str(src)) == {}
    assert known_errors.classify(_raised(lambda: namespace["on_cuda"](x)), str(tmp_path / "other.py")) == {}


def test_the_judge_words_a_known_error_from_its_table_alone():
    raw = {"error": "InterpreterError: NotImplementedError('<worker text>')", "where": ["line 18 in k: b = ..."]}
    named = {**raw, "error_kind": UNSUPPORTED_API, "api": "tl.make_block_ptr"}
    text = error_problem(named, "cpu", TRITONS)
    assert text.startswith("tl.make_block_ptr is not in triton 3.9.0 (installed here); the course's GPU runs "
                           "triton 3.6.0, where it exists: this check cannot grade it here (line 18 in k: b = ...)")
    assert "<worker text>" not in text and "raised" not in text
    # where the installed triton has it, the error is the kernel's own; an API the table lacks is ignored
    assert error_problem(named, "cpu", Tritons("3.6.1", "3.6.0")).startswith("raised InterpreterError")
    assert error_problem({**named, "api": "tl.<b>"}, "cpu", TRITONS).startswith("raised InterpreterError")
    assert error_problem(raw, "cpu", TRITONS).startswith("raised InterpreterError")
    # a course on another release: the releases that have it, and no word about the course's GPU
    assert "triton 3.6 has it" in error_problem(named, "cpu", Tritons("3.9.0", "3.9.0"))
    inline = error_problem({**raw, "error_kind": UNSUPPORTED_API, "api": "tl.inline_asm_elementwise"}, "cpu",
                           TRITONS)
    assert inline.startswith("tl.inline_asm_elementwise runs on a GPU only: Triton's interpreter")
    # the CUDA-assert note: on the CPU only, and only for that kind
    failed = {"error": "AssertionError: x must be on the GPU", "where": ["line 5 in f: assert x.is_cuda"]}
    assert error_problem({**failed, "error_kind": CUDA_ASSERT}, "cpu", TRITONS).endswith(CUDA_ASSERT_NOTE)
    assert CUDA_ASSERT_NOTE not in error_problem({**failed, "error_kind": CUDA_ASSERT}, "cuda", TRITONS)
    assert CUDA_ASSERT_NOTE not in error_problem(failed, "cpu", TRITONS)
    assert CUDA_ASSERT_NOTE not in error_problem({**failed, "error_kind": "<b>"}, "cpu", TRITONS)


def test_each_failing_case_says_what_the_cpu_check_cannot_do(task10, tmp_path):
    """Graded on the CPU (one case): the block-pointer file, a right answer with `assert x.is_cuda` in its wrapper,
    the same with `assert torch.cuda.is_available()` when imported, and a wrong one (truncation). Each known
    error's message is every failing case's, and neither appears for the wrong answer."""
    task = dataclasses.replace(task10, cases=[c for c in task10.cases if c.id == "n1023_fp32"], perf=[])
    right = (task10.folder / "right" / "absmax_one_element.py").read_text()
    asserting = tmp_path / "asserts_cuda.py"
    asserting.write_text(right.replace("def quantize_global(x: torch.Tensor):\n",
                                       "def quantize_global(x: torch.Tensor):\n"
                                       "    assert x.is_cuda, \"x must be on the GPU\"\n", 1))
    assert "assert x.is_cuda" in asserting.read_text()
    on_import = tmp_path / "asserts_on_import.py"  # the same, asked of the machine when the file is imported
    on_import.write_text(right.replace("\nimport torch\n", "\nimport torch\n\nassert torch.cuda.is_available()\n", 1))
    assert "assert torch.cuda" in on_import.read_text()
    jobs = [Job(task, BLOCK_PTR, "block_ptr"), Job(task, asserting, "asserts"),
            Job(task, task10.folder / "wrong" / "truncate.py", "wrong")]
    if not torch.cuda.is_available():
        jobs.append(Job(task, on_import, "on_import"))
    cfg = load_config()
    results = {r.student: r for r in grade_jobs(jobs, cfg, "cpu", workers=min(3, os.cpu_count() or 1))}
    cases = {s: [t for t in r.tests if t.name == "n1023_fp32"] for s, r in results.items()}
    assert all(len(c) == 1 for c in cases.values())

    (block,) = cases["block_ptr"]
    if HAS_BLOCK_PTR:
        assert block.outcome == "passed", block.message
    else:
        assert block.outcome == "failed"
        course = cfg.toolchain.get("triton", "")
        assert f"- tl.make_block_ptr is not in triton {triton.__version__} (installed here); the course's GPU runs " \
               f"triton {course}, where it exists: this check cannot grade it here" in block.message, block.message
        assert "NotImplementedError" not in block.message and "Traceback" not in block.message

    (asserts,) = cases["asserts"]
    assert asserts.outcome == "failed"
    assert "raised AssertionError: x must be on the GPU" in asserts.message
    assert CUDA_ASSERT_NOTE in asserts.message

    if "on_import" in cases:
        (imported,) = cases["on_import"]
        assert imported.message.startswith("not run: importing the submission failed: AssertionError")
        assert imported.message.endswith(CUDA_ASSERT_NOTE)

    (wrong,) = cases["wrong"]
    assert wrong.outcome == "failed"
    assert CUDA_ASSERT_NOTE not in wrong.message and "this check cannot grade it here" not in wrong.message
    for t in results["wrong"].tests:  # nor does any other test of the wrong answer
        assert CUDA_ASSERT_NOTE not in t.message and "cannot grade it here" not in t.message, t



def test_the_kit_readme_says_what_the_cpu_check_cannot_grade():
    from grader.authoring import release

    hw_id = next(iter(load_config().homeworks))
    hw, tasks = release.homework_tasks(hw_id)
    text = release.kit_readme(hw, tasks)
    section = text.split("## What the check on a CPU cannot grade", 1)[1].split("\n## ", 1)[0]
    assert "tl.make_block_ptr is not in triton" in section and "assert x.is_cuda" in section
    assert f"triton {release.toolchain_of()['triton']}" in section
