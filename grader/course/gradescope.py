"""Gradescope: the autograder bundle (`python -m grader gradescope`), what runs inside it for each submission
(`python -m grader gradescope-run`, called by the bundle's `run_autograder`), and results in Gradescope's format
(also what `batch` writes per student, for courses that grade on their own GPU box and upload).

Gradescope unpacks the bundle into `/autograder/source`, runs `setup.sh` once when the image is built, and for
each submission runs `run_autograder` with the student's files in `/autograder/submission`; it reads
`/autograder/results/results.json`. `AUTOGRADER_ROOT` moves `/autograder` (CI runs the bundle in a temp folder).
Attempts, deadlines and late rules are Gradescope's own settings there.
"""

from __future__ import annotations

import base64
import json
import os
import re
import tempfile
import time
import traceback
import zipfile
from pathlib import Path

import markupsafe

from grader.authoring.release import toolchain_of, write_tree
from grader.config import GRADESCOPE_VISIBILITY, ROOT, ConfigError, Homework, TaskSpec, discover_tasks, load_config
from grader.course import leaderboard
from grader.gates.intake import IntakeError, read_submitted, scan, shown, task_files
from grader.gates.notebook import NotebookFolder
from grader.results import escape

VISIBILITY = ["hidden", "after_due_date", "after_published", "visible"]
FORMATS = ["text", "html", "simple_format", "md", "ansi"]
RESULTS_SCHEMA = {
    "$comment": "Gradescope's results.json (its autograder specification), as far as this grader writes it",
    "type": "object",
    "required": ["tests"],
    "properties": {
        "score": {"type": "number"},
        "execution_time": {"type": "integer", "minimum": 0},
        "output": {"type": "string"},
        "output_format": {"enum": FORMATS},
        "visibility": {"enum": VISIBILITY},
        "stdout_visibility": {"enum": VISIBILITY},
        "tests": {"type": "array", "items": {
            "type": "object",
            "required": ["name", "score", "max_score", "output", "visibility"],
            "properties": {
                "name": {"type": "string", "minLength": 1},
                "score": {"type": "number", "minimum": 0},
                "max_score": {"type": "number", "minimum": 0},
                "status": {"enum": ["passed", "failed"]},
                "output": {"type": "string"},
                "output_format": {"enum": FORMATS},
                "visibility": {"enum": VISIBILITY},
            },
        }},
        "leaderboard": {"type": "array", "items": {
            "type": "object",
            "required": ["name", "value"],
            "additionalProperties": False,
            "properties": {"name": {"type": "string", "minLength": 1}, "value": {"type": ["number", "string"]},
                           "order": {"enum": ["asc", "desc"]}},
        }},
    },
}
"""What tests/test_release.py validates every results.json against (with jsonschema)."""


def fenced(text: str) -> str:
    """`text` as a Markdown code block, shown as the grader wrote it (`_quantize_global`, `q[2, 0]`, aligned
    got/expected columns): a fence longer than any run of backticks inside, so the student's part of a message
    (an exception's text) cannot close it (escape.md_code_block)."""
    return escape.md_code_block(text)


GOT_EXPECTED = re.compile(r"(\w+\[[\d, ]*\]) got (\S+?) expected (\S+?)(?=;|$|\s)", re.M)
"""The judge's "q[2, 0] got 5 expected 4" pairs (grader/judge `compare_values`), for a Markdown table."""


def got_expected(message: str, rows: int = 8) -> list[tuple[str, str, str]]:
    """(element, got, expected) of the first `rows` elements a failing test's message lists."""
    return GOT_EXPECTED.findall(message or "")[:rows]


def got_expected_table(message: str) -> str:
    """A Markdown table of `got_expected(message)`, or "" when the message lists none (Gradescope renders it under
    the message's code block)."""
    found = got_expected(message)
    if not found:
        return ""
    cells = ["| element | got | expected |", "| --- | ---: | ---: |"]
    # `where` is \w+[digits] (GOT_EXPECTED), but got and expected are any non-blank run, and a message quotes an
    # exception's text: a student can shape one like this line, with a link or an image for a value.
    cells += [f"| `{where}` | {escape.md_inline(got)} | {escape.md_inline(want)} |" for where, got, want in found]
    return "\n".join(cells)


