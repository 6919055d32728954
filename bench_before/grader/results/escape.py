"""Student text as data, never markup: one escape per medium a student's bytes reach (issue: hostile input,
everywhere a student's bytes go).

What a student controls: folder and file names, the messages of the exceptions their code raises (which the judge
quotes in a test's message, got/expected values included), what it prints, a notebook's text. Each writer passes
such text through the function of its medium at the point where it is put into that medium:

* `terminal`: the lines of `grade`, `grade-dir`, `batch` and Gradescope's staff stdout. Every control character
  (C0, DEL, C1), every format character (bidi overrides and isolates such as U+202E, zero-width joiners), the line
  and paragraph separators and lone surrogates (the bytes of a name that is not UTF-8) are shown as a visible
  escape (`\\x1b`, `\\u202e`), so no escape sequence reaches the terminal (no window title, no cursor move, no
  erased line, no hidden hyperlink). A newline is kept only where the caller says the text is a multi-line
  message (`newlines=True`): the caller then indents every line after the first under the message's column
  (report.summary), so a student's line never starts where the grader's own lines start. Names are one line.
* `md_inline`: text inside a line of Markdown (a list line, a table cell): newlines and controls as visible escapes
  (no forged list line), every ASCII punctuation character backslash-escaped (CommonMark lets any be: no link,
  image, emphasis, raw HTML or table cell break survives), plain numbers left as written.
* `md_code_block`: a fenced code block whose fence is longer than any run of backticks in the text, so the text
  cannot close it; controls other than the newline shown as escapes (a lone CR is a line end to Markdown).
* `html`: markupsafe's escape (`& < > " '`), with lone surrogates made visible (they cannot be encoded).
* `csv_cell`: a cell a spreadsheet would read as a formula (`=`, `+`, `-`, `@`, tab, CR first) gets a leading `'`
  (OWASP's advice), unless it is a plain number (the grader's own scores, -0.5 included, stay numbers).
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections.abc import Iterable

import markupsafe

_UNSEEN = ("Cc", "Cf", "Zl", "Zp", "Cs")
"""Unicode categories a terminal or a renderer acts on or hides rather than shows: controls, format characters
(bidi, zero-width), line/paragraph separators, surrogates."""


def _visible(ch: str) -> str:
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def _is_unseen(ch: str) -> bool:
    return unicodedata.category(ch) in _UNSEEN


def visible_controls(text: str, keep: str = "") -> str:
    """`text` with every unseen character (see _UNSEEN) but those in `keep` written as a visible escape."""
    return "".join(_visible(ch) if ch not in keep and _is_unseen(ch) else ch for ch in text)


def terminal(text: object, newlines: bool = False) -> str:
    """Student text for a terminal line: no control or format character left, each shown as `\\xNN`/`\\uNNNN`.
    `newlines`: keep "\\n" (a multi-line message whose caller indents its continuation lines); else it is
    shown as `\\x0a` too, and the text stays on one line."""
    return visible_controls(str(text), "\n" if newlines else "")


def terminal_lines(text: object) -> list[str]:
    """The lines of a multi-line message for a terminal, each escaped (split only at "\\n": str.splitlines would
    also split at \\r, \\x0b, \\x1c, U+2028..., characters a student can put anywhere); a final newline ends
    the last line, as str.splitlines reads it."""
    return terminal(str(text).removesuffix("\n"), newlines=True).split("\n")


_MD_SPECIAL = frozenset(string.punctuation)
"""ASCII punctuation: every character CommonMark lets a backslash escape, and every one that can start markup
(links, images, emphasis, code spans, raw HTML, entities, table cells, headings, list markers)."""

NUMBER = re.compile(r"[-+]?(\d+(\.\d+)?([eE][-+]?\d+)?|nan|inf)", re.IGNORECASE)
"""A plain number as the judge writes one (`-128`, `4.4`, `1e-06`, `nan`): nothing to render, left as written."""


def md_inline(text: object) -> str:
    """Student text inside a line of Markdown, rendered as the same characters: a number as written; otherwise
    controls and newlines visible, every ASCII punctuation character backslash-escaped."""
    text = str(text)
    if NUMBER.fullmatch(text):
        return text
    return "".join("\\" + ch if ch in _MD_SPECIAL else ch for ch in visible_controls(text))


def md_code_block(text: object, info: str = "text") -> str:
    """`text` as a fenced Markdown code block, shown as written: a fence longer than any run of backticks inside
    (the text cannot close it), every control but the newline shown as an escape."""
    body = visible_controls(str(text), "\n")
    longest = max((len(run) for run in re.findall(r"`+", body)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{body}\n{fence}"


def html(text: object) -> str:
    """Student text for HTML (an element's text or a quoted attribute): markupsafe's escape; lone surrogates (a
    name's bytes that are not UTF-8) shown as `\\udcNN`, since no HTML file can encode them."""
    safe = str(text).encode("utf-8", "backslashreplace").decode("utf-8")
    return str(markupsafe.escape(safe))


_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: object) -> object:
    """A cell for a CSV a spreadsheet may open: text that starts like a formula gets a leading `'` (it then shows
    as text); a plain number, and anything that is not text, is returned as is. Lone surrogates are shown as
    escapes (the file is UTF-8)."""
    if not isinstance(value, str):
        return value
    value = value.encode("utf-8", "backslashreplace").decode("utf-8")
    if value.startswith(_FORMULA_START) and not NUMBER.fullmatch(value):
        return "'" + value
    return value


def csv_row(values: Iterable[object]) -> list[object]:
    """`csv_cell` of each value of a row."""
    return [csv_cell(v) for v in values]
