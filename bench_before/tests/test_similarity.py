"""The similarity report (grader/course/similarity.py): planted copies are found, independent work is not flagged.

The class is built from the INT8 tasks' own files: each task's solution.py, right/*.py, wrong/*.py and the demo
class's submissions, each handed in by a student of its own, plus planted copies of a few of them: every bound name
renamed and the top-level functions shuffled, once through the AST (`ast.unparse`: comments gone, code reformatted)
and once token by token (comments and layout kept), and a byte-identical copy.

Which files are independent is not taken on trust. Most of these files were made by editing the answer key (the
wrong/ files, the demo class), so they are grouped into lineages: two files are of one lineage when at least 60% of
the smaller one's non-comment, non-skeleton lines occur verbatim in the other, or when KNOWN_DERIVED says so (the
test checks that files of different lineages share under 45%: the cut is no borderline call). A pair of different
lineages counts as independent; a planted copy belongs to its original's lineage. The independent pairs are a hard
case: the right/ and cheat files are the same author's rewrites, with the same kernel under other names.
"""

from __future__ import annotations

import ast
import csv
import io
import itertools
import random
import tokenize
from pathlib import Path

import pytest

from grader.config import ROOT, Homework, discover_tasks, load_config
from grader.course import similarity as sim

HOMEWORK = "hw4_int8"
TASKS = ("10_quantize_global_int8", "11_quantize_rowwise_int8", "12_matmul_int8_fused_dequant",
         "13_quantize_global_transpose_int8", "14_backward_dx_int8_fused")
PLANT_FROM = {
    "10_quantize_global_int8": ("solution.py", "right/launcher_class.py", "right/absmax_one_element.py"),
    "11_quantize_rowwise_int8": ("solution.py", "right/helpers_and_config_function.py"),
    "12_matmul_int8_fused_dequant": ("wrong/launder_matmul.py",),
    "13_quantize_global_transpose_int8": ("right/absmax_zero_dim.py",),
    "14_backward_dx_int8_fused": ("solution.py",),
}
KNOWN_DERIVED = {
    # Only 42% verbatim lines, but the same file: the same kernel with its statements renamed or folded, the same
    # wrapper with the pointer replaced by a Python number (diff the two). The detector scores it above the
    # threshold, rightly.
    ("10_quantize_global_int8", "right/absmax_one_element.py", "right/absmax_python_float.py"),
}
LINEAGE_CUT, LINEAGE_GAP = 0.60, 0.45
WORDS = ("alpha", "beta", "gamma", "delta", "kappa", "sigma", "theta", "omega", "zeta", "rho", "tau", "phi")


# --- planting copies: renaming and reordering, written independently of the detector's own normalization ---------

def _bound(tree: ast.AST) -> tuple[set[str], set[str], set[str], set[str]]:
    """(names, stored attributes, parameters, import-bound names) of a module."""
    names, attrs, params, imported = set(), set(), set(), set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and not node.name.startswith("__"):
            names.add(node.name)
        elif isinstance(node, ast.arg) and node.arg != "self":
            params.add(node.arg)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            attrs.add(node.attr)
        elif isinstance(node, ast.alias) and node.name != "*":
            imported.add(node.asname or node.name.split(".")[0])
    return names | params | imported, attrs, params, imported


def _new_names(names: set[str], seed: int) -> dict[str, str]:
    rng = random.Random(seed)
    return {n: f"{rng.choice(WORDS)}_{i}" for i, n in enumerate(sorted(names))}


def _shuffled(items: list, movable: list[bool], seed: int) -> list:
    """`items` with the movable ones permuted among their places (never left in their order when two or more)."""
    slots = [i for i, m in enumerate(movable) if m]
    order = list(range(len(slots)))
    rng = random.Random(seed)
    while len(order) > 1 and order == sorted(order):
        rng.shuffle(order)
    out = list(items)
    for slot, j in zip(slots, order):
        out[slot] = items[slots[j]]
    return out


class _Rename(ast.NodeTransformer):
    def __init__(self, new: dict[str, str], attrs: set[str], params: set[str]):
        self.new, self.attrs, self.params = new, attrs, params

    def visit_Name(self, node: ast.Name) -> ast.Name:
        node.id = self.new.get(node.id, node.id)
        return node

    def visit_arg(self, node: ast.arg) -> ast.arg:
        node.arg = self.new.get(node.arg, node.arg)
        return self.generic_visit(node)

    def _def(self, node):
        node.name = self.new.get(node.name, node.name)
        return self.generic_visit(node)

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _def

    def visit_keyword(self, node: ast.keyword) -> ast.keyword:
        if node.arg in self.params:
            node.arg = self.new[node.arg]
        return self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> ast.Attribute:
        if node.attr in self.attrs:
            node.attr = self.new[node.attr]
        return self.generic_visit(node)

    def visit_alias(self, node: ast.alias) -> ast.alias:
        if node.name != "*" and (node.asname or "." not in node.name):
            node.asname = self.new[node.asname or node.name]
        return node


DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def ast_disguise(source: str, seed: int) -> str:
    """Every bound name renamed (imports get an alias), top-level functions and classes shuffled, `ast.unparse`."""
    tree = ast.parse(source)
    names, attrs, params, _ = _bound(tree)
    tree = _Rename(_new_names(names | attrs, seed), attrs, params).visit(tree)
    tree.body = _shuffled(tree.body, [isinstance(n, DEFS) for n in tree.body], seed)
    return ast.unparse(tree) + "\n"


def token_disguise(source: str, seed: int) -> str:
    """Every bound name but the imports' renamed in place (comments and layout kept), then the top-level functions
    and classes shuffled, each with its decorators and the comments above it."""
    names, attrs, params, imported = _bound(ast.parse(source))
    new = _new_names((names | attrs) - imported, seed)
    lines = source.splitlines(keepends=True)
    toks = list(tokenize.generate_tokens(io.StringIO(source).readline))
    depth, edits = 0, []
    for i, t in enumerate(toks):
        depth += t.string in "([{" and t.type == tokenize.OP
        depth -= t.string in ")]}" and t.type == tokenize.OP
        if t.type != tokenize.NAME or t.string not in new:
            continue
        after_dot = i > 0 and toks[i - 1].string == "."
        keyword_arg = depth > 0 and i + 1 < len(toks) and toks[i + 1].string == "="
        if (after_dot and t.string not in attrs) or (keyword_arg and t.string not in params):
            continue
        edits.append(t)
    for t in reversed(edits):
        (row, col), (_, end) = t.start, t.end
        lines[row - 1] = lines[row - 1][:col] + new[t.string] + lines[row - 1][end:]
    renamed = "".join(lines)
    tree = ast.parse(renamed)
    lines = renamed.splitlines(keepends=True)
    starts = [min([n.lineno] + [d.lineno for d in getattr(n, "decorator_list", [])]) for n in tree.body]
    cuts = [1] + starts[1:] + [len(lines) + 1]  # a statement's chunk runs to the next one's first line
    chunks = ["".join(lines[a - 1:b - 1]).rstrip("\n") + "\n\n\n" for a, b in zip(cuts, cuts[1:])]
    chunks = _shuffled(chunks, [isinstance(n, DEFS) for n in tree.body], seed)
    return "".join(chunks).rstrip("\n") + "\n"


# --- the class ------------------------------------------------------------------------------------------------

def _student(task: str, rel: str) -> str:
    """A student name per source file: `t10-solution`, `t10-wrong-no_tail_mask`, `demo-alice`."""
    if rel.startswith("submissions/"):
        return "demo-" + rel.split("/")[1]
    return f"t{task[:2]}-" + rel.removesuffix(".py").replace("/", "-")


def _own_lines(text: str, skeleton: set[str]) -> set[str]:
    stripped = (line.strip() for line in text.splitlines())
    return {s for s in stripped if s and not s.startswith("#") and s not in skeleton}


def _lineages(task: str, sources: dict[str, str], rel: dict[str, str]) -> dict[str, str]:
    """student -> a lineage representative (see the module's docstring)."""
    skeleton = {line.strip() for line in (ROOT / "tasks" / task / "skeleton.py").read_text().splitlines()}
    own = {s: _own_lines(text, skeleton) for s, text in sources.items()}
    parent = {s: s for s in sources}

    def find(s: str) -> str:
        while parent[s] != s:
            s = parent[s]
        return s

    shared = {(a, b): len(own[a] & own[b]) / max(1, min(len(own[a]), len(own[b])))
              for a, b in itertools.combinations(sources, 2)}
    for (a, b), share in shared.items():
        if share >= LINEAGE_CUT:
            parent[find(a)] = find(b)
    by_rel = {r: s for s, r in rel.items()}
    for t, a, b in KNOWN_DERIVED:
        if t == task:
            parent[find(by_rel[a])] = find(by_rel[b])
    for (a, b), share in shared.items():  # the cut is no borderline call: lineages stay clearly apart
        assert find(a) == find(b) or share < LINEAGE_GAP, f"{task}: {a} and {b} share {share:.0%} of their lines"
    return {s: find(s) for s in sources}


