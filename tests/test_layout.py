"""The code's layout, as a reader carrying the project on needs it: no import circle in grader/ (the layer
contracts in pyproject.toml, checked by lint-imports, say which way each boundary may be crossed; this says no
two modules need each other, at import or at call time)."""

from __future__ import annotations

import ast
import re

from grader.config import ROOT


def _imports() -> dict[str, set[str]]:
    """Module -> the grader modules it imports anywhere in its body (a function's import counts: it is a circle
    at call time). `from package import submodule` is an edge to the submodule only."""
    files = {".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"): p
             for p in (ROOT / "grader").rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in files}
    for module, path in files.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                graph[module] |= {a.name for a in node.names if a.name in files}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and node.module in files:
                subs = {f"{node.module}.{a.name}" for a in node.names} & set(files)
                graph[module] |= subs | ({node.module} if len(subs) < len(node.names) else set())
        graph[module].discard(module)
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, edges = work[-1]
            w = next(edges, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                component = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    component.append(w)
                    if w == v:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_circle_finder_finds_one():
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _circles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle_in_grader():
    graph = _imports()
    assert "grader.results.atomic" in graph["grader.course.canvas"]  # the scan sees imports (canvas's writer)
    assert _circles(graph) == []


def test_every_command_is_one_function_in_the_clis_tables():
    from grader import cli

    parser = cli.build_parser()
    commands = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction").choices
    tables = {**cli.PLAIN, **cli.COURSE, **cli.GRADING}
    assert set(commands) == set(tables) and len(tables) == len(cli.PLAIN) + len(cli.COURSE) + len(cli.GRADING)
    source = ast.parse((ROOT / "grader" / "cli.py").read_text())
    main = next(n for n in source.body if isinstance(n, ast.FunctionDef) and n.name == "main")
    assert main.end_lineno - main.lineno < 30  # a dispatcher


LONGEST = 120
"""Lines a function of grader/ may have: one a reader can hold (a longer one runs several phases in one body)."""


def _long_functions(source: str) -> list[tuple[str, int]]:
    return [(n.name, n.end_lineno - n.lineno + 1) for n in ast.walk(ast.parse(source))
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.end_lineno - n.lineno + 1 > LONGEST]


def test_the_length_finder_finds_a_long_function():
    body = "".join(f"    x{k} = {k}\n" for k in range(LONGEST))
    assert _long_functions(f"def f():\n{body}") == [("f", LONGEST + 1)]
    assert _long_functions("class C:\n    def g(self):\n        pass\n") == []


def test_no_function_in_grader_is_longer_than_a_reader_can_hold():
    found = {f"{p.relative_to(ROOT)} {name}": n for p in (ROOT / "grader").rglob("*.py")
             for name, n in _long_functions(p.read_text())}
    assert found == {}


ISSUE_NUMBER = re.compile(r"\bissues? ?#?\d+", re.IGNORECASE)


def test_the_finder_of_issue_numbers_finds_one():
    assert ISSUE_NUMBER.search("as issue 48's table says") and ISSUE_NUMBER.search("(Issue #7)")
    assert not ISSUE_NUMBER.search("an issue with 48 files") and not ISSUE_NUMBER.search("tissue 3")


def test_readme_and_docs_name_no_issue_number():
    """The docs state the present for their reader; which issue asked for what is the history, in git."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    found = [f"{p.relative_to(ROOT)}:{n}" for p in pages for n, line in enumerate(p.read_text().splitlines(), 1)
             if ISSUE_NUMBER.search(line)]
    assert len(pages) > 5 and found == []
