"""Notebooks graded as handed in (grader/gates/notebook.py): a notebook holding several puzzles (with a markdown
cell, the notebook's harness, test calls, prints and magics) gives each puzzle exactly the code it needs, which
the static check accepts and which earns what the .py earns; a refused line is cited by its cell and line, in the
static check's messages and in the worker's; `batch` and `grade-dir` find the notebook."""

import ast
import hashlib

import nbformat
import pytest

from grader import cli
from grader.config import ROOT, Homework, load_config, load_task
from grader.course import batch
from grader.course.batch import run_batch
from grader.gates import static
from grader.gates.notebook import Notebook, NotebookFolder
from grader.pipeline import grading
from grader.pipeline.grading import Job, TaskResult, grade_jobs
from grader.results import report

TASKS = ROOT / "tasks"
P01, P02, P03 = "puzzle01_constant_add", "puzzle02_constant_add_block", "puzzle03_outer_vector_add"

HARNESS = '''!pip install triton-viz
%matplotlib inline
import inspect
import numpy as np
import torch
import triton
import triton.language as tl


def test(puzzle, spec, nelem={}):
    print(inspect.getsource(puzzle))
    return np.zeros(3)
'''

TEST_CELL = '''%time test(add_kernel, None)
x = torch.arange(32.0)
z = torch.zeros(32)
add_mask2_kernel[(1,)](x, z, 32, B0=32)
print(z)
'''


def _solution(task_id: str) -> str:
    return (TASKS / task_id / "solution.py").read_text()


def _puzzle_cell(task_id: str, source: str | None = None) -> str:
    """A puzzle's cell as a student writes it: the kernel, then a test call and a print."""
    return (source or _solution(task_id)) + "\nx = torch.randn(32)\ntest(None, None)\nprint(x)\n"


def _notebook(*cells: str) -> bytes:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# Triton Puzzles\nSolve each puzzle in its cell.")]
    nb.cells += [nbformat.v4.new_code_cell(c) for c in cells]
    return nbformat.writes(nb).encode()


def _class_notebook(p02: str | None = None) -> bytes:
    """Markdown, the harness (code cell 1), puzzles 1-3 (code cells 2-4), a cell of test calls (code cell 5)."""
    return _notebook(HARNESS, _puzzle_cell(P01), _puzzle_cell(P02, p02), _puzzle_cell(P03), TEST_CELL)


def _line_of(text: str, needle: str) -> int:
    return next(k for k, line in enumerate(text.splitlines(), start=1) if needle in line)


@pytest.fixture(scope="module")
def cfg():
    return load_config(ROOT / "config.yaml")


def test_each_puzzle_gets_exactly_its_code_and_the_static_check_accepts_it(cfg):
    book = Notebook(_class_notebook(), "puzzles.ipynb")
    for task_id, cell in ((P01, 2), (P02, 3), (P03, 4)):
        task = load_task(TASKS / task_id)
        part = book.extract(task)
        text = part.source.decode()
        tree = ast.parse(text)
        kernel = next(iter(task.kernels))
        # the kernel as the solution writes it, and the two imports it needs: nothing else
        assert [ast.unparse(n) for n in tree.body] == ["import triton", "import triton.language as tl",
                                                       ast.unparse(ast.parse(_solution(task_id)).body[-1])]
        assert part.defines and part.cells == (1, cell)
        for other in ("inspect", "numpy", "torch", "print", "test(", "%", "!pip", "randn"):
            assert other not in text, (task_id, other)
        report = static.check_source(text, task, cfg.always_allowed_imports, "puzzles.ipynb")
        assert report.ok, report.imports + report.signatures
        # every line cites its cell and its line there
        def_line = _line_of(_solution(task_id), "def ")
        assert part.where(_line_of(text, f"def {kernel}")) == f"code cell {cell}, line {def_line}"
        assert part.where(_line_of(text, "import triton.language")) == "code cell 1, line 7"
    # the notebook's code as a whole is refused (its harness imports inspect): extraction is what makes it pass
    whole = "\n".join(c for c in HARNESS.splitlines() if c[:1] not in "%!")
    assert not static.check_source(whole, load_task(TASKS / P01), cfg.always_allowed_imports).ok
    # a puzzle it does not hold is not submitted
    assert not book.extract(load_task(TASKS / "puzzle04_outer_vector_add_block")).defines


