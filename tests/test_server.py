"""The submission server, end to end on loopback: a real server (`python -m grader serve`, uvicorn) started by the
test, the real client (`python -m grader submit`), grading on the CPU (the puzzles homework: a file grades in
seconds). Tokens, refusals, attempts and lateness by the server's clock (a clock file the test sets), kill -9 with
jobs queued and running, a burst served round-robin, and a real browser (headless Chromium) signing in."""

from __future__ import annotations

import csv
import datetime as dt
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from grader.config import ROOT  # noqa: E402
from grader.course.server import Queue  # noqa: E402

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


@pytest.fixture(scope="module")
def tokens(tmp_path_factory) -> tuple[Path, dict[str, str]]:
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


@pytest.fixture(scope="module")
def server(tmp_path_factory, tokens):
    served = Served(tmp_path_factory.mktemp("server"), tokens[0]).start()
    yield served
    served.stop()


def test_health_tokens_and_refusals(server, tokens):
    _, tok = tokens
    assert server.api("GET", "/api/health").status_code == 200
    assert server.api("GET", "/api/results").status_code == 401
    assert server.api("GET", "/api/results", "not-a-token-at-all-0000").status_code == 401
    assert server.api("GET", "/api/staff/queue", tok["ann"]).status_code == 403
    assert server.api("GET", "/api/staff/queue", tok["ta"]).status_code == 200
    # The server keeps hashes only: no token in its database or its files.
    for path in server.data.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert not any(t.encode() in data for t in tok.values()), path
    # Refusals, each with its reason and a non-zero exit from the client.
    bad = submit_cli(server, "wrong-token-0123456789", SOLUTION)
    assert bad.returncode == 2 and "no valid token" in bad.stderr
    unknown = submit_cli(server, tok["ann"], SOLUTION, task="puzzle99_nothing")
    assert unknown.returncode == 2 and "has no task 'puzzle99_nothing'" in unknown.stderr
    big = server.tmp / "big.py"
    big.write_text("#" * (1 << 20) + "\n")
    too_large = submit_cli(server, tok["ann"], big)
    assert too_large.returncode == 2 and "over the grader's limit" in too_large.stderr
    assert server.api("POST", f"/api/submit?task={TASK}&filename=x.txt", tok["ann"], content=b"x").status_code == 415


def test_submit_end_to_end_on_the_cpu_and_only_ones_own_results(server, tokens, tmp_path):
    _, tok = tokens
    out = tmp_path / "r.json"
    done = submit_cli(server, tok["ann"], SOLUTION, "--json", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "stored as submission" in done.stdout and "graded" in done.stdout
    assert "score: 1 / 1" in done.stdout, done.stdout
    import json

    result = json.loads(out.read_text())
    assert result["score"] == result["max_score"] == 1.0 and result["task"] == TASK
    # the skeleton: graded (exit 0), no points
    skel = submit_cli(server, tok["bob"], SKELETON)
    assert skel.returncode == 0 and "score: 0 / 1" in skel.stdout, skel.stdout + skel.stderr
    # a notebook: its task's code cells are graded, as `grade` grades them
    import nbformat

    notebook = tmp_path / "puzzles.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# my puzzles"),
                                                   nbformat.v4.new_code_cell(SOLUTION.read_text())]), notebook)
    nb = submit_cli(server, tok["cid"], notebook)
    assert nb.returncode == 0 and "score: 1 / 1" in nb.stdout, nb.stdout + nb.stderr
    # --no-wait: exit 0 once stored
    later = submit_cli(server, tok["bob"], variant(SOLUTION, 1, tmp_path), "--no-wait")
    assert later.returncode == 0 and "stored as submission" in later.stdout and "graded" not in later.stdout
    mine = server.api("GET", "/api/results", tok["ann"]).json()
    assert mine["student"] == "ann" and {s["task"] for s in mine["submissions"]} == {TASK}
    bobs = server.wait_graded(tok["bob"], 2)
    for s in bobs:  # ann cannot read bob's submissions: 404, as one that does not exist
        assert server.api("GET", f"/api/submissions/{s['id']}", tok["ann"]).status_code == 404
        assert server.api("GET", f"/api/submissions/{s['id']}", tok["bob"]).status_code == 200
    # the course's views from the same ledger
    book = server.api("GET", "/api/staff/gradebook.csv", tok["ta"])
    assert book.status_code == 200
    rows = {r["student"]: r for r in csv.DictReader(book.text.splitlines())}
    assert rows["ann"][TASK] == "1.0" and rows["bob"][TASK] == "1.0"  # best of bob's two
    assert (server.data / "results" / "ann" / "results.json").is_file()
    board = server.api("GET", "/api/leaderboard").json()
    assert board["entries"] == [] and "no leaderboard for puzzles" in board["why_empty"]