def picture_html(message: str, png: bytes, name: str) -> str:
    """A failing test's output as HTML: its message as written, the got/expected table, and its picture embedded
    as a data URI (Gradescope renders no image file from the results folder; an embedded one it shows)."""
    rows = got_expected(message)
    table = ("<table><tr><th>element</th><th>got</th><th>expected</th></tr>"
             + "".join(f"<tr><td><code>{escape.html(w)}</code></td><td>{escape.html(g)}</td>"
                       f"<td>{escape.html(e)}</td></tr>" for w, g, e in rows) + "</table>") if rows else ""
    image = f'<img alt="{escape.html(name)}" src="data:image/png;base64,{base64.b64encode(png).decode()}">'
    return f"<pre>{escape.html(message or '')}</pre>{table}{image}"


def entries_of(task_id: str, tests: list[dict], factor: float = 1.0,
               pictures: dict[str, bytes] | None = None) -> list[dict]:
    """Gradescope test entries for one task's tests (student or staff JSON `tests`; the messages are kept, since
    Gradescope hides a test by its visibility). Tests worth no points (the gates, speed tests not run here) are
    left out: a gate's failure is repeated by every test it stops. A failing test with a picture (`pictures`, by
    test name: the puzzles') is written as HTML with the picture embedded; every other one as Markdown."""
    entries = []
    for t in tests:
        if not t["max_points"]:
            continue
        png = (pictures or {}).get(t["name"]) if t["outcome"] != "passed" else None
        if png:
            output, fmt = picture_html(t["message"], png, f"{task_id} {t['name']}"), "html"
        else:
            output, fmt = "\n\n".join(filter(None, [fenced(t["message"]), got_expected_table(t["message"])])), "md"
        if t.get("printed") and t["outcome"] != "passed":  # the student's own output: marked, and data only
            said = "Your code printed during this call (its output, not the grader's):"
            output += (f"<p>{markupsafe.escape(said)}</p><pre>{markupsafe.escape(t['printed'])}</pre>" if fmt == "html"
                       else f"\n\n{said}\n\n{fenced(t['printed'])}")
        entries.append({"name": f"{task_id} / {t['name']}", "score": round(t["points"] * factor, 6),
                        "max_score": t["max_points"], "status": "passed" if t["outcome"] == "passed" else "failed",
                        "output": output, "output_format": fmt,
                        "visibility": GRADESCOPE_VISIBILITY.get(t.get("visibility", "public"), "hidden")})
    return entries


def results_json(tests: list[dict], output: str = "", execution_time: float | None = None) -> dict:
    data: dict = {"score": round(sum(t["score"] for t in tests), 6), "output": output, "output_format": "md",
                  "visibility": "visible", "stdout_visibility": "hidden", "tests": tests}
    if execution_time is not None:
        data["execution_time"] = int(round(execution_time))
    return data


# ---------------------------------------------------------------------------------------------- the bundle

RUN_AUTOGRADER = """#!/usr/bin/env bash
# Gradescope runs this for each submission (as /autograder/run_autograder; the bundle lies in source/).
# AUTOGRADER_ROOT moves /autograder; PYTHON picks the interpreter (default: the venv setup.sh made).
set -uo pipefail
ROOT=${{AUTOGRADER_ROOT:-/autograder}}
PYTHON=${{PYTHON:-$ROOT/venv/bin/python}}
mkdir -p "$ROOT/results"
cd "$ROOT/source"
exec "$PYTHON" -m grader gradescope-run --homework {hw} --submission "$ROOT/submission" \\
  --results "$ROOT/results/results.json"
"""

