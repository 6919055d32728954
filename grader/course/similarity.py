"""The similarity report: which pairs of a homework's submissions share more code than chance allows.

`python -m grader similarity --homework HW [ROOT]` compares, task by task, every pair of students'
`ROOT/<student>/<task_id>.py` and writes `similarity_<hw>.csv` (every pair, scored) and `similarity_<hw>.html` (the
pairs above the threshold, side by side, shared lines marked). It flags pairs for a person to read; it decides
nothing and changes no grade.

How a file becomes fingerprints (the winnowing of Schleimer, Wilkerson and Aiken, SIGMOD 2003, as in MOSS):

* Tokens come from Python's `tokenize`: comments, blank lines and line breaks inside brackets are gone, so layout and
  comments change nothing. Import statements are dropped (the task's allowed imports dictate them, and a copier's
  `import torch as t` would otherwise break the k-grams around them), and so are a trailing comma before a closing
  bracket and grouping parentheses (`return (a, b)` is `return a, b`): formatters and `ast.unparse` add and remove
  both.
* Identifiers the file binds (functions, classes, parameters, variables, import aliases, `self.x` attributes) become
  `V` wherever they occur, also as an attribute or a keyword argument (`BLOCK_SIZE=`); numbers become `N` and
  strings (docstrings and f-strings included) `S`. Inside each k-gram a `V` also carries the distance back to the
  same name's previous use in that k-gram (Baker's parameterized strings), so that the data flow, not the spelling,
  is compared: consistent renaming changes no k-gram. Names the file does not bind keep their spelling where the
  API fixes them: the attribute after a dot (`tl.load`, `x.shape`), a keyword argument (`mask=`, `num_warps=`), and
  builtins (`range`): two independent kernels call the same API, and they should not look alike only because
  every name became `V`.
* Boilerplate: a statement of the file that is, normalized, a statement of the task's skeleton.py or of a fenced
  code block of its spec.md is dropped before the k-grams are taken, and a k-gram that occurs in those texts is not
  a fingerprint: what the course gives everyone is no evidence.
* Every run of K tokens is hashed (blake2b: the same in every run) and winnowing keeps the smallest hash of each
  window of WINDOW hashes: any shared run of K + WINDOW - 1 tokens is certain to share a fingerprint. Fingerprints
  are local, so reordered functions lose only the few k-grams that cross a boundary.

A pair's similarity, per side, is the share of that file's fingerprinted tokens that lie in a fingerprint the other
file has (copydetect's measure); the pair's `score` is the larger of the two, so that a file copied whole into a
longer one is caught from its own side, provided both sides share at least MIN_SHARED_TOKENS tokens (else 0). Files
that are byte-identical score 1.0 whatever their fingerprints, unless the file holds nothing of its own (the
untouched skeleton, an empty file).

Why not the copydetect package (0.5.0, which implements the same winnowing): it hashes k-grams of characters of
pygments tokens and keeps numbers as written (a changed block size or constant breaks its k-grams, and the issue asks
for literals to be normalized), it turns every name into one symbol, API names included, it has no notion of data
flow, and importing it imports matplotlib.pyplot and jinja2 for a report laid out by file, not by task. Measured on
the test's class with the skeleton as its boilerplate and the same max-of-both-sides score, it separates worse: at
its default k = 25 the independent pairs reach 0.77 and the planted copies go down to 0.80 (k = 15: 0.80 and 0.85;
k = 10: they overlap), against 0.74 and 0.93 here. The algorithm is a page of code; the tokenizer is Python's.

The constants were chosen on the INT8 tasks' corpus (tests/test_similarity.py, see THRESHOLD). The files in tasks/
are not independent work: the wrong/ files and the demo class are edits of the answer key, and the right/ files are
the same author's rewrites of it (renamed variables, the same wrapper). That makes the corpus a hard case: files of
different lineages (no verbatim-line lineage between them) still score up to 0.74, because on tasks this small most
of the kernel is dictated by the statement. On files of 150 to 400 tokens a wide window makes a pair's score depend
on which hashes winnowing happens to keep (K 20: the lowest planted copy scores 0.93 with WINDOW 2 or 4, 0.87 with
8, while the highest independent pair stays at 0.72 to 0.74): hence a window of 2, half the k-grams kept.
"""

from __future__ import annotations

