"""Tasks whose harness launches the kernel (task.yaml `launch`, the Triton Puzzles): kernels of either edition of
the puzzles grade unchanged, a kernel written for the notebook grades as it is, and failing cases get a picture."""

import struct
import zlib

import pytest
import torch

from grader.config import ROOT, ConfigError, load_config, load_task
from grader.judge import pictures
from grader.pipeline.grading import Job, grade_jobs
from grader.protocol import guards
from grader.results import report


@pytest.fixture(scope="module")
def cfg():
    return load_config(ROOT / "config.yaml")


def _grade(cfg, task, path):
    (result,) = grade_jobs([Job(task, path, "tester")], cfg, "cpu")
    return result


def test_lite_and_original_signatures_grade_alike(tmp_path, cfg):
    """Puzzle 9: the original kernel has only B0; the Lite one adds B1, which the harness passes only to it."""
    task = load_task(ROOT / "tasks" / "puzzle09_simple_flashattention")
    task = task.subset({c.id for c in task.cases[:2]})
    original = (task.folder / "solution.py").read_text()
    lite = original.replace("N0, T, B0: tl.constexpr):", "N0, T, B0: tl.constexpr, B1: tl.constexpr):")
    lite = lite.replace("range(0, T, CHUNK)", "range(0, T, B1)").replace("tl.arange(0, CHUNK)", "tl.arange(0, B1)")
    assert lite.count("B1") == 3
    for name, source in (("original.py", original), ("lite.py", lite)):
        path = tmp_path / name
        path.write_text(source)
        result = _grade(cfg, task, path)
        assert result.score == result.max_score, report.summary(result)


NOTEBOOK_STYLE = '''
import torch
import triton
import triton.language as tl


@triton.jit
def add_mask2_kernel(x_ptr, z_ptr, N0, B0: tl.constexpr):
    pid = tl.program_id(0)
    off_x = pid * B0 + tl.arange(0, B0)
    x = tl.load(x_ptr + off_x, off_x < N0)
    z = x + 10.0
    tl.store(z_ptr + off_x, z, off_x < N0)
    return
'''


def test_a_notebook_kernel_grades_unchanged_and_a_wrong_one_gets_a_picture(tmp_path, cfg):
    task = load_task(ROOT / "tasks" / "puzzle02_constant_add_block")
    path = tmp_path / "puzzle02.py"
    path.write_text(NOTEBOOK_STYLE)
    result = _grade(cfg, task, path)
    assert result.score == result.max_score, report.summary(result)
    assert not result.pictures

    path.write_text(NOTEBOOK_STYLE.replace("tl.store(z_ptr + off_x, z, off_x < N0)", "tl.store(z_ptr + off_x, z)"))
    result = _grade(cfg, task, path)
    failed = {t.name: t for t in result.tests if t.outcome != "passed"}
    assert set(failed) == {"notebook", "n1000_b128", "n5_b16"}
    assert "out-of-bounds write: 11 element(s) around z (float32, shape [5])" in failed["n5_b16"].message
    assert "past the end (offsets +0, +1, +2, +3, +4)" in failed["n5_b16"].message
    report.save_pictures(result, tmp_path / "pictures")
    png = tmp_path / "pictures" / "puzzle02_constant_add_block.n5_b16.png"
    assert failed["n5_b16"].picture == str(png) and png.read_bytes().startswith(b"\x89PNG")
    assert f"picture: {png}" in report.summary(result)
    tests = {t["name"]: t for t in result.student_json()["tests"]}
    # the student's view names the picture beside the result, never a path of the grading machine
    assert tests["n5_b16"]["picture"] == png.name and "picture" not in tests["n32_b32"]
    assert result.staff_json()["tests"][[t.name for t in result.tests].index("n5_b16")]["picture"] == str(png)


def test_launch_config_errors(tmp_path):
    folder = tmp_path / "p"
    (folder / "wrong").mkdir(parents=True)
    base = (ROOT / "tasks" / "puzzle01_constant_add" / "task.yaml").read_text()
    base = base.replace("id: puzzle01_constant_add", "id: p").split("wrong:")[0]
    (folder / "task.yaml").write_text(base.replace("grid: [N0/B0, N1/B1, N2/B2]", "grid: [N0 // B0]"))
    with pytest.raises(ConfigError, match="SIZE/BLOCK"):
        load_task(folder)
    (folder / "task.yaml").write_text(base.replace("kernel: add_kernel", "kernel: other_kernel"))
    with pytest.raises(ConfigError, match="must be listed under kernels"):
        load_task(folder)
    (folder / "task.yaml").write_text(base.replace("tiles: [N0/B0]", "tiles: [T/B9]"))
    with pytest.raises(ConfigError, match="tiles"):
        load_task(folder)
    (folder / "task.yaml").write_text(base)
    task = load_task(folder)
    assert task.entry == "add_kernel" and task.launch.grid[0] == ("N0", "B0") and task.pictures


def test_input_poison_differs_from_output_poison():
    """A kernel that copies an input's guard band into an output's must still damage the output's band (on the
    CPU a NaN keeps its payload through arithmetic)."""
    for dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
        assert guards.poison_bits(dtype, input=True) != guards.poison_bits(dtype)
        _, view, _ = guards.guarded_copy(torch.zeros(3, dtype=dtype), "cpu")
        _, out, _ = guards.guarded_empty((3,), dtype, "cpu")
        assert (guards.bits_view(out) == guards.poison_bits(dtype)).all()
    assert guards.poison_bits(torch.int32, input=True) == guards.poison_bits(torch.int32)


def test_pictures_mark_every_kind_of_problem_and_the_plain_writer_makes_a_png():
    got = torch.zeros(4, 6)
    bad = torch.zeros(4, 6, dtype=torch.bool)
    bad[0, 0] = True
    poison = torch.zeros(4, 6, dtype=torch.bool)
    poison[3, 5] = True
    got[2, 2] = float("nan")
    state = pictures.classify(got, bad, poison)
    assert state[0, 0] == pictures.WRONG and state[3, 5] == pictures.UNWRITTEN and state[2, 2] == pictures.NAN
    assert pictures.owners(state, [(2, 1), (4, 0)]) == [(0, 0, 0), (0, 1, 0), (1, 1, 0)]
    png, line = pictures.render("z", "t", state, before=[-1, -7], after=[0, 13], tiles=[(2, 1), (4, 0)])
    assert png.startswith(b"\x89PNG") and "(0, 0, 0), (0, 1, 0), (1, 1, 0)" in line
    plain = pictures._render_plain(torch.tensor([[0, 1], [4, 255]], dtype=torch.uint8), scale=1)
    width, height = struct.unpack(">II", plain[16:24])
    assert (width, height) == (2, 2)
    idat = plain[plain.index(b"IDAT") + 4 : plain.index(b"IEND") - 8]
    assert len(zlib.decompress(idat)) == 2 * (1 + 2 * 3)