def test_what_a_kernel_uses_comes_with_it_and_nothing_more():
    """Helpers, constants, config lists changed in place, from any cell: what a kernel reads as a global; its
    own locals (`x`) never pull in a cell's `x = ...`; the last definition of a name wins, as in the notebook."""
    task = load_task(TASKS / P02)
    helper = '''import triton
import triton.language as tl
OFFSET = 1.0
configs = [triton.Config({"B0": 16})]
'''
    kernel = '''configs.append(triton.Config({"B0": 32}))  # changes a kept list: kept


@triton.jit
def _plus(x, c: tl.constexpr):
    return x + c + OFFSET


@triton.autotune(configs=configs, key=["N0"])
@triton.jit
def add_mask2_kernel(x_ptr, z_ptr, N0, B0: tl.constexpr):
    idx = tl.program_id(0) * B0 + tl.arange(0, B0)
    x = tl.load(x_ptr + idx, mask=idx < N0)
    tl.store(z_ptr + idx, _plus(x, 9.0), mask=idx < N0)
x = torch.ones(3); print(x)
'''
    later = "OFFSET = 1.0  # run after the kernel's cell: the value the notebook ends with\nunused = 5\n"
    part = Notebook(_notebook("import torch\n", helper, kernel, later), "nb.ipynb").extract(task)
    text = part.source.decode()
    names = [n for stmt in ast.parse(text).body for n in static._bound_names(stmt)]
    names += [t.id for stmt in ast.parse(text).body if isinstance(stmt, ast.Assign) for t in stmt.targets
              if isinstance(t, ast.Name)]
    assert sorted(names) == sorted(["triton", "tl", "OFFSET", "configs", "_plus", "add_mask2_kernel", "OFFSET"])
    assert "configs.append" in text and "torch" not in text and "unused" not in text
    assert text.rindex("OFFSET = 1.0") > text.index("def add_mask2_kernel") > text.index("OFFSET = 1.0")
    assert part.cells == (2, 3, 4)
    assert "# code cell 3, line 1\n" in text  # a block headed by where it comes from


def test_ipython_lines_go_and_a_kernel_cell_that_does_not_parse_is_reported_at_its_line(cfg):
    """Magics at the start of a statement go (a `%` continuing an expression is Python's modulo and stays); a
    `%%bash` cell is not code; a kernel's cell with a syntax error is kept whole, so the static check reports
    the error at its cell and line, as it would in a .py."""
    task = load_task(TASKS / P02)
    kernel = _solution(P02).replace("inside = idx < N0", "inside = idx < (N0\n              % 100000)")
    book = Notebook(_notebook("%%bash\nimport os\n", "%load_ext autoreload\n" + kernel + "!ls\nfor i in range(2):\n"
                              "    %time print(i)\n"), "nb.ipynb")
    part = book.extract(task)
    text = part.source.decode()
    assert "% 100000)" in text and "autoreload" not in text and "os" not in text and part.cells == (2,)
    assert static.check_source(text, task, cfg.always_allowed_imports).ok
    broken = kernel.replace("x + 10.0, mask=inside)", "x + 10.0, mask=inside")
    part = Notebook(_notebook(HARNESS, "%matplotlib inline\n" + broken, TEST_CELL), "nb.ipynb").extract(task)
    report = static.check_source(part.source.decode(), task, cfg.always_allowed_imports, "nb.ipynb")
    assert part.defines and not report.ok
    where = _line_of("%matplotlib inline\n" + broken, "x + 10.0, mask=inside")
    assert part.translate(report.imports[0]).startswith(f"nb.ipynb, code cell 2, line {where}: syntax error")