SETUP_SH = """#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder's image (Ubuntu). Its machines have no GPU:
# the CPU build of torch and triton, whose interpreter runs the kernels: the releases config.yaml's `toolchain`
# names (the course's), else the ones the grader's CI tests.
set -euo pipefail
ROOT=${{AUTOGRADER_ROOT:-/autograder}}
if ! python3 -m venv --help >/dev/null 2>&1; then
  apt-get update -q && apt-get install -y -q python3 python3-venv python3-pip
fi
python3 -m venv "$ROOT/venv"
PY="$ROOT/venv/bin/python"
"$PY" -m pip install -q torch=={torch} --extra-index-url "${{TORCH_INDEX:-https://download.pytorch.org/whl/cpu}}"
"$PY" -m pip install -q triton=={triton} numpy pytest pytest-json-report pyyaml pydantic nbformat markupsafe
"$PY" -c "import torch, triton; print('autograder ready: torch', torch.__version__, 'triton', triton.__version__)"
"""


def bundle(hw_id: str, out: Path, config: Path = ROOT / "config.yaml") -> Path:
    """Write the autograder zip for one homework: setup.sh and run_autograder at its top, beside the grader
    and the homework's tasks (every case, hidden ones included; no solution, no wrong/ file)."""
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "source"
        files = write_tree(hw_id, tree, kit=False, config=config)
        (tree / "setup.sh").write_text(SETUP_SH.format(**toolchain_of(config)))
        (tree / "run_autograder").write_text(RUN_AUTOGRADER.format(hw=hw_id))
        out.parent.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
            for rel in [Path("setup.sh"), Path("run_autograder"), *files]:
                info = zipfile.ZipInfo(str(rel), date_time=(2026, 1, 1, 0, 0, 0))
                executable = rel.name in ("setup.sh", "run_autograder")
                info.external_attr = (0o100755 if executable else 0o100644) << 16
                info.compress_type = zipfile.ZIP_DEFLATED
                z.writestr(info, (tree / rel).read_bytes())
    return out


# --------------------------------------------------------------------------------- inside Gradescope, per run


def find_files(submission: Path, task_ids: list[str]) -> tuple[dict[str, Path], list[str]]:
    """The file of each task and what to tell the student about the rest, by the rule every way of grading a
    folder shares (grader/gates/intake.py `task_files`: the `<task_id>.py` nearest the top, at any depth, as a zip
    upload may add folders; no link followed). The notes name the student's files: Markdown-escaped here."""
    decided = task_files(submission, task_ids)
    return ({t: submission / rel for t, rel in decided.files.items()},
            [escape.md_inline(n) for n in decided.notes])


def refused_entry(task: TaskSpec, device: str, why: str) -> dict:
    """The entry of a task whose file the intake refused (a link, not a regular file, too large): 0 points, why."""
    return {"name": f"{task.id} / file", "score": 0.0, "max_score": task.points_on(device), "status": "failed",
            "visibility": "visible", "output_format": "md", "output": fenced(f"not graded: {why}")}


def missing_entry(task: TaskSpec, device: str, received: list[str]) -> dict:
    names = ", ".join(escape.md_inline(n) for n in received) if received else "no .py file at all"  # student names
    return {"name": f"{task.id} / file", "score": 0.0, "max_score": task.points_on(device), "status": "failed",
            "visibility": "visible", "output_format": "md",
            "output": f"no file named `{task.id}.py` in your submission, nor a notebook defining its kernels "
                      f"(received: {names}). Each task is one file named by its task id, or a cell of a notebook "
                      f"(.ipynb) that defines it; resubmit with the file renamed."}


