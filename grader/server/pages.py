"""The submission server's two pages: Jinja2 templates (grader/server/templates/, autoescaped) and their static
script and style (grader/server/static/), served by grader/server/app.py.

The pages hold no data: the homework's title is rendered into them (escaped), and everything else comes from the
API as JSON and reaches the page through `textContent` (static/common.js), never through markup: a student's file
name, message or printed output shows as the characters it holds. The Content-Security-Policy allows only the
server's own scripts, style and pictures (and the `blob:` pictures the student page makes of a verdict's PNGs).
"""

from __future__ import annotations

from pathlib import Path

from jinja2 import Environment, FileSystemLoader, select_autoescape

HERE = Path(__file__).parent
CSP = "default-src 'self'; img-src 'self' blob:; script-src 'self'; style-src 'self'; object-src 'none'; " \
      "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
STATIC_TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}
"""What static/ may serve, by suffix: the pages' scripts and style sheet."""

_templates = Environment(loader=FileSystemLoader(HERE / "templates"), autoescape=select_autoescape(["html"]))


def render(page: str, title: str) -> str:
    """`student` or `staff`, for the homework titled `title`."""
    return _templates.get_template(f"{page}.html").render(title=title)


def static_files() -> dict[str, tuple[bytes, str]]:
    """name -> (bytes, media type) of every file the pages load, read once when the app is made."""
    return {p.name: (p.read_bytes(), STATIC_TYPES[p.suffix]) for p in sorted((HERE / "static").iterdir())
            if p.suffix in STATIC_TYPES and p.is_file()}