def test_a_notebook_earns_what_its_py_earns_and_messages_cite_its_cells(tmp_path, cfg):
    """Graded on the CPU in one run: puzzle 2 from the notebook and from solution.py (same score); a notebook
    whose puzzle-2 kernel reads past the end (the worker's message cites the cell); one whose cell imports os
    for a constant the kernel uses, and calls getattr (the static check's messages cite the cell)."""
    task = load_task(TASKS / P02)
    task = task.subset({"n32_b32", "n5_b16"})
    unmasked = (TASKS / P02 / "wrong" / "load_unmasked.py").read_text()
    refused = _solution(P02).replace("import triton\n", "import os\nimport triton\nSHIFT = len(os.sep)\n", 1)
    refused = refused.replace("tl.load(x_ptr + idx, mask=inside)", "getattr(tl, 'load')(x_ptr + idx, mask=inside)")
    refused = refused.replace("x + 10.0,", "x + 10.0 * SHIFT,")
    assert "getattr" in refused and "SHIFT," in refused
    files = {}
    for name, data in (("good", _class_notebook()), ("unmasked", _class_notebook(unmasked)),
                       ("refused", _class_notebook(refused))):
        files[name] = tmp_path / name / "puzzles.ipynb"
        files[name].parent.mkdir()
        files[name].write_bytes(data)
    jobs = [Job(task, files["good"], "nb"), Job(task, TASKS / P02 / "solution.py", "py"),
            Job(task, files["unmasked"], "unmasked"), Job(task, files["refused"], "refused")]
    good, py, wrong, bad = grade_jobs(jobs, cfg, "cpu", workers=2)
    assert good.score == py.score == good.max_score == 0.5, report.summary(good) + report.summary(py)
    assert good.submission_sha256 == hashlib.sha256(jobs[0].source).hexdigest() != py.submission_sha256
    assert "def add_mask2_kernel" in good.staff["notebook"]["graded_source"]

    # the worker's word: the address check cites the unmasked load by the notebook's cell and line
    cell3 = _puzzle_cell(P02, unmasked)
    load_line = _line_of(cell3, "x = tl.load(x_ptr + idx)")
    failed = {t.name: t.message for t in wrong.tests if t.outcome != "passed"}
    assert set(failed) == {"n5_b16"}, report.summary(wrong)
    assert f"add_mask2_kernel (code cell 3, line {load_line}): tl.load read" in failed["n5_b16"]

    # the static check's word: each refusal at its cell and line; nothing ran
    cell3 = _puzzle_cell(P02, refused)
    imports = {t.name: t.message for t in bad.tests}["imports"]
    assert f"puzzles.ipynb, code cell 3, line {_line_of(cell3, 'import os')}: import os is not allowed" in imports
    assert f"puzzles.ipynb, code cell 3, line {_line_of(cell3, 'getattr')}: use of getattr is not allowed" in imports
    assert bad.checks["imports"][0].startswith("puzzles.ipynb, code cell 3, line ")
    assert bad.score == 0 and "worker_exit" not in bad.staff
    print(report.summary(bad))


