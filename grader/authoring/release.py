"""Stage 0, before any grading: what leaves the staff tree for one homework.

Two copies are made from the same source (otter-grader's `assign` does the same for notebooks):

* the **student kit** (`python -m grader release`): the grader, the homework's specs, skeletons and public cases,
  the oracles those cases need, a `config.yaml` with that homework alone, `setup.sh` and a README for students.
  It holds no `solution.py`, no `wrong/`, no hidden case and no speed test (their staff baselines may hold
  kernels of other tasks); each task's `task.yaml` says how many tests it leaves out (`withheld`), and the grader
  tells the student that they are graded after submission.
* the **autograder tree** (`python -m grader gradescope`, grader/course/gradescope.py): the same without the kit's cuts
  to cases and speed tests. It still holds no solution and no `wrong/` file: it grades, it does not prove.

Nothing here runs a submission.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

from grader.config import ROOT, ConfigError, Homework, TaskSpec, discover_tasks, load_config, reference_modules

TASK_FILES = ("spec.md", "skeleton.py")
"""What every task folder ships besides its task.yaml."""
KIT_README = "README.md"


def homework_tasks(hw_id: str, config: Path = ROOT / "config.yaml") -> tuple[Homework, dict[str, TaskSpec]]:
    """The homework and its tasks, parsed from the staff tree (every task must be valid: nothing broken ships)."""
    tasks, broken = discover_tasks()
    cfg = load_config(config, tasks)
    tasks = cfg.course_tasks(tasks)
    if hw_id not in cfg.homeworks:
        raise ConfigError(f"{config}: unknown homework {hw_id!r}; known: {', '.join(cfg.homeworks)}")
    hw = cfg.homeworks[hw_id]
    bad = {t: broken[t] for t in hw.tasks if t in broken}
    if bad:
        raise ConfigError("; ".join(f"task {t} is broken: {e}" for t, e in bad.items()))
    return hw, {t: tasks[t] for t in hw.tasks}


def task_yaml(task: TaskSpec, *, kit: bool) -> dict:
    """The task.yaml a copy ships: never `wrong`; in the kit, only the public cases and no speed tests, with
    `withheld` counting what was left out."""
    raw = yaml.safe_load((task.folder / "task.yaml").read_text())
    raw.pop("wrong", None)
    if kit:
        cases = raw.get("cases") or []
        public = [c for c in cases if c.get("visibility", "public") == "public"]
        held_cases = [c for c in task.cases if c.visibility != "public"]
        held = {"cases": len(held_cases), "speed_tests": len(task.perf),
                "points": round(sum(c.points for c in held_cases) + sum(p.points for p in task.perf), 6)}
        raw["cases"] = public
        raw.pop("perf", None)
        if held["cases"] or held["speed_tests"]:
            raw["withheld"] = held
    return raw


def write_tree(hw_id: str, out: Path, *, kit: bool, config: Path = ROOT / "config.yaml") -> list[Path]:
    """Write the copy of the grader and one homework into `out` (which must not exist or be empty); returns the
    files written, relative to `out`."""
    hw, tasks = homework_tasks(hw_id, config)
    if out.exists() and any(out.iterdir()):
        raise FileExistsError(f"{out} is not empty: give a new folder")
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []

    def put(rel: str, text: str | None = None, source: Path | None = None) -> None:
        dest = out / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        if source is not None:
            shutil.copyfile(source, dest)
        else:
            dest.write_text(text or "")
        written.append(Path(rel))

    for src in sorted((ROOT / "grader").rglob("*.py")):  # the package and its stage folders
        put(src.relative_to(ROOT).as_posix(), source=src)
    put("reference/__init__.py", source=ROOT / "reference" / "__init__.py")
    # reference/_hidden.py (the hidden cases' value patterns) only where hidden cases are graded, never in a kit
    hidden = [] if kit or not (ROOT / "reference" / "_hidden.py").exists() else ["_hidden"]
    for name in reference_modules(tasks) + hidden:
        put(f"reference/{name}.py", source=ROOT / "reference" / f"{name}.py")
    for task in tasks.values():
        head = ("# Written by `python -m grader release` from the staff task.yaml: the public cases only\n" if kit
                else "# Written by `python -m grader gradescope` from the staff task.yaml (no wrong/ files)\n")
        put(f"tasks/{task.id}/task.yaml", head + yaml.safe_dump(task_yaml(task, kit=kit), sort_keys=False, width=110))
        for name in TASK_FILES:
            put(f"tasks/{task.id}/{name}", source=task.folder / name)
        if not kit:
            for baseline in sorted({p.baseline for p in task.perf}):
                put(f"tasks/{task.id}/{baseline}", source=task.folder / baseline)
    put("config.yaml", course_config(hw_id, config))
    put("pyproject.toml", source=ROOT / "pyproject.toml")
    if kit:
        put("setup.sh", setup_script(config))
        (out / "setup.sh").chmod(0o755)
        put(KIT_README, kit_readme(hw, tasks, config))
        put(".gitignore", ".venv/\n__pycache__/\nresults/\n")
    if kit:
        found = leaks(out)
        if found:
            shutil.rmtree(out)
            raise ConfigError("the kit would hold text of the answer key, so it was not written:\n  "
                              + "\n  ".join(found[:20]))
    # The copy must load on its own: the same checks as the staff tree (points add up, tasks valid).
    copied, broken = discover_tasks(out)
    if broken or set(copied) != set(tasks):
        raise ConfigError(f"the copy in {out} does not load: {broken or sorted(set(tasks) - set(copied))}")
    load_config(out / "config.yaml", copied)
    return written


MIN_LINE = 24
"""Shorter lines (`return out`, `@triton.jit`) say nothing about an answer."""


def _lines(path: Path) -> list[str]:
    try:
        return [" ".join(line.split()) for line in path.read_text().splitlines()]
    except (UnicodeDecodeError, OSError):
        return []


def answer_key(root: Path = ROOT) -> dict[str, str]:
    """Every line of the staff-only files of every task (solutions, right/ and wrong/ files, speed baselines), minus
    what the statements and skeletons already give students: normalized line -> the file it comes from."""
    given = {line for folder in (root / "tasks").glob("*/") for name in TASK_FILES for line in _lines(folder / name)}
    key: dict[str, str] = {}
    for folder in sorted((root / "tasks").glob("*/")):
        staff = [p for p in folder.glob("*.py") if p.name not in TASK_FILES] + sorted(folder.glob("wrong/*.py")) \
            + sorted(folder.glob("right/*.py"))
        for path in staff:
            for line in _lines(path):
                if len(line) >= MIN_LINE and line not in given:
                    key.setdefault(line, str(path.relative_to(root)))
    return key


def leaks(folder: Path, root: Path = ROOT) -> list[str]:
    """Where a file under `folder` holds a line of the answer key (`file:line: a line of tasks/.../x.py`), and
    any file named like a staff-only file."""
    key = answer_key(root)
    found = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        rel = path.relative_to(folder)
        if path.name == "solution.py" or "wrong" in rel.parts or "right" in rel.parts:
            found.append(f"{rel}: a staff-only file")
        for n, line in enumerate(_lines(path), 1):
            if line in key:
                found.append(f"{rel}:{n}: a line of {key[line]}")
    return found


def course_config(hw_id: str, config: Path = ROOT / "config.yaml") -> str:
    """config.yaml with this homework alone (the course's grading settings kept)."""
    raw = yaml.safe_load(config.read_text())
    kept = {"course": raw.get("course", "course"), **({"toolchain": raw["toolchain"]} if raw.get("toolchain") else {}),
            "grading": raw.get("grading") or {},
            "homeworks": {hw_id: raw["homeworks"][hw_id]},
            "always_allowed_imports": raw.get("always_allowed_imports") or []}
    return ("# The course's configuration for this homework alone (written from the staff config.yaml; the keys are\n"
            "# described in grader/config).\n" + yaml.safe_dump(kept, sort_keys=False, width=110))


SETUP_SH = """#!/usr/bin/env bash
# One command: make .venv with what the grader needs, and the `triton-grader` command (grades from any folder).
# A torch that python3 already has (a GPU box) is reused; otherwise torch's CPU build comes from TORCH_INDEX
# (default: PyTorch's CPU index; a plain `pip install torch` pulls a CUDA build of several GB). Where that index
# cannot be reached, pip's own index is asked instead, and this script says so.
set -euo pipefail
cd "$(dirname "$0")"
PY=${PY:-python3}
TORCH=${TORCH:-torch==@TORCH@}
TORCH_INDEX=${TORCH_INDEX-https://download.pytorch.org/whl/cpu}
if "$PY" -c "import torch, triton" 2>/dev/null; then
  # $PY's own packages seen from .venv through a .pth file: --system-site-packages would show the base
  # interpreter's, not those of a venv or conda environment that $PY may be
  "$PY" -m venv .venv
  "$PY" -c "import sysconfig; print(*sorted({sysconfig.get_paths()[k] for k in ('purelib', 'platlib')}), sep='\\n')" \\
    > "$(.venv/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")/python3-packages.pth"
else
  "$PY" -m venv .venv
  if [ -n "$TORCH_INDEX" ] \\
    && "$PY" -c "import sys, urllib.request as u; u.urlopen(sys.argv[1] + '/torch/', timeout=10)" "${TORCH_INDEX%/}" \\
      2>/dev/null; then
    .venv/bin/python -m pip install -q "$TORCH" --index-url "$TORCH_INDEX"
  else
    echo "setup: ${TORCH_INDEX:-TORCH_INDEX (empty)} cannot be reached: $TORCH from pip's own index" \\
         "(on PyPI, a CUDA build of several GB)"
    .venv/bin/python -m pip install -q "$TORCH"
  fi
  .venv/bin/python -m pip install -q triton==@TRITON@
fi
.venv/bin/python -m pip install -q numpy pytest pytest-json-report pyyaml pydantic nbformat markupsafe httpx \
  matplotlib tqdm
# The command: an editable install, which needs setuptools >= 64 and a bdist_wheel command (in setuptools itself
# since 70.1; a venv of Python 3.11 comes with setuptools 65 and no `wheel`, so its editable install failed with
# "invalid command 'bdist_wheel'")
.venv/bin/python -m pip install -q "setuptools>=70.1"
if ! .venv/bin/python -m pip install -q --no-deps --no-build-isolation -e . > .venv/install-command.log 2>&1; then
  tail -n 5 .venv/install-command.log
  echo "setup: the triton-grader command was not installed (above: pip's last lines; all of it in" \\
       ".venv/install-command.log): use .venv/bin/python -m grader in this folder"
fi
.venv/bin/python -c "import torch, triton; print('ready: torch', torch.__version__, 'triton', triton.__version__,
      '(GPU: ' + torch.cuda.get_device_name() + ')' if torch.cuda.is_available() else '(no GPU: the interpreter)')"
"""


CI_TOOLCHAIN = {"torch": "2.13.0", "triton": "3.9.0"}
"""What the kit and Gradescope's bundle install when config.yaml names no `toolchain`: the versions CI tests."""


def toolchain_of(config: Path = ROOT / "config.yaml") -> dict[str, str]:
    """The torch and triton the course grades with (config.yaml `toolchain`, as load_config validates it), else
    CI's."""
    return load_config(config).toolchain or dict(CI_TOOLCHAIN)


def setup_script(config: Path = ROOT / "config.yaml") -> str:
    """The kit's setup.sh, installing the course's torch (its CPU build where python3 has none) and triton."""
    pins = toolchain_of(config)
    return SETUP_SH.replace("@TORCH@", pins["torch"]).replace("@TRITON@", pins["triton"])


def kit_readme(hw: Homework, tasks: dict[str, TaskSpec], config: Path = ROOT / "config.yaml") -> str:
    rows = []
    for t in tasks.values():
        hidden = sum(c.visibility != "public" for c in t.cases)
        extra = ", ".join(p for p in (f"{hidden} hidden case(s)" if hidden else "",
                                      f"{len(t.perf)} speed test(s)" if t.perf else "") if p)
        rows.append(f"| `{t.id}` | {t.title} | {hw.tasks[t.id]:g} | {extra or '-'} |")
    first = next(iter(tasks))
    due = hw.deadline.isoformat() if hw.deadline else "see the course page"
    pins = toolchain_of(config)
    triton_line = f"triton {pins['triton']}"
    return f"""# {hw.title}: student kit

Everything you need to check your files before you submit them: the task statements, a skeleton per task, the
public test cases, and the grader that the course runs. Due: {due}.

## Set up (once)

```
./setup.sh
```

It makes `.venv` here: with the torch that `python3` already has (a GPU machine), or with the CPU build of torch
(a laptop: kernels then run in Triton's interpreter, at smaller sizes). The CPU build comes from PyTorch's CPU
index; to use another (a mirror), set `TORCH_INDEX`, e.g. `TORCH_INDEX=https://mirror.example/whl/cpu ./setup.sh`
(`TORCH_INDEX= ./setup.sh` asks pip's own index, which on Linux holds CUDA builds of several GB). It also
installs the `triton-grader` command, which runs from any folder.

## Check a file

```
.venv/bin/triton-grader grade --task {first} my_{first}.py
```

(or `.venv/bin/python -m grader ...` from this folder.) A Jupyter notebook is checked as it is:
`.venv/bin/triton-grader grade --task {first} my_notebook.ipynb` grades what its code cells define for that task
(its kernels and functions, what they use, their imports; test calls, prints and `%`/`!` lines are left out),
and messages name the code cell (counted from 1) and the line in it.

Each test prints PASS or FAIL and why: the case (shape, dtype), how many elements differ with got/expected, which
buffer a kernel wrote past and at which offsets, which import or autotune rule failed and on which line. It runs on
the GPU when there is one; `--device cpu` forces the interpreter. `--json out.json` writes the result.

## What the check on a CPU cannot grade

Without a GPU, the check runs your file on CPU tensors, through Triton's interpreter, with the triton installed
here; the course grades on its GPU with its own triton ({triton_line}). Two things fail here although they may
pass there, and the check says so in each failing test instead of printing Triton's error:

* an API the installed triton lacks, or that its interpreter cannot run: block pointers (`tl.make_block_ptr`,
  `tl.advance`) were removed in triton 3.9 and exist in 3.6 (`tl.make_block_ptr is not in triton 3.9.0
  (installed here); the course's GPU runs triton 3.6.0, where it exists: this check cannot grade it here`), and
  `tl.inline_asm_elementwise` runs on a GPU only. Write the kernel with pointer arithmetic (offsets from
  `tl.arange`, a mask for the edges) to have it checked here;
* an `assert` that asks for CUDA tensors (`assert x.is_cuda`, `assert x.device.type == "cuda"`): the tensors
  here are CPU tensors, so it fails every case. Remove such asserts; on the GPU the inputs are CUDA tensors anyway.

## The tasks

Read `tasks/<task>/spec.md`, start from `tasks/<task>/skeleton.py`, and submit one file per task named
`<task>.py` (e.g. `{first}.py`), or one notebook (`.ipynb`) whose code cells define the tasks' kernels and
functions: each task is graded from what its cells define (a `<task>.py` beside it wins for its task).

| task | title | points | graded after you submit |
| --- | --- | --- | --- |
{chr(10).join(rows)}

The score a check prints is out of the public points. The course also grades hidden cases (other shapes and value
patterns: write the kernel for the statement, not for the cases here) and, on a GPU, speed tests; the check tells
you how many there are for the task. Attempts, deadline and late rules are the course's (see its page).
"""
