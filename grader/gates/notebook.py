"""Notebooks graded as handed in: a submission may be a Jupyter notebook (`.ipynb`, nbformat).

The Triton Puzzles are a notebook, and students hand in one `.ipynb` that holds every puzzle (and, around them,
the notebook's own harness, test calls, prints, plots and shell lines). This module turns such a notebook into
the Python file that one task grades, and nothing else of the grader changes: the extracted source is what the
static check (grader/gates/static.py), the worker, the identical-file check and the ledger's sha256 see, exactly
as a `<task_id>.py` would be. So a notebook is refused for whatever a `.py` is refused, by the same code.

What is kept, for one task (`extract`):

* the code cells only (markdown and raw cells are not code); IPython's own syntax is not Python and is dropped:
  line magics and shell lines (`%matplotlib inline`, `!pip install ...`, `x = !ls`), help lines (`obj?`), and
  cells under a cell magic (`%%bash`, `%%writefile`; the body of `%%time` and `%%capture` is Python and stays);
* among the top-level statements of those cells: every statement that binds one of the task's names (its kernels,
  functions and entry, task.yaml `kernels`, `functions`, `entry`), then, transitively, every statement that binds
  or changes a name a kept statement reads as a global: helpers, constants, `@triton.jit` helpers, autotune
  config lists (`configs.append(...)` included), and the imports that bind those names. Which names a statement
  reads is computed with Python's scoping rules (a kernel's local `x` does not pull in a test cell's `x = ...`);
* `from __future__` imports, first.
Everything else goes: other puzzles' code, test calls, prints, plots, imports nothing kept uses. What runs is
what a notebook run top to bottom leaves bound to the names the grader calls: when a name is bound in several
cells, every one of those statements is kept, in the notebook's order, so the last one wins as it does there.

A notebook "defines" a task when some cell binds one of its names; one that binds none does not submit that task
(`batch` and `grade-dir` grade no file for it, `grade` refuses with a message). A cell that is not valid Python
is left out unless it is where a needed name is defined (`def add_kernel` in a cell with a syntax error): then it
is kept whole, and the static check reports its syntax error as it would in a `.py`.

Where messages cite lines. The extracted source starts with `# graded from 'NAME.ipynb'`, and each block of
kept lines is headed by a comment `# code cell N, line L` (N counts the notebook's code cells from 1, markdown
cells not counted; L is the block's first line within its cell); `Extraction.lines` maps every extracted line back
to its cell and line. Every student-facing message of the result (each test's message, the imports and
signatures checks) is translated once, after judging (grader/pipeline/result.py `build_result`): `nb.ipynb:12:`
becomes `nb.ipynb, code cell 3, line 4:` and `line 12` becomes `code cell 3, line 4`. Those are all the ways the
grader cites a submission's line (the static check's `FILE:LINE:`, the worker's `line N in f: ...`, the address
and write checks' `kernel (line N)`, the op audit's `at line N`, the GPU compile check's `(line N)`), so the
static check, the worker and the judge stay as they are and go on citing lines of the file they were given;
translating in one place after judging was chosen over the headers alone because with headers alone a student
would have to count lines from a header in a file they never see. Not translated: staff text (tracebacks cite
the worker's copy, whose headers say where each block comes from; the staff JSON keeps it as
`notebook.graded_source`), and positions Triton counts from a kernel's own `def` (`at 3:4:` in its compile
errors), which are the same in a notebook. The headers make the map a function of the extracted bytes, so two
notebooks whose extractions are the same bytes (graded once, grader/pipeline/grading.py) get the same citations.

What is dropped never runs: a top-level call (`init()`, a test) is not kept even where it would set a global
through `global x`; a value the kernels read must be bound at the top level of some cell.
"""

from __future__ import annotations

import ast
import builtins
import hashlib
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from grader.config import TaskSpec
from grader.gates.intake import LINK_MESSAGE, MAX_SOURCE_BYTES, IntakeError, read_submitted, scan, shown

SUFFIX = ".ipynb"
HEADER = "# code cell {cell}, line {line}"

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.ListComp, ast.SetComp,
           ast.DictComp, ast.GeneratorExp)
_BUILTINS = frozenset(dir(builtins))
_MAGIC = re.compile(r"^\s*(?:[%!]|[\w.]+\s*=\s*[%!]|\?{1,2}[\w.]+\s*$|[\w.]+\?{1,2}\s*$)")
"""An IPython line that is not Python: a line magic, a shell line (also assigned: `x = !ls`), a help line."""
PYTHON_CELL_MAGICS = ("time", "capture")
"""Cell magics whose body is Python run in the notebook's namespace; under any other, a cell is not code."""