def test_batch_and_grade_dir_find_the_notebook(tmp_path, monkeypatch, cfg):
    """A student folder with one notebook: each task it defines and that has no <task_id>.py is graded from it
    (its extracted source, hashed for the ledger); a .py beside it wins for its task; a task it does not define
    is not submitted."""
    tasks = {t: load_task(TASKS / t) for t in (P01, P02, P03, "puzzle04_outer_vector_add_block")}
    root = tmp_path / "subs"
    (root / "ann").mkdir(parents=True)
    (root / "ann" / "puzzles.ipynb").write_bytes(_class_notebook())
    (root / "ann" / f"{P03}.py").write_text(_solution(P03))
    seen: list[Job] = []

    def fake_grade(jobs, cfg, device, workers, on_result=None, **_):
        seen.extend(jobs)
        out = []
        for job in jobs:
            out.append(TaskResult(task=job.task.id, student=job.student, submission=str(job.submission),
                                  score=job.task.points, max_score=job.task.points, tests=[], checks={},
                                  environment={}, submission_sha256=job.sha256, graded_at="2026-11-01T00:00:00+00:00"))
            if on_result:
                on_result(out[-1])
        return out

    monkeypatch.setattr(batch, "grader_version", lambda *args: "v")  # resume below must not see the tree being edited
    hw = Homework(id="puzzles", title="P", tasks={t: 1.0 for t in tasks}, deadline=None, max_attempts=5,
                  late_penalty_per_day=0.1, late_max_days=5, counts="best")
    rows = run_batch(root, hw, tasks, cfg, "cpu", tmp_path / "results", grade=fake_grade, show=lambda s: None)
    by_task = {j.task.id: j for j in seen}
    assert sorted(by_task) == [P01, P02, P03]
    for t in (P01, P02):
        job = by_task[t]
        assert job.submission.name == "puzzles.ipynb" and job.notebook is not None
        assert job.source == Notebook(_class_notebook(), "puzzles.ipynb").extract(tasks[t]).source
    assert by_task[P03].submission.name == f"{P03}.py" and by_task[P03].notebook is None
    assert rows["ann"][P01] == 1.0 and rows["ann"]["puzzle04_outer_vector_add_block"] == ""
    # resume: the same notebook again grades nothing (the ledger holds the extracted sources' hashes)
    seen.clear()
    run_batch(root, hw, tasks, cfg, "cpu", tmp_path / "results", grade=fake_grade, show=lambda s: None)
    assert seen == []

    # grade-dir: the same discovery (every task of the course the notebook defines)
    monkeypatch.setattr(grading, "grade_jobs", fake_grade)
    assert cli.main(["grade-dir", str(root / "ann"), "--out", str(tmp_path / "checks"), "--device", "cpu"]) == 0
    assert sorted(j.task.id for j in seen) == [P01, P02, P03]
    assert {j.task.id: j.submission.suffix for j in seen} == {P01: ".ipynb", P02: ".ipynb", P03: ".py"}

    # a notebook that is not one: a note, nothing graded from it
    (root / "bob").mkdir()
    (root / "bob" / "puzzles.ipynb").write_text("{not json")
    folder = NotebookFolder(root / "bob")
    assert folder.for_task(tasks[P01]) is None
    assert folder.problems and "cannot be read as a Jupyter notebook" in folder.problems[0]


def test_gradescope_run_finds_the_notebook_at_any_depth(tmp_path, monkeypatch):
    """Gradescope's run: an uploaded notebook (a zip may nest it) submits each task of the homework it defines
    that has no <task_id>.py; a task it does not define gets the missing-file entry, which names notebooks too."""
    import json

    from grader.course import gradescope
    from grader.pipeline import grading

    sub = tmp_path / "submission" / "nested"
    sub.mkdir(parents=True)
    (sub / "puzzles.ipynb").write_bytes(_class_notebook())
    seen: list[Job] = []

    def fake_grade(jobs, cfg, device, workers, **_):
        seen.extend(jobs)
        return [TaskResult(task=j.task.id, student=j.student, submission=str(j.submission), score=0.0,
                           max_score=j.task.points, tests=[], checks={}, environment={},
                           submission_sha256=j.sha256, graded_at="2026-11-01T00:00:00+00:00") for j in jobs]

    monkeypatch.setattr(grading, "grade_jobs", fake_grade)
    results = tmp_path / "results" / "results.json"
    assert gradescope.run("puzzles", tmp_path / "submission", results, device="cpu") == 0
    assert sorted(j.task.id for j in seen) == [P01, P02, P03]
    assert all(j.notebook is not None and j.submission.name == "puzzles.ipynb" for j in seen)
    data = json.loads(results.read_text())
    missing = [t for t in data["tests"] if t["name"].endswith("/ file")]
    assert len(missing) == 9 and all("nor a notebook defining its kernels" in t["output"] for t in missing)