def test_attempts_and_lateness_by_the_servers_clock(tmp_path, tokens):
    import yaml

    cfg = yaml.safe_load((ROOT / "config.yaml").read_text())
    cfg["homeworks"]["puzzles"]["max_attempts"] = 2
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(cfg))
    _, tok = tokens
    served = Served(tmp_path, tokens[0], config=config).start()
    try:
        first = submit_cli(served, tok["ann"], SOLUTION, "--no-wait")
        second = submit_cli(served, tok["ann"], SKELETON, "--no-wait")
        assert first.returncode == second.returncode == 0
        assert "attempt 1 of 2" in first.stdout and "attempt 2 of 2" in second.stdout
        again = submit_cli(served, tok["ann"], SOLUTION, "--no-wait")  # the same file: no new attempt
        assert again.returncode == 0 and "no new attempt" in again.stdout, again.stdout
        third = submit_cli(served, tok["ann"], variant(SOLUTION, 3, tmp_path), "--no-wait")
        assert third.returncode == 2 and "limit of 2 graded attempts" in third.stderr and "2 used" in third.stderr
        # one day late by the server's clock: graded, 10% off (config.yaml's late policy)
        deadline = dt.datetime.fromisoformat(DEADLINE)
        served.set_clock((deadline + dt.timedelta(hours=5)).isoformat())
        late = submit_cli(served, tok["bob"], SOLUTION)
        assert late.returncode == 0 and "1 day(s) late" in late.stdout, late.stdout + late.stderr
        subs = served.wait_graded(tok["bob"], 1)
        assert subs[0]["score"] == pytest.approx(0.9) and subs[0]["late_days"] == 1
        assert dt.datetime.fromisoformat(subs[0]["submitted_at"]) == deadline + dt.timedelta(hours=5)
        # past max_days (5): refused, nothing stored
        served.set_clock((deadline + dt.timedelta(days=6)).isoformat())
        past = submit_cli(served, tok["cid"], SOLUTION)
        assert past.returncode == 2 and "past the late limit" in past.stderr
        assert served.api("GET", "/api/results", tok["cid"]).json()["submissions"] == []
        served.wait_graded(tok["ann"], 3)
    finally:
        served.stop()


def test_a_killed_server_grades_each_stored_submission_once(tmp_path, tokens):
    _, tok = tokens
    served = Served(tmp_path, tokens[0]).start("--paused")
    files = [variant(SOLUTION, i, tmp_path) for i in range(3)]
    try:
        for f in files:
            assert submit_cli(served, tok["ann"], f, "--no-wait").returncode == 0
        assert submit_cli(served, tok["bob"], SKELETON, "--no-wait").returncode == 0
        assert served.api("POST", "/api/staff/resume", tok["ta"]).status_code == 200
        end = time.monotonic() + 60
        while time.monotonic() < end:  # kill -9 while a job runs and others wait
            counts = served.api("GET", "/api/staff/queue", tok["ta"]).json()["counts"]
            if counts["running"]:
                break
            time.sleep(0.1)
        assert counts["running"] and counts["queued"], counts
        served.kill9()
        served.start()
        ann = served.wait_graded(tok["ann"], 3)
        bob = served.wait_graded(tok["bob"], 1)
    finally:
        served.stop()
    assert [s["state"] for s in ann + bob] == ["graded"] * 4
    assert [s["score"] for s in ann] == [1.0] * 3 and bob[0]["score"] == 0.0
    db = sqlite3.connect(served.data / "results" / "ledger.sqlite")
    rows = db.execute("SELECT student, sha256 FROM attempts").fetchall()
    assert len(rows) == len(set(rows)) == 4  # each stored submission recorded once


def test_a_burst_is_served_round_robin_by_student(tmp_path, tokens):
    _, tok = tokens
    served = Served(tmp_path, tokens[0], "--rate-per-minute", "6").start("--paused")
    try:
        ids = {}
        for i in range(6):
            r = served.api("POST", f"/api/submit?task={TASK}", tok["ann"],
                           content=variant(SOLUTION, i, tmp_path).read_bytes())
            assert r.status_code == 201, r.text
            ids.setdefault("ann", []).append(r.json()["id"])
        over = served.api("POST", f"/api/submit?task={TASK}", tok["ann"],
                          content=variant(SOLUTION, 9, tmp_path).read_bytes())
        assert over.status_code == 429 and "in a minute" in over.json()["detail"]
        for who in ("bob", "cid"):
            r = served.api("POST", f"/api/submit?task={TASK}", tok[who], content=SOLUTION.read_bytes())
            ids[who] = [r.json()["id"]]
        order = served.api("GET", "/api/staff/queue", tok["ta"]).json()["order"]
        assert order[:3] == [ids["ann"][0], ids["bob"][0], ids["cid"][0]], (order, ids)
        assert served.api("POST", "/api/staff/resume", tok["ta"]).status_code == 200
        served.wait_graded(tok["ann"], 6)
        served.wait_graded(tok["cid"], 1)
    finally:
        served.stop()
    db = sqlite3.connect(served.data / "server.sqlite")
    started = [r[0] for r in db.execute("SELECT student FROM submissions ORDER BY started_seq")]
    assert sorted(started[:3]) == ["ann", "bob", "cid"], started  # bob and cid not behind ann's five others


