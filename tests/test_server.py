"""The submission server, end to end on loopback (tests/server_support.py starts a real one): tokens, refusals, the
real client grading on the CPU, a notebook, one's own results only, the course's views, the queue's order, and a
real browser (headless Chromium) signing in and uploading."""

from __future__ import annotations

import csv
import datetime as dt
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from server_support import SKELETON, SOLUTION, TASK, Served, submit_cli, variant  # noqa: E402

from grader.config import ROOT  # noqa: E402
from grader.server.service import Queue  # noqa: E402


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
    # A file name is a display string: a path in it reaches no folder (the upload is kept under its sha256).
    r = server.api("POST", f"/api/submit?task={TASK}&filename=../../../escaped.py", tok["cid"],
                   content=SKELETON.read_bytes())
    assert r.status_code == 201, r.text
    row = server.api("GET", f"/api/submissions/{r.json()['id']}", tok["cid"]).json()
    assert row["filename"] == "escaped.py"
    assert not list(server.tmp.rglob("escaped.py")) and not (server.data.parent.parent / "escaped.py").exists()


def test_submit_end_to_end_on_the_cpu_and_only_ones_own_results(server, tokens, tmp_path):
    _, tok = tokens
    import json

    out = tmp_path / "r.json"
    done = submit_cli(server, tok["ann"], SOLUTION, "--json", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "stored as submission" in done.stdout and "graded" in done.stdout
    assert "score: 1 / 1" in done.stdout, done.stdout
    result = json.loads(out.read_text())
    assert result["score"] == result["max_score"] == 1.0 and result["task"] == TASK
    # the skeleton: graded (exit 0), no points
    skel = submit_cli(server, tok["bob"], SKELETON)
    assert skel.returncode == 0 and "score: 0 / 1" in skel.stdout, skel.stdout + skel.stderr
    # nothing a student sees names a path of the server's disk: the file by the name it was handed in under,
    # each picture by its case (and served by URL)
    assert str(server.data) not in skel.stdout and "uploads" not in skel.stdout, skel.stdout
    assert f"{TASK}  {SKELETON.name}" in skel.stdout, skel.stdout
    (seen,) = server.api("GET", "/api/results", tok["bob"]).json()["submissions"]
    assert str(server.data) not in json.dumps(seen)
    drawn = [t for t in seen["result"]["tests"] if t.get("picture")]
    assert drawn and drawn[0]["picture"] == f"{TASK}.{drawn[0]['name']}.png"
    png = server.api("GET", f"/api/pictures/{seen['id']}/{drawn[0]['name']}", tok["bob"])
    assert png.status_code == 200 and png.content.startswith(b"\x89PNG")
    assert server.api("GET", f"/api/pictures/{seen['id']}/{drawn[0]['name']}", tok["ann"]).status_code == 404
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
    # a TA's test upload: graded and shown to the TA, and in no view of the class
    ta = submit_cli(server, tok["ta"], SOLUTION)
    assert ta.returncode == 0 and "score: 1 / 1" in ta.stdout, ta.stdout + ta.stderr
    assert server.api("GET", "/api/results", tok["ta"]).json()["submissions"][0]["state"] == "graded"
    # the course's views from the same ledger
    book = server.api("GET", "/api/staff/gradebook.csv", tok["ta"])
    assert book.status_code == 200
    rows = {r["student"]: r for r in csv.DictReader(book.text.splitlines())}
    assert "ta" not in rows and "\nta," not in server.api("GET", "/api/staff/canvas.csv", tok["ta"]).text
    assert "ta" not in {line.split(":")[0].lstrip("- ") for line in
                        (server.data / "results" / "summary.md").read_text().splitlines()}
    assert not (server.data / "results" / "ta" / "results.json").exists()
    assert rows["ann"][TASK] == "1.0" and rows["bob"][TASK] == "1.0"  # best of bob's two
    assert server.api("GET", "/api/staff/canvas.csv", tok["ann"]).status_code == 403
    book = server.api("GET", "/api/staff/canvas.csv", tok["ta"])  # the same totals, as Canvas's import reads them
    assert book.status_code == 200 and book.headers["content-type"].startswith("text/csv")
    lines = list(csv.reader(book.text.splitlines()))
    assert lines[0][:5] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
    assert lines[1] == ["Points Possible", "", "", "", "", "12"]  # the puzzles: 12 x 1 point
    assert rows["ann"]["total"] == "1.0" and {r[3]: r for r in lines[2:]}["ann"] == ["ann", "", "", "ann", "", "1"]
    assert (server.data / "results" / "ann" / "results.json").is_file()
    board = server.api("GET", "/api/leaderboard").json()
    assert board["entries"] == [] and "no leaderboard for puzzles" in board["why_empty"]


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
SCREENSHOTS = Path(os.environ.get("GRADER_SCREENSHOTS") or ROOT / "build" / "screenshots")
"""Where the browser test keeps a screenshot of each page (git-ignored; the note of a change shows them)."""
SCREENSHOTS.mkdir(parents=True, exist_ok=True)


@pytest.mark.skipif(not NEED_BROWSER and not (CHROMIUM and CHROMEDRIVER),
                    reason="no chromium/chromedriver (make test installs them and runs this)")
def test_a_browser_signs_in_uploads_a_file_and_sees_its_verdict(server, tokens, tmp_path):
    selenium = pytest.importorskip("selenium") if not NEED_BROWSER else __import__("selenium")
    assert selenium and CHROMIUM and CHROMEDRIVER, "make test needs chromium and chromedriver (.ci/run installs them)"
    from selenium import webdriver
    from selenium.common.exceptions import TimeoutException
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
    options.add_argument("--window-size=1280,1000")
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
        # The page fills the attempts table after the verdict (its refresh() runs after the pictures load): the
        # table is read once it has the new attempt, not at the verdict (a race that failed one fresh clone).
        def cells(d) -> list[str]:
            return [td.text for td in d.find_elements(By.CSS_SELECTOR, "#attempts td")]
        try:
            WebDriverWait(driver, 30).until(lambda d: hostile.name in cells(d))
        except TimeoutException:
            pytest.fail(f"the attempts table never showed the upload: {cells(driver)}")
        assert driver.find_elements(By.CSS_SELECTOR, "#attempts img") == [] and driver.title != "1"

        # The page as a product: per task the best score, the attempts used of the maximum, the last verdict; the
        # deadline in the reader's own time with a countdown; times without microseconds.
        summary = [td.text for td in driver.find_elements(By.CSS_SELECTOR, "#tasks tr:first-child td")]
        used = server.api("GET", "/api/results", tok["ann"]).json()["tasks"][TASK]["used"]  # (earlier tests' too)
        assert summary[:3] == [TASK, "1 / 1", f"{used} of 100 used"] and summary[3].startswith("graded"), summary
        deadline = driver.find_element(By.ID, "deadline").text
        assert "(your time)" in deadline and "left" in deadline, deadline
        assert not any("." in c for c in cells(driver) if ":" in c and "20" in c)  # no 12:00:00.123456
        # The same file again: said to be a repeat that used no attempt.
        driver.find_element(By.ID, "file").send_keys(str(hostile))
        driver.find_element(By.ID, "submit-button").click()
        WebDriverWait(driver, 60).until(lambda d: "no attempt was used" in d.find_element(By.ID, "state").text)
        # A failing file: its report wraps to the window (no sideways scrolling at 1280 pixels), pictures shown.
        driver.find_element(By.ID, "file").send_keys(str(SKELETON))
        driver.find_element(By.ID, "submit-button").click()
        WebDriverWait(driver, 240).until(lambda d: "score 0 / 1" in d.find_element(By.ID, "state").text)
        WebDriverWait(driver, 30).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#pictures img"))
        fits = driver.execute_script(
            "const r = document.getElementById('report');"
            "return [document.documentElement.scrollWidth, window.innerWidth, r.scrollWidth, r.clientWidth,"
            " r.textContent.length];")
        assert fits[0] <= fits[1] and fits[2] <= fits[3] and fits[4] > 200, fits
        assert str(server.data) not in driver.find_element(By.ID, "report").text
        driver.save_screenshot(str(SCREENSHOTS / "student.png"))
        # Sign-out: the token is forgotten, the sign-in shows again.
        driver.find_element(By.ID, "signout").click()
        WebDriverWait(driver, 10).until(lambda d: d.find_element(By.ID, "signin").is_displayed())
        assert driver.execute_script("return sessionStorage.getItem('grader-token')") is None

        # The staff page: the queue with pause and resume, a student's history, the CSV downloads.
        driver.get(server.url + "/staff")
        driver.find_element(By.ID, "token").send_keys(tok["ta"])
        driver.find_element(By.ID, "signin-button").click()
        WebDriverWait(driver, 30).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#recent tr"))
        driver.find_element(By.ID, "pause").click()
        WebDriverWait(driver, 10).until(lambda d: d.find_element(By.ID, "pause").text == "Resume grading")
        assert server.api("GET", "/api/staff/queue", tok["ta"]).json()["paused"] is True
        driver.find_element(By.ID, "pause").click()
        WebDriverWait(driver, 10).until(lambda d: d.find_element(By.ID, "pause").text == "Pause grading")
        driver.find_element(By.CSS_SELECTOR, "#recent button.link").click()
        WebDriverWait(driver, 10).until(lambda d: d.find_element(By.ID, "history-box").is_displayed())
        assert driver.find_elements(By.CSS_SELECTOR, "#history tr")
        assert driver.find_element(By.ID, "gradebook").is_displayed() and driver.find_element(By.ID, "canvas")
        width = driver.execute_script("return [document.documentElement.scrollWidth, window.innerWidth]")
        assert width[0] <= width[1], width
        driver.save_screenshot(str(SCREENSHOTS / "staff.png"))
    finally:
        driver.quit()


def test_the_pages_are_templates_with_their_own_scripts_only(server):
    page = server.api("GET", "/")
    assert page.status_code == 200 and "script-src 'self'" in page.headers["content-security-policy"]
    assert "<script>" not in page.text and 'src="/static/student.js"' in page.text
    assert server.api("GET", "/static/student.js").headers["content-type"].startswith("text/javascript")
    for name in ("../pages.py", "..%2Fpages.py", "nothing.js"):
        assert server.api("GET", f"/static/{name}").status_code == 404


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


def test_a_token_never_reads_as_an_option(tmp_path):
    """A token that starts with "-" made `submit --token TOKEN` fail with "expected one argument" (one in 64 of
    `secrets.token_urlsafe`'s; seen in a fresh clone's test run): `grader tokens` makes none, and `submit` still
    reads one that a TOKENS.csv from before holds."""
    from grader.cli import _joined_token, build_parser
    from grader.server.tokens import make_tokens, new_token, read_tokens

    assert not any(new_token().startswith("-") for _ in range(3000))  # 3000 unfiltered: P(none) = 3e-21
    roster = tmp_path / "roster.csv"
    roster.write_text("student\n" + "".join(f"s{i}\n" for i in range(300)))
    make_tokens(roster, tmp_path / "tokens.csv")
    assert not any(h.token.startswith("-") for h in read_tokens(tmp_path / "tokens.csv"))
    argv = ["submit", "--server", "http://x", "--token", "-Tr_PTQmghi-d4Qus", "--task", "t", "f.py"]
    args = build_parser().parse_args(_joined_token(argv))
    assert args.token == "-Tr_PTQmghi-d4Qus" and args.task == "t"
    with pytest.raises(SystemExit):
        build_parser().parse_args(argv)  # what argparse alone does with it


def test_serve_warns_at_start_of_what_refuses_every_upload_and_says_serving_only_once_listening(tmp_path, tokens):
    """README's own example served a homework closed by date and said nothing; "serving ..." was printed before a
    busy port's bind error."""
    (tmp_path / "late").mkdir()
    late = Served(tmp_path / "late", tokens[0])
    late.set_clock("2027-03-01T12:00:00+00:00")  # far past the puzzles' deadline and late limit
    roster = tmp_path / "roster.csv"
    roster.write_text("student\nann\nbob\ndan\n")  # dan was added after the tokens were made
    late.start("--roster", str(roster))
    try:
        log = late.log.read_text()
        assert "serve: warning: 1 student(s) of the roster have no token, and cannot sign in: dan" in log
        assert "serve: warning: puzzles closed: its deadline was" in log and "every upload will be refused" in log
        assert "serve: warning: grading on the CPU" in log
        assert log.index("serve: warning") < log.index("serving puzzles on http://127.0.0.1:")
        # a second server on the busy port: uvicorn's error, and no "serving" line
        busy = tmp_path / "busy.log"
        cmd = [sys.executable, "-m", "grader", "serve", "--homework", "puzzles", "--tokens", str(tokens[0]),
               "--data", str(tmp_path / "other"), "--port", str(late.port), "--device", "cpu"]
        with open(busy, "wb") as out:
            done = subprocess.run(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, timeout=120)
        said = busy.read_text()
        assert done.returncode != 0 and "address already in use" in said.lower(), said
        assert "serving puzzles" not in said, said
    finally:
        late.stop()