def _chain_notebook(links: int, pad_mib: int = 0) -> bytes:
    """Puzzle 1's solution adding `a<links>`, bound by a chain `a1 = a0`, `a2 = a1`, ... in a cell before it (every
    link is needed); `pad_mib` MiB of base64 output on the chain's cell (a notebook's limit is for outputs)."""
    import base64
    import random

    solution = (TASKS / P01 / "solution.py").read_text()
    assert "+ 10.0)" in solution
    chain = nbformat.v4.new_code_cell("a0 = 10.0\n" + "".join(f"a{i} = a{i - 1}\n" for i in range(1, links + 1)))
    if pad_mib:
        png = base64.b64encode(random.Random(0).randbytes(pad_mib * 3 << 18)).decode()
        chain.outputs = [nbformat.v4.new_output("display_data", data={"image/png": png})]
    kernel = nbformat.v4.new_code_cell(solution.replace("+ 10.0)", f"+ a{links})", 1))
    return nbformat.writes(nbformat.v4.new_notebook(cells=[chain, kernel])).encode()


def test_a_chain_of_assignments_is_extracted_in_one_pass(tmp_path):
    """A hostile notebook: 20,000 links (318 KB) took over 120 s to extract, quadratic in the chain, in the trusted
    process (the server's grading path, `batch`, `grade-dir`, `similarity`), and held a classmate's verdict back.
    The closure is now a worklist (about 0.7 s here, parsing included). The bound below is 60 s, far from both: it
    says the extraction is not quadratic, it measures nothing."""
    import subprocess
    import sys

    path = tmp_path / "chain.ipynb"
    path.write_bytes(_chain_notebook(20_000))
    code = ("import sys; from grader.config import ROOT, load_task; from grader.gates.notebook import Notebook; "
            f"task = load_task(ROOT / 'tasks' / {P01!r}); "
            "part = Notebook(open(sys.argv[1], 'rb').read(), 'chain.ipynb').extract(task); "
            "print(b'a0 = 10.0' in part.source, b'+ a20000)' in part.source, part.source.count(b'\\n'))")
    try:
        done = subprocess.run([sys.executable, "-c", code, str(path)], cwd=ROOT, capture_output=True, text=True,
                              timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("extracting a 20,000-link chain took over 60 s: the closure is quadratic again")
    assert done.returncode == 0, done.stderr[-2000:]
    kept_first, kept_kernel, lines = done.stdout.split()
    assert kept_first == kept_kernel == "True" and int(lines) > 20_000  # every link kept: each one is needed


def test_a_notebooks_code_is_bounded_as_a_py_is():
    """A notebook may be 32 MiB for its outputs, but its code cells together hold at most a .py's 1 MiB: past it,
    nothing is parsed or graded and the student is told why (a 32 MiB notebook of code would take the trusted
    process a minute to parse). Just under it, the notebook is graded as usual."""
    from grader.gates.intake import MAX_SOURCE_BYTES

    task = load_task(TASKS / P01)
    over = Notebook(_chain_notebook(70_000, pad_mib=8), "big.ipynb")
    assert over.problem and "over the grader's limit of 1048576 bytes of code" in over.problem, over.problem
    part = over.extract(task)
    assert part.source.startswith(b"# not a notebook") and over.problem in part.problems
    under = _chain_notebook(1_000, pad_mib=8)
    assert len(under) > 8 << 20 and sum(len(c) for c in Notebook(under, "ok.ipynb").cells[0].lines) < MAX_SOURCE_BYTES
    ok = Notebook(under, "ok.ipynb")
    assert ok.problem is None and b"+ a1000)" in ok.extract(task).source