@pytest.fixture(scope="module")
def course() -> tuple[dict, object]:
    tasks, broken = discover_tasks()
    assert not set(TASKS) & set(broken)
    cfg = load_config(ROOT / "config.yaml", tasks)
    return tasks, cfg


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory, course: tuple[dict, object]) -> dict:
    """The class written to a submissions folder, the report run on it, and what each pair is."""
    root = tmp_path_factory.mktemp("similarity") / "submissions"
    kind: dict[tuple[str, str, str], str] = {}  # (task, a, b), a < b -> planted | derived | independent
    for task in TASKS:
        folder = ROOT / "tasks" / task
        files = {str(p.relative_to(folder)): p for p in [folder / "solution.py", *sorted(folder.glob("right/*.py")),
                                                         *sorted(folder.glob("wrong/*.py"))]}
        files.update({str(p.relative_to(ROOT)): p for p in sorted((ROOT / "submissions").glob(f"*/{task}.py"))})
        rel = {_student(task, r): r for r in files}
        sources = {s: files[r].read_text() for s, r in rel.items()}
        lineage = _lineages(task, sources, rel)
        origin = {s: s for s in sources}
        for i, r in enumerate(PLANT_FROM[task]):
            s = _student(task, r)
            for how, text in (("ast", ast_disguise(sources[s], i)), ("tok", token_disguise(sources[s], i)),
                              ("byte", sources[s])):
                copy = f"copy{how}-{s}"
                sources[copy], lineage[copy], origin[copy] = text, lineage[s], s
        for s, text in sources.items():
            (root / s).mkdir(parents=True, exist_ok=True)
            (root / s / f"{task}.py").write_text(text)
        for a, b in itertools.combinations(sorted(sources), 2):
            planted = (a != origin[a] or b != origin[b]) and origin[a] == origin[b]
            kind[task, a, b] = ("planted" if planted else "derived" if lineage[a] == lineage[b] else "independent")
    tasks, cfg = course
    paths = sim.similarity_report(root, cfg.homeworks[HOMEWORK], tasks, root.parent / "out")
    with paths[0].open() as f:
        rows = list(csv.DictReader(f))
    return {"paths": paths, "rows": rows, "kind": kind}


def _scores(report: dict, kind: str) -> list[dict]:
    return [r for r in report["rows"] if report["kind"][r["task"], r["student_a"], r["student_b"]] == kind]


def test_report_files_and_rows(report: dict) -> None:
    csv_path, html_path = report["paths"]
    assert csv_path.name == f"similarity_{HOMEWORK}.csv" and html_path.name == f"similarity_{HOMEWORK}.html"
    assert tuple(report["rows"][0]) == sim.CSV_FIELDS
    assert len(report["rows"]) == len(report["kind"])  # every pair of every task, once
    assert {r["task"] for r in report["rows"]} == set(TASKS)
    for r in report["rows"]:
        assert r["student_a"] < r["student_b"]
        assert r["above_threshold"] == str(int(float(r["score"]) > sim.THRESHOLD))


def test_planted_copies_are_flagged_and_ranked_first(report: dict) -> None:
    planted, independent = _scores(report, "planted"), _scores(report, "independent")
    assert len(planted) == sum(6 for t in TASKS for _ in PLANT_FROM[t])  # 3 copies + origin: 6 pairs each
    low = [(r["task"], r["student_a"], r["student_b"], r["score"]) for r in planted if r["above_threshold"] != "1"]
    assert not low, f"planted copies below the threshold {sim.THRESHOLD}: {low}"
    identical = [r for r in planted if f"copybyte-{r['student_b']}" == r["student_a"]]
    assert len(identical) == len(planted) // 6 and all(r["identical"] == "1" and r["score"] == "1.0000"
                                                       for r in identical)
    # Top N: within its task, every planted pair ranks above every independent pair, so each lies within the
    # task's N = (pairs that are not independent) highest scores.
    for task in TASKS:
        ranked = sorted((r for r in report["rows"] if r["task"] == task), key=lambda r: -float(r["score"]))
        n = sum(report["kind"][task, r["student_a"], r["student_b"]] != "independent" for r in ranked)
        top = {(r["student_a"], r["student_b"]) for r in ranked[:n]}
        assert all((r["student_a"], r["student_b"]) in top for r in planted if r["task"] == task), task
    assert min(float(r["score"]) for r in planted) > max(float(r["score"]) for r in independent)