def is_notebook(path: Path) -> bool:
    return path.suffix.lower() == SUFFIX


class NotebookError(ValueError):
    """The bytes are not a notebook nbformat can read."""


TOO_DEEP = (RecursionError, MemoryError)
"""What Python's parser raises on a cell nested too deep for it (a 20,000-term sum, `((((...))))`): the student's
cell's problem, never the class's (an uncaught RecursionError here once stopped a whole batch)."""


def code_cells(data: bytes) -> list[str]:
    """The source of each code cell, in order (nbformat reads versions 3 and 4)."""
    try:
        import nbformat
    except ImportError as exc:  # the grader's own set-up: pyproject.toml and the setup scripts install it
        raise NotebookError("nbformat is not installed here, so notebooks cannot be read") from exc
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            nb = nbformat.reads(data.decode("utf-8"), as_version=4)
        cells = [c for c in nb.cells if c.get("cell_type") == "code"]
        sources = [c.get("source", "") for c in cells]
        return [s if isinstance(s, str) else "".join(map(str, s)) for s in sources]
    except Exception as exc:  # noqa: BLE001 - anything wrong with the file is the student's: say what
        raise NotebookError(f"{type(exc).__name__}: {str(exc)[:200]}") from exc


# ------------------------------------------------------------------------------------------- one statement


@dataclass(frozen=True)
class _Stmt:
    start: int
    """Its first line in the cell (a decorated definition: its first decorator's), from 1."""
    col: int
    """Where it starts on that line, in UTF-8 bytes (not 0 only after a `;`)."""
    end: int
    end_col: int
    binds: frozenset[str]
    """Names it binds at the top level (assignment targets, definitions, imports, loop targets...)."""
    reads: frozenset[str]
    """Names it reads as globals, here or in the functions and classes it defines."""
    changes: frozenset[str]
    """Names whose value it may change without binding them (`x.append(...)`, `x[i] = ...`, `x.a = ...`)."""
    data: bool
    """It binds by assignment (not an import, a def or a class): what it binds can be changed in place."""
    future: bool
    star: bool
    """`from m import *`: binds names that cannot be listed."""
    imports: str = ""
    """An import statement, as `ast.dump` writes it (two imports alike bind the same names to the same modules)."""


