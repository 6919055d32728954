"""What the submission server's tests share (tests/test_server.py, tests/test_server_durable.py): a real server
(`python -m grader serve`, uvicorn) in a process of its own on a free loopback port, the real client, and the
roster's tokens."""

from __future__ import annotations

import csv
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

for _needed in ("httpx", "fastapi", "uvicorn"):  # the server's extra (make test installs it)
    pytest.importorskip(_needed)

import httpx  # noqa: E402

from grader.config import ROOT  # noqa: E402

TASK = "puzzle01_constant_add"
SOLUTION = ROOT / "tasks" / TASK / "solution.py"
SKELETON = ROOT / "tasks" / TASK / "skeleton.py"
DEADLINE = "2026-12-07T23:59:00+03:00"  # config.yaml's puzzles deadline
BEFORE = "2026-12-01T12:00:00+00:00"


def variant(path: Path, i: int, folder: Path) -> Path:
    """The same file with a comment line: another file (another sha256), the same verdict."""
    out = folder / f"v{i}" / path.name
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(path.read_text() + f"\n# variant {i}\n")
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Served:
    """`python -m grader serve` in a process of its own, on a free loopback port."""

    def __init__(self, tmp: Path, tokens: Path, *extra: str, config: Path | None = None) -> None:
        self.tmp, self.tokens, self.extra, self.config = tmp, tokens, extra, config
        self.data = tmp / "data"
        self.clock = tmp / "clock.txt"
        if not self.clock.exists():
            self.set_clock(BEFORE)
        self.proc: subprocess.Popen | None = None
        self.log = tmp / "server.log"

    def set_clock(self, when: str) -> None:
        self.clock.write_text(when)

    def start(self, *more: str) -> Served:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = dict(os.environ, GRADER_CLOCK_FILE=str(self.clock), PYTHONUNBUFFERED="1")
        cmd = [sys.executable, "-m", "grader", "serve", "--homework", "puzzles", "--tokens", str(self.tokens),
               "--data", str(self.data), "--port", str(self.port), "--device", "cpu", "--workers", "2",
               *self.extra, *more]
        if self.config:
            cmd += ["--config", str(self.config)]
        self.proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=open(self.log, "ab"), stderr=subprocess.STDOUT,
                                     start_new_session=True)
        end = time.monotonic() + 60
        while time.monotonic() < end:
            try:
                if httpx.get(f"{self.url}/api/health", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            assert self.proc.poll() is None, self.log.read_text()[-3000:]
            time.sleep(0.2)
        raise AssertionError("the server did not answer in 60 s: " + self.log.read_text()[-3000:])

    def kill9(self) -> None:
        os.killpg(self.proc.pid, signal.SIGKILL)  # the server and the workers it started
        self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill9()

    def api(self, method: str, path: str, token: str | None = None, **kw):
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.request(method, f"{self.url}{path}", headers=headers, timeout=30, **kw)

    def wait_graded(self, token: str, n: int, timeout: float = 240) -> list[dict]:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            subs = self.api("GET", "/api/results", token).json()["submissions"]
            done = [s for s in subs if s["state"] in ("graded", "failed")]
            if len(done) >= n:
                return subs
            assert self.proc.poll() is None, self.log.read_text()[-3000:]
            time.sleep(0.5)
        raise AssertionError(f"not {n} graded in {timeout} s: {subs}\n" + self.log.read_text()[-3000:])


def submit_cli(served: Served, token: str, file: Path, *more: str, task: str = TASK) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "grader", "submit", "--server", served.url, "--token", token,
                           "--task", task, str(file), *more], cwd=ROOT, capture_output=True, text=True, timeout=300)



def make_tokens(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    folder = tmp_path_factory.mktemp("tokens")
    roster = folder / "roster.csv"
    roster.write_text("student,email\nann,a@x\nbob,b@x\ncid,c@x\n")
    out = folder / "tokens.csv"
    done = subprocess.run([sys.executable, "-m", "grader", "tokens", str(roster), "--out", str(out), "--staff", "ta"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    rows = list(csv.DictReader(out.open()))
    assert [(r["student"], r["role"]) for r in rows] == [("ann", "student"), ("bob", "student"), ("cid", "student"),
                                                         ("ta", "staff")]
    assert len({r["token"] for r in rows}) == 4 and all(len(r["token"]) >= 32 for r in rows)
    return out, {r["student"]: r["token"] for r in rows}


