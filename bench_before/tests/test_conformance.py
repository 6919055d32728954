"""The interpreter reads a kernel as the course's compiler does: conformance/constructs.py's kernels, interpreted
here (stock, and patched as the grader's CPU worker runs them), against the outputs recorded on a GPU box with the
course's toolchain (conformance/gpu_record.json, made by `python conformance/run.py record --device cuda`)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from conformance import run  # noqa: E402

RECORD = ROOT / "conformance" / "gpu_record.json"


@pytest.fixture(scope="module")
def table() -> list[dict]:
    gpu = json.loads(RECORD.read_text())
    return run.compare(gpu, run.interpreted(stock=True), run.interpreted(stock=False))


def test_the_record_is_the_course_toolchain_on_a_gpu():
    gpu = json.loads(RECORD.read_text())
    toolchain = yaml.safe_load((ROOT / "config.yaml").read_text())["toolchain"]
    assert gpu["device"] == "cuda" and gpu["gpu"]
    assert (gpu["triton"], gpu["torch"]) == (toolchain["triton"], toolchain["torch"]), (
        "config.yaml's toolchain changed: record the GPU's outputs again on a box that has it")


def test_every_construct_agrees_or_is_named(table):
    from conformance.constructs import CONSTRUCTS

    assert len(table) == len(CONSTRUCTS) >= 60
    differs = [f"{r['construct']}: {r['why']}" for r in table if r["verdict"] == "DIFFERS"]
    assert not differs, "the interpreter and the GPU disagree:\n" + "\n".join(differs)


def test_the_grader_patches_are_what_makes_them_agree(table):
    """Each patch is proven able to fail: without it, the stock interpreter disagrees on its constructs."""
    fixed = {r["construct"] for r in table if r["verdict"] == "fixed"}
    for name in ("rank-0 value indexed [None, :]",  # patch_language_rank0_index
                 "a * b + c in float32 (the compiler may contract it to an FMA)",  # patch_interpreter_numerics
                 "float32 to int8 and uint8 out of range (undefined in C: what each device does)",
                 "float32 to float16 (round to nearest even and rtz) and to bfloat16",
                 "Python min and max of two blocks and of a block and a scalar",  # patch_interpreter_minmax
                 "libdevice rint, round, llrint, trunc, nearbyint, float2int_rn (halves included)"):
        assert name in fixed, f"{name}: expected the stock interpreter to disagree and the patched one to agree"


def test_a_named_construct_really_differs(table):
    named = [r for r in table if r["verdict"] == "named"]
    assert {r["construct"] for r in named} == set(run.NAMED)