def _outside(node: ast.AST) -> list[ast.AST]:
    """The parts of a scope node evaluated in the scope around it (decorators, defaults, bases, first iterator)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        a = node.args
        parts: list[ast.AST] = [*a.defaults, *(d for d in a.kw_defaults if d is not None)]
        if not isinstance(node, ast.Lambda):
            parts += node.decorator_list
            parts += [x.annotation for x in _args(a) if x.annotation is not None]
            parts += [node.returns] if node.returns is not None else []
        return parts
    if isinstance(node, ast.ClassDef):
        return [*node.decorator_list, *node.bases, *(k.value for k in node.keywords)]
    return [node.generators[0].iter]  # a comprehension


def _args(a: ast.arguments) -> list[ast.arg]:
    return [*a.posonlyargs, *a.args, *a.kwonlyargs, *(x for x in (a.vararg, a.kwarg) if x is not None)]


def _here(nodes: list[ast.AST]) -> tuple[list[ast.AST], list[ast.AST]]:
    """The nodes evaluated in this scope (not inside a nested one), and the nested scopes met."""
    own: list[ast.AST] = []
    nested: list[ast.AST] = []
    stack = list(nodes)
    while stack:
        node = stack.pop()
        own.append(node)
        if isinstance(node, _SCOPES):
            nested.append(node)
            stack += _outside(node)
        else:
            stack += list(ast.iter_child_nodes(node))
    return own, nested


def _bound(own: list[ast.AST]) -> set[str]:
    names: set[str] = set()
    for node in own:
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Import):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            names.update(a.asname or a.name for a in node.names if a.name != "*")
        elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and node.name:
            names.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            names.add(node.rest)
    return names


def _loads(own: list[ast.AST]) -> set[str]:
    return {n.id for n in own if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _free(scope: ast.AST) -> set[str]:
    """The names a function, lambda, class body or comprehension reads from outside itself (Python's rules:
    parameters and names bound anywhere in it are its own, unless declared global)."""
    if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        params = {a.arg for a in _args(scope.args)}
        body = [scope.body] if isinstance(scope, ast.Lambda) else list(scope.body)
    elif isinstance(scope, ast.ClassDef):
        params, body = set(), list(scope.body)
    else:
        params = set()
        body = [scope.key, scope.value] if isinstance(scope, ast.DictComp) else [scope.elt]
        for k, gen in enumerate(scope.generators):
            body += [gen.target, *gen.ifs] + ([gen.iter] if k else [])
    own, nested = _here(body)
    declared = {name for n in own if isinstance(n, ast.Global) for name in n.names}
    local = (params | _bound(own)) - declared
    free = (_loads(own) - local) | declared
    for inner in nested:  # a class body's names are not visible to the functions inside it
        free |= _free(inner) if isinstance(scope, ast.ClassDef) else _free(inner) - local
    return free


def _root(node: ast.AST) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _statement(node: ast.stmt, lines: list[str]) -> _Stmt:
    own, nested = _here([node])
    reads = _loads(own)
    for inner in nested:
        reads |= _free(inner)
    changes = set()
    for n in own:
        if isinstance(n, (ast.Attribute, ast.Subscript)) and isinstance(n.ctx, (ast.Store, ast.Del)):
            changes.add(_root(n))
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute):
            changes.add(_root(n.func.value))
    decorators = getattr(node, "decorator_list", [])
    start = min([node.lineno, *(d.lineno for d in decorators)])
    return _Stmt(start=start, col=0 if decorators else node.col_offset, end=node.end_lineno or node.lineno,
                 end_col=node.end_col_offset if node.end_col_offset is not None else len(lines[-1].encode()),
                 binds=frozenset(_bound(own)), reads=frozenset(reads), changes=frozenset(changes - {None}),
                 data=not isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef,
                                            ast.ClassDef)),
                 future=isinstance(node, ast.ImportFrom) and node.module == "__future__",
                 star=isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names),
                 imports=ast.dump(node) if isinstance(node, (ast.Import, ast.ImportFrom)) else "")


# ------------------------------------------------------------------------------------------------ one cell


@dataclass
class _Cell:
    number: int
    """Among the notebook's code cells, from 1."""
    lines: list[str]
    """Its lines, IPython's own syntax blanked."""
    stmts: list[_Stmt] | None
    """Its top-level statements; None when it is not valid Python."""
    python: bool = True
    """False under a cell magic that is not Python (`%%bash`): never kept."""
    deep: bool = False
    """Python's parser gave up on it (RecursionError, MemoryError): nested too deep."""

    @classmethod
    def parse(cls, number: int, text: str) -> _Cell:
        lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        first = next((k for k, line in enumerate(lines) if line.strip()), None)
        if first is not None and lines[first].lstrip().startswith("%%"):
            magic = lines[first].lstrip()[2:].split(maxsplit=1)
            if not magic or magic[0] not in PYTHON_CELL_MAGICS:
                return cls(number, lines, None, python=False)
            lines[first] = ""
        for k in _statement_starts(lines):  # a line magic starts a statement, where Python never has % ! ?
            if _MAGIC.match(lines[k]):
                indent = lines[k][: len(lines[k]) - len(lines[k].lstrip())]
                lines[k] = f"{indent}pass" if indent else ""  # in a block, it keeps the block a block
        try:
            tree = _parse("\n".join(lines))
        except TOO_DEEP:  # too deep for Python's parser: not code for the grader, and the student is told
            return cls(number, lines, None, deep=True)
        if tree is None:
            return cls(number, lines, None)
        return cls(number, lines, [_statement(node, lines) for node in tree.body])

    def text(self, st: _Stmt) -> list[str]:
        """The statement's own text: its lines, cut where it starts and ends (a `;` or a comment after it)."""
        chunk = self.lines[st.start - 1 : st.end]
        if len(chunk) == 1:
            return [chunk[0].encode()[st.col : st.end_col].decode(errors="replace")]
        return ([chunk[0].encode()[st.col :].decode(errors="replace"), *chunk[1:-1],
                 chunk[-1].encode()[: st.end_col].decode(errors="replace")])

    def defines(self, name: str) -> bool:
        """For a cell that does not parse: whether a line of it defines `name` at the top level."""
        return re.search(rf"^(?:(?:async\s+)?def|class)\s+{re.escape(name)}\b|^{re.escape(name)}\s*(?::[^=\n]*)?=(?!=)",
                         "\n".join(self.lines), re.M) is not None