def run(hw_id: str, submission: Path, results: Path, config: Path = ROOT / "config.yaml",
        device: str | None = None) -> int:
    """Grade the submission's files for every task of the homework and write Gradescope's results.json. Always
    writes it: an error of the grader itself gives 0 points with a message (fail closed) and the traceback on
    stdout, which only staff see, and exits 1, so that the run shows as failed to staff (a broken task.yaml in
    the bundle used to give every student 0 with exit code 0, and nothing flagged it)."""
    from grader.pipeline.grading import Job, grade_jobs, resolve_device
    from grader.results import report

    start = time.monotonic()
    results.parent.mkdir(parents=True, exist_ok=True)
    code = 0
    try:
        tasks, broken = discover_tasks()
        cfg = load_config(config, tasks)
        tasks = cfg.course_tasks(tasks)
        if hw_id not in cfg.homeworks:
            raise ConfigError(f"{config}: no homework {hw_id!r}")
        hw: Homework = cfg.homeworks[hw_id]
        missing_tasks = [t for t in hw.tasks if t not in tasks]
        if missing_tasks:
            raise ConfigError(f"tasks not loadable: {', '.join(f'{t}: {broken.get(t)}' for t in missing_tasks)}")
        dev = resolve_device(device or cfg.device)
        found, notes = find_files(submission, list(hw.tasks))
        jobs, refused = [], {}
        for t in hw.tasks:
            if t in found:  # read here, as hostile bytes: no link followed, bounded (grader/gates/intake.py)
                try:
                    jobs.append(Job(tasks[t], found[t], "submission",
                                    read_submitted(submission, found[t].relative_to(submission))))
                except IntakeError as exc:
                    refused[t] = str(exc)
        notebooks = NotebookFolder(submission, deep=True)  # a notebook submits each task it defines that has no .py
        for t in hw.tasks:
            if t not in found and t not in refused and (hit := notebooks.for_task(tasks[t])):
                jobs.append(Job(tasks[t], hit[0], "submission", hit[1].source, hit[1]))
        notes += [escape.md_inline(n) for n in notebooks.notes + notebooks.problems]  # name the student's notebooks
        graded = {r.task: r for r in grade_jobs(jobs, cfg, dev, 0)} if jobs else {}
        received = [shown(rel) for rel in scan(submission, deep=True).files][:50]
        entries, lines = [], []
        for task_id in hw.tasks:
            result = graded.get(task_id)
            if task_id in refused:
                entries.append(refused_entry(tasks[task_id], dev, refused[task_id]))
                lines.append(f"- `{task_id}`: not graded: {refused[task_id]}")
                continue
            if result is None:
                entries.append(missing_entry(tasks[task_id], dev, received))
                lines.append(f"- `{task_id}`: no file `{task_id}.py`")
                continue
            entries += entries_of(task_id, result.staff_json()["tests"], pictures=result.pictures)
            lines.append(f"- `{task_id}`: {result.score:g} / {result.max_score:g}"
                         + (f" ({result.diagnosis})" if result.diagnosis else ""))
            print(report.summary(result, staff=True), flush=True)
        where = report.device_label({"device": dev, "gpu": next(iter(graded.values())).environment.get("gpu")}
                                    if graded else {"device": dev})
        versions = next((r.environment.get("toolchain_note") for r in graded.values()), None)
        output = "\n".join([f"**{hw.title}**: graded on {where}." + (f" {versions[0].upper()}{versions[1:]}."
                                                                      if versions else ""),
                             "", *lines, *(f"- {n}" for n in notes)])  # notes: Markdown, names escaped
        data = results_json(entries, output, time.monotonic() - start)
        board = [e for r in graded.values()
                 for e in leaderboard.entries_of("submission", r.task, r.staff_json()["tests"], hw)]
        if board:  # Gradescope's own leaderboard (its pseudonyms): each ranked speed test's speedup
            data["leaderboard"] = leaderboard.gradescope_entries(board)
    except Exception as exc:  # noqa: BLE001 - the grader's own failure: fail closed, with a message
        traceback.print_exc()
        data = results_json([], f"The autograder itself failed ({type(exc).__name__}); no points were given. "
                                f"Tell the course staff: they see the details.", time.monotonic() - start)
        code = 1
    results.write_text(json.dumps(data, indent=2) + "\n")
    print(f"results: {results} ({data['score']:g} points)", flush=True)
    return code


def default_root() -> Path:
    return Path(os.environ.get("AUTOGRADER_ROOT", "/autograder"))