def test_the_queue_order_is_round_robin_and_survives_a_restart(tmp_path):
    q = Queue(tmp_path)
    when = dt.datetime(2026, 12, 1, tzinfo=dt.timezone.utc)
    a = [q.store("ann", TASK, "a.py", f"a{i}".encode(), when) for i in range(50)]
    b = q.store("bob", TASK, "b.py", b"b", when)
    c = q.store("cid", TASK, "c.py", b"c", when)
    assert q.order()[:4] == [a[0], b, c, a[1]]
    taken = q.take(2)
    assert [t["id"] for t in taken] == [a[0], b]
    # ann was served last: cid first, then ann
    assert q.order()[:2] == [c, a[1]]
    q2 = Queue(tmp_path)  # a new process after a crash: what was running is queued again
    assert {r["id"] for r in q2.requeue_running()} == {a[0], b}
    assert q2.counts()["queued"] == 52


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
NEED_BROWSER = os.environ.get("GRADER_TESTS_NEED_BROWSER") == "1"  # make test: never skip in silence


@pytest.mark.skipif(not NEED_BROWSER and not (CHROMIUM and CHROMEDRIVER),
                    reason="no chromium/chromedriver (make test installs them and runs this)")
def test_a_browser_signs_in_uploads_a_file_and_sees_its_verdict(server, tokens, tmp_path):
    selenium = pytest.importorskip("selenium") if not NEED_BROWSER else __import__("selenium")
    assert selenium and CHROMIUM and CHROMEDRIVER, "make test needs chromium and chromedriver (.ci/run installs them)"
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    _, tok = tokens
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}"):
        options.add_argument(flag)
    # A file name holding markup: shown as its characters, never as an element.
    hostile = tmp_path / 'x<img src=x onerror="document.title=1">.py'
    hostile.write_text(SOLUTION.read_text() + "\n# graded in the browser\n")
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        driver.get(server.url + "/")
        driver.find_element(By.ID, "token").send_keys(tok["ann"])
        driver.find_element(By.ID, "signin-button").click()
        WebDriverWait(driver, 30).until(lambda d: d.find_element(By.ID, "who").text == "ann")
        driver.find_element(By.ID, "file").send_keys(str(hostile))
        driver.find_element(By.ID, "submit-button").click()
        WebDriverWait(driver, 240).until(lambda d: "graded" in d.find_element(By.ID, "state").text
                                         or "failed" in d.find_element(By.ID, "state").text)
        state = driver.find_element(By.ID, "state").text
        report = driver.find_element(By.ID, "report").text
        assert "graded, score 1 / 1" in state, (state, report)
        assert "score: 1 / 1" in report
        cells = [td.text for td in driver.find_elements(By.CSS_SELECTOR, "#attempts td")]
        assert hostile.name in cells, cells
        assert driver.find_elements(By.CSS_SELECTOR, "#attempts img") == [] and driver.title != "1"
    finally:
        driver.quit()


def test_the_servers_report_tells_no_hidden_case():
    """The server grades hidden cases (it is the staff's grading); the report and result it gives the student are
    the student view: a hidden test by its neutral name, outcome and points only."""
    from grader.results import TaskResult, TestResult, report

    secret = "got 7 expected 9 at b1500_in7_out130_pc"
    r = TaskResult(task="t", student="ann", submission="t.py", score=1.0, max_score=2.0,
                   tests=[TestResult("public_case", "passed", 1.0, 1.0, ""),
                          TestResult("b1500_in7_out130_pc", "failed", 0.0, 1.0, secret, staff="Traceback",
                                     visibility="hidden", printed="x = 3")],
                   checks={}, environment={"smaller_on_cpu": {"b1500_in7_out130_pc": {"B": 300}}},
                   submission_sha256="0" * 64, graded_at="2026-12-01T00:00:00+00:00")
    text = report.summary(r.student_view())
    assert "b1500" not in text and secret not in text and "x = 3" not in text and "Traceback" not in text
    assert "hidden_1 [hidden]" in text and "score: 1 / 2" in text
    assert "b1500" not in str(r.student_view().student_json())
    assert "b1500" in report.summary(r)  # the staff's report names it: the view is what hides it