import ast
import builtins
import csv
import hashlib
import io
import itertools
import keyword
import os
import re
import tokenize
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from grader.config import Homework, TaskSpec
from grader.gates.intake import LINK_MESSAGE, IntakeError, read_submitted, student_id, task_files
from grader.gates.notebook import NotebookFolder
from grader.results import escape

K = 20
"""Tokens per k-gram, about a statement and a half (`V=V.load(V+V,mask=V,other=N).to(V.float32)<nl>` is 20). On the
corpus, K from 18 to 22 gave the same separation (independent pairs at most 0.74); at K 16 they reached 0.79, at K 12
0.86: independent files share many statement-sized runs."""
WINDOW = 2
"""Winnowing window: a shared run of K + WINDOW - 1 = 21 tokens is always found (see the module's docstring)."""
MIN_SHARED_TOKENS = 40
"""A pair scores 0 unless both sides share at least this many tokens (two k-grams, two or three statements)."""
THRESHOLD = 0.8
"""Pairs scoring above this are flagged. From the data (tests/test_similarity.py: the 5 INT8 tasks, 77 files and 24
planted copies, 1,182 pairs): the 754 pairs of different lineages score at most 0.74 (two cheat files of task 10 by
one author); the 48 planted pairs (every bound name renamed and the top-level functions shuffled, through the AST or
token by token, and byte-identical copies) at least 0.93. 0.8 sits in that gap, nearer the independent side: a
copier who also edits a few statements loses score fast, while the independent pairs here are a worst case (one
author's rewrites of one answer key). Of the 380 pairs within a lineage (edits of the answer key: one changed line,
a torch fallback for the wrapper), 310 score above it."""

_BUILTINS = frozenset(dir(builtins))
_OPEN, _CLOSE = frozenset("([{"), frozenset(")]}")
_STRUCTURE = {tokenize.NEWLINE: "<nl>", tokenize.INDENT: "<in>", tokenize.DEDENT: "<de>"}
_STRUCTURE_SYMS = frozenset(_STRUCTURE.values())
_FSTRING_START = {getattr(tokenize, n) for n in ("FSTRING_START", "TSTRING_START") if hasattr(tokenize, n)}
_FSTRING_END = {getattr(tokenize, n) for n in ("FSTRING_END", "TSTRING_END") if hasattr(tokenize, n)}
_FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.M | re.S)


@dataclass(frozen=True)
class Token:
    """One normalized token: its symbol and where its text sits in the source (1-based lines)."""

    sym: str
    line: int
    end_line: int
    name: str = ""
    """The identifier a V stands for (what the k-gram's positional encoding uses)."""


@dataclass(frozen=True)
class Fingerprint:
    """A file's winnowed fingerprints, boilerplate removed."""

    source: str
    tokens: tuple[Token, ...]
    prints: dict[int, tuple[int, ...]]
    """hash -> the token indexes where a selected k-gram with that hash starts."""
    coverage: int
    """Tokens inside at least one selected k-gram: the denominator of the file's similarity."""


@dataclass(frozen=True)
class PairScore:
    """One compared pair of one task (a CSV row; the HTML shows those above the threshold)."""

    task: str
    student_a: str
    student_b: str
    similarity_a: float
    """Share of a's fingerprinted tokens found in b."""
    similarity_b: float
    shared_tokens: int
    """The smaller of the two sides' shared token counts."""
    identical: bool
    score: float
    lines_a: frozenset[int]
    """a's lines holding shared tokens (for the report)."""
    lines_b: frozenset[int]


@dataclass(frozen=True)
class _Bound:
    names: frozenset[str]
    attributes: frozenset[str]
    parameters: frozenset[str]