def test_independent_lineages_are_not_flagged(report: dict) -> None:
    independent = _scores(report, "independent")
    assert len(independent) > 300  # the test has teeth: hundreds of pairs of different lineages
    high = [(r["task"], r["student_a"], r["student_b"], r["score"]) for r in independent if r["above_threshold"] != "0"]
    assert not high, f"independent pairs above the threshold {sim.THRESHOLD}: {high}"


def test_separation_matches_the_documented_numbers(report: dict) -> None:
    """THRESHOLD's docstring quotes these: keep it in step with the data."""
    top_independent = max(float(r["score"]) for r in _scores(report, "independent"))
    low_planted = min(float(r["score"]) for r in _scores(report, "planted"))
    print(f"\nindependent max {top_independent:.4f}, planted min {low_planted:.4f}, threshold {sim.THRESHOLD}, "
          f"{len(report['rows'])} pairs")
    assert top_independent <= 0.75 and low_planted >= 0.92


def test_html_shows_flagged_pairs_side_by_side(report: dict) -> None:
    text = report["paths"][1].read_text()
    flagged = [r for r in report["rows"] if r["above_threshold"] == "1"]
    for r in flagged:
        assert f"{r['student_a']} and {r['student_b']}: {float(r['score']):.2f}" in text
    assert text.count('<td class="side">') == 2 * len(flagged)
    assert 'class="hit"' in text and "&#34;" in text  # lines marked; source escaped (markupsafe: " is &#34;)
    assert "t10-wrong-fork_bomb" not in text  # nothing flagged it


def test_small_class_bytes_skeleton_and_hidden_folders(tmp_path: Path, course: tuple[dict, object]) -> None:
    tasks, _ = course
    task = "10_quantize_global_int8"
    folder = ROOT / "tasks" / task
    own = (folder / "right" / "launcher_class.py").read_bytes() + b"# caf\xe9 (latin-1, not UTF-8)\n"
    skeleton = (folder / "skeleton.py").read_bytes()
    for student, data in {"ann": own, "ben": own, "cy": own.replace(b"\xe9", b"\xe8"), ".git": own,
                          "dee": skeleton, "eve": skeleton}.items():
        (tmp_path / "class" / student).mkdir(parents=True)
        (tmp_path / "class" / student / f"{task}.py").write_bytes(data)
    hw = Homework(id="hwx", title="HW <x> & y", tasks={task: 2.0, "11_quantize_rowwise_int8": 3.0})
    csv_path, html_path = sim.similarity_report(tmp_path / "class", hw, tasks, tmp_path / "out", threshold=0.9)
    with csv_path.open() as f:
        rows = {(r["student_a"], r["student_b"]): r for r in csv.DictReader(f)}
    assert len(rows) == 10  # 5 students (not .git), one task with files
    assert rows["ann", "ben"]["identical"] == "1" and rows["ann", "ben"]["above_threshold"] == "1"
    assert rows["ann", "cy"]["identical"] == "0" and rows["ann", "cy"]["score"] == "1.0000"  # bytes differ
    assert rows["dee", "eve"]["identical"] == "0" and rows["dee", "eve"]["above_threshold"] == "0"
    text = html_path.read_text()
    assert "HW &lt;x&gt; &amp; y" in text and "caf?" in text and "<td>dee</td>" not in text


# --- the normalization, piece by piece ------------------------------------------------------------------------

SOURCE = '''import torch
import triton.language as tl


def kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)  # the tile
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask, other=0.0) * 2.0, mask=mask)


def wrapper(x):
    out = torch.empty_like(x)
    kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
    return (out, x.numel())
'''


def test_renaming_literals_comments_and_layout_change_no_fingerprint() -> None:
    disguised = (SOURCE.replace("offs", "o").replace("mask", "keep").replace("kernel", "k").replace("BLOCK", "B")
                 .replace("2.0", "3.5").replace("1024", "512").replace("  # the tile", "")
                 .replace("import triton.language as tl", "import triton.language as lang").replace("tl.", "lang.")
                 .replace("return (out, x.numel())", "return out, x.numel()"))
    disguised = disguised.replace("mask=keep, other=0.0)", "mask=keep,\n        other=0.0,\n    )")
    # `keep=` is the API's keyword `mask=` renamed by that blunt replace: put the API's name back
    disguised = disguised.replace("keep=keep", "mask=keep")
    a, b = sim.fingerprint(SOURCE), sim.fingerprint(disguised)
    assert [t.sym for t in sim.normalize(SOURCE)] == [t.sym for t in sim.normalize(disguised)]
    assert a.prints.keys() == b.prints.keys()
    pair = sim.compare("t", "a", a, "b", b)
    assert pair.score == 1.0 and not pair.identical


