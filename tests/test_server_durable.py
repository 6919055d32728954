"""The submission server's rules and durability, end to end on loopback: attempts and lateness by the server's clock
(a clock file the test sets), kill -9 with submissions queued and running, and a burst served round-robin."""

from __future__ import annotations

import datetime as dt
import sqlite3
import time

import pytest
from server_support import DEADLINE, SKELETON, SOLUTION, TASK, Served, submit_cli, variant  # noqa: E402

from grader.config import ROOT  # noqa: E402


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