def _bound(source: str) -> _Bound:
    """What the file binds, read from its AST (nothing when it does not parse: its names then all become V anyway,
    only attributes and keyword arguments keep their spelling)."""
    names: set[str] = set()
    attributes: set[str] = set()
    parameters: set[str] = set()
    try:
        with warnings.catch_warnings():  # a student's `1if x` warns (SyntaxWarning): their text, not the TA's console
            warnings.simplefilter("ignore")
            tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # also too deep for Python's parser
        return _Bound(frozenset(), frozenset(), frozenset())
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.arg):
            parameters.add(node.arg)
        elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and not isinstance(node.ctx, ast.Load):
            attributes.add(node.attr)
        elif isinstance(node, ast.alias):
            names.add(node.asname or node.name.split(".")[0])
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            names.update(node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            names.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            names.add(node.rest)
    return _Bound(frozenset(names | parameters), frozenset(attributes), frozenset(parameters))


def _raw_tokens(source: str) -> list[tokenize.TokenInfo]:
    """Python's tokens, comments and non-logical line breaks dropped, f-strings folded into one STRING; a file that
    stops tokenizing (a syntax error) keeps what came before the error."""
    out: list[tokenize.TokenInfo] = []
    depth = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a student's `1if x` warns (SyntaxWarning): their text, not the console
        try:
            for tok in tokenize.generate_tokens(io.StringIO(source).readline):
                if tok.type in _FSTRING_START:
                    if depth == 0:
                        out.append(tok._replace(type=tokenize.STRING))
                    depth += 1
                elif tok.type in _FSTRING_END:
                    depth -= 1
                elif depth == 0 and tok.type not in (tokenize.NL, tokenize.COMMENT, tokenize.ENCODING,
                                                     tokenize.ENDMARKER):
                    out.append(tok)
        except (tokenize.TokenError, SyntaxError):
            pass
    return out


def normalize(source: str) -> tuple[Token, ...]:
    """The file's tokens with bound identifiers as V, numbers as N, strings as S (see the module's docstring)."""
    bound = _bound(source)
    raw = _raw_tokens(source)
    out: list[Token] = []
    parens = 0
    groups: list[bool] = []  # per open "(": True when it groups (an expression, a tuple), not a call's
    skipping = False
    for i, tok in enumerate(raw):
        text = tok.string
        nxt = raw[i + 1].string if i + 1 < len(raw) else ""
        at_start = i == 0 or raw[i - 1].type in _STRUCTURE or raw[i - 1].string == ";"
        if at_start and tok.type == tokenize.NAME and text in ("import", "from"):
            skipping = True
        if skipping:
            skipping = tok.type != tokenize.NEWLINE
            continue
        name = ""
        if tok.type == tokenize.OP:
            if text == "," and nxt in _CLOSE:
                continue
            parens += text in _OPEN
            parens -= text in _CLOSE
            if text == "(":
                prev = raw[i - 1] if i else None
                grouping = prev is None or not (prev.string in (")", "]") or prev.type == tokenize.STRING or (
                    prev.type == tokenize.NAME and not keyword.iskeyword(prev.string)))
                groups.append(grouping)
                if grouping:
                    continue
            elif text == ")" and groups and groups.pop():
                continue
            sym = text
        elif tok.type == tokenize.NAME:
            prev = raw[i - 1].string if i else ""
            if keyword.iskeyword(text):
                sym = text
            elif prev == "." and raw[i - 1].type == tokenize.OP:
                sym = "V" if text in bound.attributes else text
            elif parens and nxt == "=":
                sym = "V" if text in bound.parameters else text
            elif text in _BUILTINS and text not in bound.names:
                sym = text
            else:
                sym = "V"
            name = text if sym == "V" else ""
        elif tok.type == tokenize.NUMBER:
            sym = "N"
        elif tok.type == tokenize.STRING:
            sym = "S"
        elif tok.type in _STRUCTURE:
            sym = _STRUCTURE[tok.type]
        else:
            sym = text
        out.append(Token(sym, tok.start[0], tok.end[0], name))
    return tuple(out)


def _hashes(tokens: tuple[Token, ...]) -> list[int]:
    """The hash of every k-gram, a V written with the distance to its name's previous use in the k-gram (0: first
    use). blake2b, not hash(): the same values in every run."""
    out = []
    for i in range(len(tokens) - K + 1):
        last: dict[str, int] = {}
        parts = []
        for j in range(i, i + K):
            t = tokens[j]
            if t.name:
                parts.append(f"V{j - last.get(t.name, j)}")
                last[t.name] = j
            else:
                parts.append(t.sym)
        # surrogatepass: a file read with surrogateescape (bytes that are not UTF-8) keeps them as symbols
        data = "\x1f".join(parts).encode("utf-8", "surrogatepass")
        out.append(int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big"))
    return out


def winnow(hashes: list[int], window: int | None = None) -> list[int]:
    """Robust winnowing: the index of the smallest hash of every window (the rightmost on ties), each kept once."""
    window = window or WINDOW
    picked: list[int] = []
    for start in range(max(1, len(hashes) - window + 1)):
        seg = range(start, min(start + window, len(hashes)))
        if not seg:
            break
        best = min(seg, key=lambda i: (hashes[i], -i))
        if not picked or picked[-1] != best:
            picked.append(best)
    return picked


@dataclass(frozen=True)
class Boilerplate:
    """What the course gives, normalized: its statements (dropped from a file before k-grams are taken) and every
    k-gram hash of it (dropped from a file's fingerprints)."""

    hashes: frozenset[int] = frozenset()
    statements: frozenset[tuple[str, ...]] = frozenset()


def _statements(tokens: tuple[Token, ...]) -> list[list[Token]]:
    """The tokens cut after each NEWLINE (INDENT and DEDENT, which open a line, stand alone)."""
    out: list[list[Token]] = []
    current: list[Token] = []
    for t in tokens:
        if t.sym in ("<in>", "<de>"):
            out.append([t])
            continue
        current.append(t)
        if t.sym == "<nl>":
            out.append(current)
            current = []
    return out + [current] if current else out


def boilerplate(task_folder: Path) -> Boilerplate:
    """The boilerplate of a task: its skeleton.py and the fenced code blocks of its spec.md."""
    given: list[str] = []
    if (task_folder / "skeleton.py").is_file():
        given.append((task_folder / "skeleton.py").read_text(errors="replace"))
    if (task_folder / "spec.md").is_file():
        given += _FENCE.findall((task_folder / "spec.md").read_text(errors="replace"))
    hashes: set[int] = set()
    statements: set[tuple[str, ...]] = set()
    for text in given:
        tokens = normalize(text)
        hashes.update(_hashes(tokens))
        statements.update(tuple(t.sym for t in st) for st in _statements(tokens) if st[0].sym not in ("<in>", "<de>"))
    return Boilerplate(frozenset(hashes), frozenset(statements))


def fingerprint(source: str, given: Boilerplate = Boilerplate()) -> Fingerprint:
    """Winnow `source`: its statements that the boilerplate has are dropped first, then its fingerprints that the
    boilerplate has."""
    tokens = tuple(t for st in _statements(normalize(source)) if tuple(x.sym for x in st) not in given.statements
                   for t in st)
    hashes = _hashes(tokens)
    prints: dict[int, list[int]] = {}
    for i in winnow(hashes):
        if hashes[i] not in given.hashes:
            prints.setdefault(hashes[i], []).append(i)
    covered = {j for starts in prints.values() for i in starts for j in range(i, i + K)}
    return Fingerprint(source, tokens, {h: tuple(v) for h, v in prints.items()}, len(covered))


def _shared(fp: Fingerprint, hashes: Iterable[int]) -> set[int]:
    """The token indexes of `fp` inside its fingerprints that are among `hashes`."""
    return {j for h in hashes for i in fp.prints[h] for j in range(i, i + K)}


def _lines(fp: Fingerprint, indexes: set[int]) -> frozenset[int]:
    """The source lines of these tokens (structure tokens, which sit at a line's end or the next one's start, aside)."""
    return frozenset(line for j in indexes if fp.tokens[j].sym not in _STRUCTURE_SYMS
                     for line in range(fp.tokens[j].line, fp.tokens[j].end_line + 1))


def compare(task: str, student_a: str, a: Fingerprint, student_b: str, b: Fingerprint) -> PairScore:
    """Score one pair (see the module's docstring)."""
    common = a.prints.keys() & b.prints.keys()
    in_a, in_b = _shared(a, common), _shared(b, common)
    sim_a = len(in_a) / a.coverage if a.coverage else 0.0
    sim_b = len(in_b) / b.coverage if b.coverage else 0.0
    shared = min(len(in_a), len(in_b))
    identical = a.source == b.source and a.coverage > 0
    if identical:
        score = 1.0
    elif shared >= MIN_SHARED_TOKENS:
        score = max(sim_a, sim_b)
    else:
        score = 0.0
    return PairScore(task, student_a, student_b, round(sim_a, 4), round(sim_b, 4), shared, identical,
                     round(score, 4), _lines(a, in_a), _lines(b, in_b))


def compare_files(task: str, files: dict[str, str], given: Boilerplate = Boilerplate(),
                  skipped: dict[str, list[str]] | None = None) -> list[PairScore]:
    """Every pair of `files` (student -> source) of one task, highest score first. A file the tokenizer fails on
    is left out of every pair (and said in `skipped`, student -> why): one student's bytes never stop the report."""
    fps = {}
    for student, source in sorted(files.items()):
        try:
            fps[student] = fingerprint(source, given)
        except Exception as exc:  # noqa: BLE001 - this file's failure, not the class's
            if skipped is not None:
                skipped.setdefault(student, []).append(f"{task}: the tokenizer failed on it ({type(exc).__name__})")
    pairs = [compare(task, sa, fps[sa], sb, fps[sb]) for sa, sb in itertools.combinations(fps, 2)]
    return sorted(pairs, key=lambda p: (-p.score, -p.shared_tokens, p.student_a, p.student_b))


def collect(root: Path, task_ids: Iterable[str], tasks: dict[str, TaskSpec] | None = None,
            skipped: dict[str, list[str]] | None = None) -> dict[str, dict[str, str]]:
    """task id -> student -> source, from `root/<student>/<task_id>.py` (hidden folders skipped, as batch does);
    with `tasks`, a student without that file but with a notebook defining the task is compared by the source
    graded from it (grader/gates/notebook.py: the same extraction batch grades). Read as batch reads them
    (grader/gates/intake.py): students by their printable id, no link followed, sizes bounded; what cannot be
    read goes to `skipped` (student -> why)."""
    skipped = {} if skipped is None else skipped
    task_ids = list(task_ids)
    students: dict[str, str] = {}  # id -> folder name
    for entry in sorted(os.scandir(root), key=lambda e: e.name):
        if not entry.name.startswith(".") and (entry.is_symlink() or entry.is_dir(follow_symlinks=False)):
            students.setdefault(student_id(entry.name), entry.name)
            if entry.is_symlink():
                skipped.setdefault(student_id(entry.name), []).append(f"the folder {LINK_MESSAGE}")
    students = {s: n for s, n in students.items() if s not in skipped}
    notebooks = {s: NotebookFolder(root / n, deep=True) for s, n in students.items()} if tasks else {}
    # the file batch grades for each task (grader/gates/intake.py `task_files`: nearest the top, at any depth)
    decided = {s: task_files(root / n, task_ids) for s, n in students.items()}
    found: dict[str, dict[str, str]] = {}
    for task_id in task_ids:
        found[task_id] = {}
        for s, name in students.items():
            folder = root / name
            try:
                if task_id in decided[s].files:
                    data = read_submitted(folder, decided[s].files[task_id])
                else:
                    hit = notebooks[s].for_task(tasks[task_id]) if tasks and task_id in tasks else None
                    data = hit[1].source if hit else None
            except Exception as exc:  # noqa: BLE001 - IntakeError, or whatever the notebook did: this student's
                why = str(exc) if isinstance(exc, IntakeError) else type(exc).__name__
                skipped.setdefault(s, []).append(f"{task_id}: {why}")
                continue
            if data is not None:
                # surrogateescape: files that differ in bytes that are not UTF-8 still differ (byte-identical means
                # bytes)
                found[task_id][s] = data.decode("utf-8", errors="surrogateescape")
    for s, book in notebooks.items():
        if book.problems:
            skipped.setdefault(s, []).extend(book.problems)
    return found


CSV_FIELDS = ("task", "student_a", "student_b", "similarity_a", "similarity_b", "score", "shared_tokens",
              "identical", "above_threshold")


def write_csv(pairs: list[PairScore], path: Path, threshold: float = THRESHOLD) -> Path:
    """One row per compared pair."""
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(CSV_FIELDS)
        for p in pairs:
            # the students are folder names: no cell may be a formula (escape.csv_cell)
            w.writerow(escape.csv_row([p.task, p.student_a, p.student_b, f"{p.similarity_a:.4f}",
                                       f"{p.similarity_b:.4f}", f"{p.score:.4f}", p.shared_tokens, int(p.identical),
                                       int(p.score > threshold)]))
    return path


_CSS = """body{font-family:sans-serif;margin:1.5em}table{border-collapse:collapse}td,th{padding:2px 8px;
text-align:left;vertical-align:top}.side{width:50%}.src{font:12px monospace;white-space:pre;border:1px solid #ccc;
overflow-x:auto;margin:0}.src span{display:block}.src .hit{background:#ffd86b}.src i{color:#999;font-style:normal;
display:inline-block;width:3.5em;user-select:none}h3{margin-top:2em}"""


def _source_html(source: str, marked: frozenset[int]) -> str:
    rows = []
    for n, line in enumerate(source.splitlines(), 1):
        cls = ' class="hit"' if n in marked else ""
        text = line.encode("utf-8", errors="replace").decode("utf-8")  # undecodable bytes shown as ?
        rows.append(f"<span{cls}><i>{n}</i>{escape.html(text) or ' '}</span>")  # student code: text, not markup
    return f'<div class="src">{"".join(rows)}</div>'


def write_html(pairs: list[PairScore], files: dict[str, dict[str, str]], path: Path, title: str,
               threshold: float = THRESHOLD, skipped: dict[str, list[str]] | None = None) -> Path:
    """The pairs above `threshold`, task by task: a summary table, then each pair side by side, shared lines
    marked."""
    parts = [f"<!doctype html><meta charset=utf-8><title>{escape.html(title)}</title><style>{_CSS}</style>",
             f"<h1>{escape.html(title)}</h1><p>Pairs scoring above {threshold:g} (share of a file's own code, the "
             "skeleton and the statement's code left out, found in the other file after renaming and literals are "
             "normalized; byte-identical files score 1). Marked lines hold shared code. A flag asks a person to "
             "read both files; it proves nothing by itself.</p>"]
    if skipped:
        rows = (f"<li>{escape.html(who)}: {escape.html('; '.join(whys))}</li>" for who, whys in sorted(skipped.items()))
        parts.append(f"<h2>Not compared</h2><ul>{''.join(rows)}</ul>")
    for task in files:
        task_pairs = [p for p in pairs if p.task == task]
        flagged = [p for p in task_pairs if p.score > threshold]
        below = [p.score for p in task_pairs if p.score <= threshold]
        rest = f"; the highest pair below it scores {max(below):.2f}" if below else ""
        parts.append(f"<h2>{escape.html(task)}</h2><p>{len(files[task])} submissions, {len(task_pairs)} pairs, "
                     f"{len(flagged)} above the threshold{rest}.</p>")
        if not flagged:
            continue
        parts.append("<table><tr><th>score</th><th>student a</th><th>student b</th><th>a in b</th><th>b in a</th>"
                     "<th>shared tokens</th></tr>")
        for i, p in enumerate(flagged):
            anchor = f"{task}-{i}"
            ident = " (identical)" if p.identical else ""
            parts.append(f'<tr><td><a href="#{escape.html(anchor)}">{p.score:.2f}</a>{ident}</td>'
                         f"<td>{escape.html(p.student_a)}</td><td>{escape.html(p.student_b)}</td>"
                         f"<td>{p.similarity_a:.2f}</td><td>{p.similarity_b:.2f}</td><td>{p.shared_tokens}</td></tr>")
        parts.append("</table>")
        for i, p in enumerate(flagged):
            anchor = f"{task}-{i}"
            parts.append(f'<h3 id="{escape.html(anchor)}">{escape.html(task)}: {escape.html(p.student_a)} and '
                         f"{escape.html(p.student_b)}: {p.score:.2f}</h3><table><tr>"
                         f'<th class="side">{escape.html(p.student_a)} ({p.similarity_a:.0%} shared)</th>'
                         f'<th class="side">{escape.html(p.student_b)} ({p.similarity_b:.0%} shared)</th></tr><tr>'
                         f'<td class="side">{_source_html(files[task][p.student_a], p.lines_a)}</td>'
                         f'<td class="side">{_source_html(files[task][p.student_b], p.lines_b)}</td></tr></table>')
    path.write_text("\n".join(parts) + "\n")
    return path


def similarity_report(root: Path, homework: Homework, tasks: dict[str, TaskSpec], out: Path,
                      threshold: float = THRESHOLD, skipped: dict[str, list[str]] | None = None) -> list[Path]:
    """Compare every pair of `root/<student>/<task_id>.py` (or what a student's notebook defines for the task) per
    task of `homework` and write
    `out/similarity_<hw>.csv` (every pair) and `out/similarity_<hw>.html` (pairs above `threshold`). Returns the
    two paths. Tasks missing from `tasks` are skipped (the caller reports broken tasks)."""
    task_ids = [t for t in homework.tasks if t in tasks]
    skipped = {} if skipped is None else skipped
    files = collect(root, task_ids, tasks, skipped)
    pairs = [p for t in task_ids for p in compare_files(t, files[t], boilerplate(tasks[t].folder), skipped)]
    out.mkdir(parents=True, exist_ok=True)
    return [write_csv(pairs, out / f"similarity_{homework.id}.csv", threshold),
            write_html(pairs, files, out / f"similarity_{homework.id}.html",
                       f"Similarity: {homework.title or homework.id}", threshold, skipped)]
