"""The submission server's latency, from a student's side: a real server (`python -m grader serve`) on loopback,
submissions through its API, each timed from the upload to its verdict.

    python scripts/bench_server.py --device cuda --homework hw4_int8 --task 12_matmul_int8_fused_dequant \
        --idle 20 --burst 100 --students 20

* idle: `--idle` submissions one after another on an idle server (each a new file: a comment line added), p50/p95;
* burst: `--burst` submissions from `--students` students at once (round-robin by student), p50/p95/max, and the
  time to the last verdict.

Prints one table; the server's own log is kept in the work folder (--keep)."""

from __future__ import annotations

import argparse
import os
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, max(0, round(q * (len(values) - 1))))]


def main() -> int:
    import httpx

    ap = argparse.ArgumentParser()
    ap.add_argument("--homework", default="hw4_int8")
    ap.add_argument("--task", default="10_quantize_global_int8")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--idle", type=int, default=20)
    ap.add_argument("--burst", type=int, default=100)
    ap.add_argument("--students", type=int, default=20)
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument("--poll", type=float, default=1.0,
                    help="seconds between a burst client's status requests (triton-grader submit's: 1 s; the idle "
                         "series polls at 0.1 s)")
    ap.add_argument("--keep", type=Path, default=None, help="the work folder (default: a temporary one)")
    args = ap.parse_args()

    work = args.keep or Path(tempfile.mkdtemp(prefix="bench-server-"))
    work.mkdir(parents=True, exist_ok=True)
    roster = work / "roster.csv"
    roster.write_text("student\n" + "".join(f"s{i:03d}\n" for i in range(max(args.students, 1))))
    tokens_csv = work / "tokens.csv"
    subprocess.run([sys.executable, "-m", "grader", "tokens", str(roster), "--out", str(tokens_csv), "--staff",
                    "bench"], cwd=ROOT, check=True, capture_output=True)
    import csv

    tokens = {r["student"]: r["token"] for r in csv.DictReader(tokens_csv.open())}
    source = (ROOT / "tasks" / args.task / "solution.py").read_text()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = open(work / "server.log", "ab")
    cmd = [sys.executable, "-m", "grader", "serve", "--homework", args.homework, "--tokens", str(tokens_csv),
           "--data", str(work / "data"), "--port", str(port), "--device", args.device,
           "--rate-per-minute", "0", "--workers", str(args.workers)]
    # The server's clock an hour before the homework's deadline (the demo course's deadlines are past, and a late
    # submission past the late limit is refused): what is timed is grading, not the late policy.
    from grader.config import load_config

    deadline = load_config().homeworks[args.homework].deadline
    env = dict(os.environ)
    if deadline is not None:
        clock = work / "clock.txt"
        clock.write_text((deadline - timedelta(hours=1)).isoformat())
        env["GRADER_CLOCK_FILE"] = str(clock)
    server = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env)
    counter = [0]
    lock = threading.Lock()
    run = secrets.token_hex(8)  # a file of an earlier run in a kept work folder would be a copy, judged at once

    def new_file() -> bytes:
        with lock:
            counter[0] += 1
            n = counter[0]
        return (source + f"\n# bench submission {run} {n}\n").encode()

    def one(student: str, poll: float = 0.1) -> float:
        """Seconds from the upload to the verdict."""
        headers = {"Authorization": f"Bearer {tokens[student]}"}
        start = time.perf_counter()
        r = httpx.post(f"{url}/api/submit", params={"task": args.task}, content=new_file(), headers=headers,
                       timeout=60)
        r.raise_for_status()
        sid = r.json()["id"]
        while True:
            s = httpx.get(f"{url}/api/submissions/{sid}", headers=headers, timeout=60).json()
            if s["state"] in ("graded", "failed"):
                return time.perf_counter() - start
            time.sleep(poll)

    try:
        end = time.monotonic() + 120
        while time.monotonic() < end:
            try:
                if httpx.get(f"{url}/api/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.3)
        print(f"warm-up: {one('s000'):.2f} s", flush=True)  # the fork server, the oracle's first answers
        idle = []
        for i in range(args.idle):  # each as it comes: a run cut short still shows what it measured
            idle.append(one(f"s{i % args.students:03d}"))
            print(f"idle {i + 1}: {idle[-1]:.2f} s", flush=True)
        burst: list[float] = []
        start = time.perf_counter()
        threads = [threading.Thread(target=lambda s=f"s{i % args.students:03d}": burst.append(one(s, args.poll)))
                   for i in range(args.burst)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.perf_counter() - start
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(60)
    print(f"| {args.device} {args.task} | n | p50 s | p95 s | max s | all done s |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    if idle:
        print(f"| idle, one at a time | {len(idle)} | {pct(idle, .5):.2f} | {pct(idle, .95):.2f} | {max(idle):.2f} "
              f"| {sum(idle):.1f} |")
    if burst:
        print(f"| burst, {args.students} students | {len(burst)} | {pct(burst, .5):.2f} | {pct(burst, .95):.2f} | "
              f"{max(burst):.2f} | {wall:.1f} |")
        print(f"mean {statistics.mean(burst):.2f} s; work folder {work}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