def _statement_starts(lines: list[str]) -> list[int]:
    """The lines that start a statement: not inside brackets, a string or a backslash continuation (a `% 7` on
    the line after `y = (x` is Python's modulo, not a magic)."""
    starts, depth, quote, continued = [], 0, "", False
    for k, line in enumerate(lines):
        if not depth and not quote and not continued:
            starts.append(k)
        continued = False
        i = 0
        while i < len(line):
            c = line[i]
            if quote:
                if c == "\\":
                    i += 1
                elif line.startswith(quote, i):
                    i += len(quote) - 1
                    quote = ""
            elif c == "#":
                break
            elif c in "\"'":
                quote = line[i : i + 3] if line[i : i + 3] in ('"""', "'''") else c
                i += len(quote) - 1
            elif c in "([{":
                depth += 1
            elif c in ")]}":
                depth = max(0, depth - 1)
            i += 1
        if quote in ('"', "'"):  # a one-line string left open: Python's error, not a continuation
            quote = ""
        continued = line.rstrip().endswith("\\") and not line.lstrip().startswith("#")
    return starts


def _parse(text: str) -> ast.Module | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return compile(text, "<cell>", "exec", ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT,
                           dont_inherit=True)
    except (SyntaxError, ValueError):  # not Python (TOO_DEEP goes to the caller, who says so)
        return None


# ---------------------------------------------------------------------------------------------- extraction


@dataclass(frozen=True)
class Extraction:
    """What one task grades of a notebook: the source (bytes, as a `.py` would be read) and where its lines come
    from."""

    filename: str
    source: bytes
    lines: tuple[tuple[int, int] | None, ...]
    """Extracted line k (from 1) comes from `lines[k - 1]` = (code cell, line in that cell); None: a header."""
    defines: bool
    """The notebook binds one of the task's names: it submits this task."""
    names: tuple[str, ...] = ()
    """The task's names (kernels, functions, entry), for messages."""
    problems: tuple[str, ...] = ()
    """Why the notebook could not be read (then nothing is extracted): the imports gate fails with these."""
    cells: tuple[int, ...] = field(default=())
    """The code cells kept."""

    def where(self, line: int) -> str | None:
        """`code cell N, line L` for an extracted line, or None (a header, or past the end)."""
        if 1 <= line <= len(self.lines) and self.lines[line - 1] is not None:
            cell, at = self.lines[line - 1]
            return f"code cell {cell}, line {at}"
        return None

    def translate(self, text: str) -> str:
        """`text` with every line of the extracted source it cites made the notebook's: `FILE:12:` (the static
        check's head, FILE being the notebook's name) becomes `FILE, code cell 3, line 4:`, and `line 12` becomes
        `code cell 3, line 4`. One pass: nothing is translated twice."""
        if not text:
            return text
        pattern = re.compile(rf"(?<![\w.-]){re.escape(self.filename)}:(\d+):|\bline (\d+)\b")

        def cite(match: re.Match) -> str:
            where = self.where(int(match.group(1) or match.group(2)))
            if where is None:
                return match.group(0)
            return f"{self.filename}, {where}:" if match.group(1) else where

        return pattern.sub(cite, text)

    def why_not(self) -> str:
        """Why this notebook submits nothing for the task."""
        if self.problems:
            return "; ".join(self.problems)
        return f"no code cell of {self.filename} defines {' or '.join(self.names)}: nothing of this task to grade"


