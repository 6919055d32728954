"""Setting up as README.md says: `make setup` adds the extras asked for to a venv that lacks them, and `serve` on a
venv without the server extra says in one line how to get it (a TA's first `serve` ended in a traceback)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from grader.config import ROOT

STUB = """#!/usr/bin/env bash
set -euo pipefail
mkdir -p .venv
echo "ran with: $EXTRAS" >> calls.txt
{ for extra in $EXTRAS; do echo "$extra"; done; cat .venv/.extras 2>/dev/null || true; } | sort -u > .venv/.x
mv .venv/.x .venv/.extras
touch .venv/.ready
"""


def test_make_setup_sets_up_again_when_an_extra_asked_for_is_missing(tmp_path: Path):
    """The Makefile's own rule, with a stand-in for scripts/setup_venv.sh that records each run (the real one
    installs torch). The last lines of the real script are the stand-in's: they keep .venv/.extras."""
    if shutil.which("make") is None:
        raise AssertionError("make is missing: README.md's commands need it")
    shutil.copy(ROOT / "Makefile", tmp_path / "Makefile")
    (tmp_path / "pyproject.toml").write_text("")
    script = tmp_path / "scripts" / "setup_venv.sh"
    script.parent.mkdir()
    script.write_text(STUB)
    script.chmod(0o755)
    real = (ROOT / "scripts" / "setup_venv.sh").read_text()
    assert '"$VENV/.extras"' in real and "sort -u" in real  # the real script keeps the record the rule reads

    def make(extras: str | None = None) -> str:
        env = {k: v for k, v in os.environ.items() if k not in ("EXTRAS", "MAKEFLAGS", "MAKELEVEL")}
        if extras is not None:
            env["EXTRAS"] = extras
        done = subprocess.run(["make", "-s", "setup"], cwd=tmp_path, env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    make()
    assert (tmp_path / "calls.txt").read_text().splitlines() == ["ran with: plots"]
    assert "ready" in make()  # nothing new asked for: nothing done
    make("plots server")
    assert (tmp_path / "calls.txt").read_text().splitlines()[-1] == "ran with: plots server"
    assert (tmp_path / ".venv" / ".extras").read_text().split() == ["plots", "server"]
    make("server")
    assert len((tmp_path / "calls.txt").read_text().splitlines()) == 2


def test_serve_without_the_server_extra_says_how_to_get_it(tmp_path: Path):
    code = ("import sys; sys.modules['fastapi'] = None; from grader.cli import main; "
            f"sys.exit(main(['serve', '--homework', 'hw4_int8', '--tokens', {str(tmp_path / 't.csv')!r}, "
            f"'--data', {str(tmp_path / 'd')!r}]))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [
        'serve: the submission server needs FastAPI, uvicorn and Jinja2 (the "server" extra): EXTRAS="plots server" '
        'make setup, or .venv/bin/python -m pip install fastapi uvicorn jinja2']
