"""`triton-grader submit --server URL --token TOKEN --task TASK FILE [--json OUT] [--no-wait]`: hand a file in to
the course's submission server (grader/server/service.py) and wait for its verdict.

Exit codes: 0 once graded (whatever the score), or with --no-wait once the server has stored the file; 2 when the
server refuses it (no or a wrong token, attempts used up, past the late limit, too large, unknown task), with the
server's reason; 1 when the server cannot be reached or the grading failed."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from grader.results import escape

REFUSED = 2
UNREACHABLE = 1


def _reason(response) -> str:
    try:
        detail = response.json().get("detail")
    except ValueError:
        detail = None
    return str(detail) if detail else f"HTTP {response.status_code}"


def _wait(client, sid: int, until, end: float, poll_s: float, out) -> dict | None:
    """Poll a submission until `until(state)`, printing each new state line (the place in the queue, the
    estimated wait); None when the server cannot answer or the time is up (said on stderr)."""
    last = ""
    while True:
        response = client.get(f"/api/submissions/{sid}")
        if response.status_code != 200:
            print(f"the server answered: {escape.terminal(_reason(response))}", file=sys.stderr)
            return None
        s = response.json()
        if until(s):
            return s
        line = s["state"]
        if s["state"] == "queued" and s.get("position") is not None:
            line += f" ({s['position']} ahead of you" + (f", a verdict in about {s['wait_s']:.0f} s)"
                                                         if s.get("wait_s") is not None else ")")
        if line != last and s["state"] not in ("graded", "failed"):
            print(line, file=out, flush=True)
            last = line
        if time.monotonic() > end:
            print("not graded in time: see it later with the page or /api/results", file=sys.stderr)
            return None
        time.sleep(poll_s)


def submit(server: str, token: str, task: str, file: Path, json_out: Path | None = None, wait: bool = True,
           poll_s: float = 1.0, timeout_s: float = 3600.0, out=None) -> int:
    import httpx

    out = out or sys.stdout
    try:
        data = file.read_bytes()
    except OSError as exc:
        print(f"{escape.terminal(str(file))}: cannot be read ({exc.strerror or exc})", file=sys.stderr)
        return REFUSED
    headers = {"Authorization": f"Bearer {token}"}
    base = server.rstrip("/")
    try:
        with httpx.Client(base_url=base, headers=headers, timeout=60.0) as client:
            response = client.post("/api/submit", params={"task": task, "filename": file.name}, content=data)
            if response.status_code != 201:
                print(f"refused: {escape.terminal(_reason(response))}", file=sys.stderr)
                return REFUSED
            stored = response.json()
            used = (f", attempt {stored['attempts_used']} of {stored['max_attempts']}"
                    if stored.get("max_attempts") else "")
            again = f" (the same file as submission {stored['same_as']}: no new attempt)" if stored.get("same_as") \
                else ""
            print(f"stored as submission {stored['id']} at {stored['submitted_at']}{used}{again}", file=out,
                  flush=True)
            if not wait:
                return 0
            end = time.monotonic() + timeout_s
            s = _wait(client, stored["id"], lambda s: s["state"] in ("graded", "failed"), end, poll_s, out)
            if s is None:
                return UNREACHABLE
            if s["state"] == "graded" and s.get("speed") == "pending":
                print("graded (the cases; speed: pending)", file=out)
                print(s.get("report", ""), file=out, flush=True)
                print("speed: pending: the speed tests are being timed; waiting for them (Ctrl-C leaves: the page "
                      "and /api/results show them)", file=out, flush=True)
                s = _wait(client, stored["id"], lambda s: s.get("speed") != "pending", end, poll_s, out)
                if s is None:
                    return UNREACHABLE
    except httpx.HTTPError as exc:
        print(f"the server at {escape.terminal(base)} cannot be reached: {type(exc).__name__}: "
              f"{escape.terminal(str(exc))}", file=sys.stderr)
        return UNREACHABLE
    if s["state"] == "failed":
        print(f"failed: {escape.terminal(s.get('error') or 'the grader failed')}", file=sys.stderr)
        return UNREACHABLE
    print("graded", file=out)
    print(s.get("report", ""), file=out, flush=True)  # the server's report: escaped when it was made
    if json_out is not None and s.get("result") is not None:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(json.dumps(s["result"], indent=2) + "\n")
    return 0