class Notebook:
    """A notebook read and parsed once; `extract` gives each task its source."""

    def __init__(self, data: bytes, filename: str) -> None:
        self.filename = filename
        self.sha256 = hashlib.sha256(data).hexdigest()
        self.problem: str | None = None
        self.notes: list[str] = []
        """Cells the grader could not parse for its own limits (nesting too deep): said to the student."""
        try:
            texts = code_cells(data)
        except NotebookError as exc:
            self.problem = f"{shown(filename)} cannot be read as a Jupyter notebook ({exc})"
            texts = []
        code = sum(len(t.encode(errors="replace")) for t in texts)
        if code > MAX_SOURCE_BYTES:  # a .py's limit: the notebook's own (32 MiB) is for its outputs
            self.problem = (f"{shown(filename)}: its code cells hold {code} bytes, over the grader's limit of "
                            f"{MAX_SOURCE_BYTES} bytes of code (a .py's); nothing of it is graded")
            texts = []
        self.cells = []
        for n, text in enumerate(texts, start=1):
            try:
                cell = _Cell.parse(n, text)
            except TOO_DEEP as exc:  # compile() passed, but our own walk of its tree did not (nested scopes)
                cell = _Cell(n, text.split("\n"), None, python=False)
                self.notes.append(f"{shown(filename)}, code cell {n}: not read, nested too deep for the grader "
                                  f"({type(exc).__name__})")
            if cell.deep:
                self.notes.append(f"{shown(filename)}, code cell {n}: Python cannot parse it, its expressions are "
                                  "nested too deep (RecursionError); it is graded only where it defines a task's name")
            self.cells.append(cell)
        self.stmts = [(cell, k, st) for cell in self.cells for k, st in enumerate(cell.stmts or [])]
        self.bound = frozenset().union(*(st.binds for _, _, st in self.stmts))
        self.data_names = frozenset().union(*(st.binds for _, _, st in self.stmts if st.data))

    @classmethod
    def read(cls, path: Path) -> Notebook:
        """The notebook at `path`, read as a submission: no link followed, bounded in size (grader/gates/intake.py);
        IntakeError otherwise."""
        return cls(read_submitted(path.parent, path.name), path.name)

    @staticmethod
    def names(task: TaskSpec) -> list[str]:
        return list(dict.fromkeys([*task.kernels, *task.functions, task.entry]))

    def defines(self, task: TaskSpec) -> bool:
        names = self.names(task)
        return any(n in self.bound for n in names) or any(
            cell.stmts is None and cell.python and cell.defines(n) for cell in self.cells for n in names)

    def extract(self, task: TaskSpec) -> Extraction:
        """The source `task` grades of this notebook. Never raises for what the notebook holds: a failure of the
        extraction itself is reported as the notebook's problem (nothing graded, the imports gate says why)."""
        try:
            return self._extract(task)
        except (*TOO_DEEP, ValueError) as exc:
            why = f"{shown(self.filename)}: the grader could not extract {task.id} from it ({type(exc).__name__})"
            return Extraction(self.filename, f"# not extracted: sha256 {self.sha256}\n".encode(), (None,), False,
                              tuple(self.names(task)), (why,))

    def _closure(self, names: list[str]) -> tuple[set[tuple[int, int]], set[int]]:
        """The statements a task needs, as (code cell, statement's index in it), and the cells kept whole: every
        statement that binds a needed name, or changes one bound as data, or is a `__future__` import; the names
        such a statement reads are needed in turn. A worklist over an index of the statements by the names they
        bind or change, so each statement and name is looked at once: linear in the notebook (a fixed point over
        every statement per round cost a round per link of a chain `a1 = a0`, `a2 = a1`, ...: 20,000 links, 318 KB,
        took over 120 s in the trusted process). Cells that do not parse are kept whole where they define a name
        that nothing else binds; so are `from m import *` statements, which may bind it."""
        by_name: dict[str, list[int]] = {}
        kept_at: set[int] = set()  # indices into self.stmts
        for i, (_, _, st) in enumerate(self.stmts):
            for name in st.binds | (st.changes & self.data_names):
                by_name.setdefault(name, []).append(i)
            if st.future:
                kept_at.add(i)
        needed: set[str] = set()
        todo = list(dict.fromkeys([*names, *(r for i in kept_at for r in self.stmts[i][2].reads)]))
        while todo:
            name = todo.pop()
            if name in needed:
                continue
            needed.add(name)
            for i in by_name.get(name, ()):
                if i not in kept_at:
                    kept_at.add(i)
                    todo += [r for r in self.stmts[i][2].reads if r not in needed]
        missing = needed - self.bound - _BUILTINS
        whole = {cell.number for cell in self.cells if missing and cell.stmts is None and cell.python
                 and any(cell.defines(n) for n in missing)}
        if missing:  # a name bound by nothing listed: `from m import *`?
            kept_at |= {i for i, (_, _, st) in enumerate(self.stmts) if st.star}
        return {(self.stmts[i][0].number, self.stmts[i][1]) for i in kept_at}, whole

    def _extract(self, task: TaskSpec) -> Extraction:
        names = self.names(task)
        if self.problem:  # nothing to grade; the bytes' own hash, so that no other file's verdict is reused for it
            return Extraction(self.filename, f"# not a notebook: sha256 {self.sha256}\n".encode(), (None,), False,
                              tuple(names), (self.problem,))
        kept, whole = self._closure(names)
        # An import kept again, alike, where nothing else kept binds its names, changes nothing: written once.
        rebound = set().union(*(st.binds for cell, k, st in self.stmts if (cell.number, k) in kept and not st.imports))
        seen: set[str] = set()
        for cell, k, st in self.stmts:
            if (cell.number, k) in kept and st.imports and not st.binds & rebound:
                if st.imports in seen:
                    kept.discard((cell.number, k))
                seen.add(st.imports)
        futures = [(cell, k) for cell, k, st in self.stmts if st.future and (cell.number, k) in kept]
        items: list[tuple[_Cell, int | None]] = list(futures)  # first, as Python requires
        for cell in self.cells:  # then the rest in the notebook's order
            if cell.number in whole:
                items.append((cell, None))
            items += [(cell, k) for k, st in enumerate(cell.stmts or [])
                      if not st.future and (cell.number, k) in kept]
        out: list[str] = []
        where: list[tuple[int, int] | None] = []
        last: tuple[_Cell, int] | None = None  # the statement written last
        for cell, k in items:
            if k is None:  # a cell that does not parse, whole
                out.append(HEADER.format(cell=cell.number, line=1))
                where.append(None)
                out += cell.lines
                where += [(cell.number, n) for n in range(1, len(cell.lines) + 1)]
                last = None
                continue
            st = cell.stmts[k]
            before = cell.stmts[k - 1] if k else None
            if last is not None and last[0] is cell and last[1] == k - 1 and st.col == 0 and st.start > before.end:
                # the next statement of the same cell: the lines between the two (blank lines, comments) too
                out += cell.lines[before.end : st.start - 1]
                where += [(cell.number, n) for n in range(before.end + 1, st.start)]
            else:
                out.append(HEADER.format(cell=cell.number, line=st.start))
                where.append(None)
            text = cell.text(st)
            out += text
            where += [(cell.number, st.start + n) for n in range(len(text))]
            last = (cell, k)
        if out:  # named: a verdict reused for the same bytes (grading.py) then cites the same file
            out.insert(0, f"# graded from {self.filename!r}")
            where.insert(0, None)
        source = "\n".join(out) + "\n" if out else ""
        used = sorted({w[0] for w in where if w is not None})
        return Extraction(self.filename, source.encode(), tuple(where), self.defines(task), tuple(names),
                          cells=tuple(used))