def test_api_names_keep_their_spelling_and_bound_names_do_not() -> None:
    syms = [t.sym for t in sim.normalize(SOURCE)]
    assert "load" in syms and "store" in syms and "other" in syms and "mask" in syms  # tl.load, other=, mask=
    assert "kernel" not in syms and "offs" not in syms and "BLOCK" not in syms  # bound: V
    assert "import" not in syms and "N" in syms and "S" not in syms


def test_data_flow_is_compared_not_just_the_shape() -> None:
    """Same tokens once every name is V, different uses of the names: different k-grams."""
    one = "def f(a, b, c):\n    d = a + b * c - a + b * c - a + b * c\n    return d\n"
    other = "def f(a, b, c):\n    d = a + a * a - b + c * c - c + b * a\n    return d\n"
    assert [t.sym for t in sim.normalize(one)] == [t.sym for t in sim.normalize(other)]
    assert not sim.fingerprint(one).prints.keys() & sim.fingerprint(other).prints.keys()


def test_boilerplate_is_no_evidence(tmp_path: Path) -> None:
    folder = ROOT / "tasks" / "10_quantize_global_int8"
    skeleton = (folder / "skeleton.py").read_text()
    given = sim.boilerplate(folder)
    fp = sim.fingerprint(skeleton, given)
    assert fp.coverage == 0 and not fp.prints  # the skeleton is all boilerplate
    pairs = sim.compare_files("t10", {"a": skeleton, "b": skeleton, "c": ""}, given)
    assert all(p.score == 0.0 and not p.identical for p in pairs)  # handing in the skeleton copies nobody
    solution = (folder / "solution.py").read_text()
    assert sim.fingerprint(solution, given).coverage < sim.fingerprint(solution).coverage


def test_broken_files_are_compared_not_fatal() -> None:
    broken = SOURCE + "\ndef oops(:\n    return 'unterminated\n"
    pair = sim.compare_files("t", {"a": SOURCE, "b": broken, "c": "\x00\x01 not python (((("})[0]
    assert {pair.student_a, pair.student_b} == {"a", "b"} and pair.score > sim.THRESHOLD


def test_winnowing_guarantee() -> None:
    rng = random.Random(3)
    hashes = [rng.randrange(1 << 30) for _ in range(200)]
    picked = sim.winnow(hashes, 4)
    assert all(any(i <= p < i + 4 for p in picked) for i in range(len(hashes) - 3))  # every window has one
    assert picked == sorted(set(picked))


def test_a_notebook_is_compared_by_what_it_grades(tmp_path):
    """A student who hands in a notebook is compared by the source graded from it (the puzzle's cell, not the
    notebook's harness): a notebook holding another student's kernel is flagged against that student's .py."""
    import nbformat

    from grader.config import load_task

    task = load_task(ROOT / "tasks" / "puzzle02_constant_add_block")
    kernel = (task.folder / "solution.py").read_text()
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("%matplotlib inline\nprint('harness')"), nbformat.v4.new_code_cell(kernel)]
    (tmp_path / "ann").mkdir()
    (tmp_path / "ann" / "puzzles.ipynb").write_text(nbformat.writes(nb))
    (tmp_path / "ben").mkdir()
    (tmp_path / "ben" / f"{task.id}.py").write_text(kernel)
    files = sim.collect(tmp_path, [task.id], {task.id: task})[task.id]
    assert set(files) == {"ann", "ben"} and "harness" not in files["ann"] and "add_mask2_kernel" in files["ann"]
    assert sim.collect(tmp_path, [task.id])[task.id].keys() == {"ben"}  # without the tasks, .py files only
    (pair,) = sim.compare_files(task.id, files, sim.boilerplate(task.folder))
    assert pair.score > sim.THRESHOLD


def test_the_file_compared_is_the_file_batch_grades(tmp_path):
    """A task's file in a sub-folder (a zip unpacked in the student's folder) is graded by batch (intake
    `task_files`) and so compared; a browser's re-upload `<task> (1).py` is neither."""
    from grader.course.similarity import collect

    (tmp_path / "ann" / "hw4").mkdir(parents=True)
    (tmp_path / "ann" / "hw4" / "10_quantize_global_int8.py").write_text("a = 1\n")
    (tmp_path / "bob").mkdir()
    (tmp_path / "bob" / "10_quantize_global_int8 (1).py").write_text("b = 2\n")
    found = collect(tmp_path, iter(["10_quantize_global_int8"]))
    assert found == {"10_quantize_global_int8": {"ann": "a = 1\n"}}