# -------------------------------------------------------------------------------------------- a student's folder


class NotebookFolder:
    """The notebooks of a student's folder (`*.ipynb`; `deep`: at any depth, as a zip upload may nest them), each
    read and parsed once, however many tasks it serves. `for_task` gives the notebook that defines a task.
    Listed and read as submissions (grader/gates/intake.py): a link is never followed, a notebook over the size
    limit is not read. `problems` says what could not be used and why (a link, a notebook that cannot be read, a
    cell too deep to parse), for the student's result; `notes` says the rest (one task in two notebooks)."""

    def __init__(self, folder: Path, deep: bool = False) -> None:
        self.folder = folder
        listed = scan(folder, deep=deep)
        self.paths = [folder / rel for rel in listed.files if rel.suffix.lower() == SUFFIX]
        self.notes: list[str] = []
        self.problems: list[str] = [f"{shown(rel)} {LINK_MESSAGE}: not graded" for rel in listed.links
                                    if rel.suffix.lower() == SUFFIX]
        self._books: list[tuple[Path, Notebook]] | None = None

    def books(self) -> list[tuple[Path, Notebook]]:
        if self._books is None:
            self._books = []
            for path in self.paths:
                rel = path.relative_to(self.folder)
                try:
                    book = Notebook(read_submitted(self.folder, rel), path.name)
                except IntakeError as exc:
                    self.problems.append(f"{exc}: not graded")
                    continue
                except Exception as exc:  # noqa: BLE001 - whatever a notebook does to the reader is its own failure
                    self.problems.append(f"{shown(rel)}: not graded, the grader could not read it "
                                         f"({type(exc).__name__})")
                    continue
                self.problems += book.notes
                if book.problem:
                    self.problems.append(f"{book.problem}: not graded")
                    continue
                self._books.append((path, book))
        return self._books

    def for_task(self, task: TaskSpec) -> tuple[Path, Extraction] | None:
        """The notebook that submits `task` and what it grades, or None. Two that both define it: the first by
        name, with a note."""
        defining = [(p, b) for p, b in self.books() if b.defines(task)]
        if not defining:
            return None
        if len(defining) > 1:
            self.notes.append(f"{task.id}: defined in {', '.join(p.name for p, _ in defining)}; "
                              f"{defining[0][0].name} is graded")
        path, book = defining[0]
        return path, book.extract(task)
