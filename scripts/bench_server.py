"""The submission server's latency and memory, from a student's side, next to `grade` on the same kind of file.

    python scripts/bench_server.py --device cuda --homework hw4_int8 --task 12_matmul_int8_fused_dequant \\
        --idle 20 --burst 100 --students 20
    python scripts/bench_server.py --smoke      # CI on the CPU: puzzles, a few files, well under a minute of grading

One run measures, in this order, and prints each row as soon as it is measured (a line `row: ...`):

* `grade`, one file alone: `--grade-runs` runs of `python -m grader grade --task TASK --device D FILE` as a
  subprocess, each on a freshly tagged file (below), before any server starts; its wall clock (median: `grade`'s
  latency) and its core-seconds: the whole machine's busy core-seconds from /proc/stat during the run (the floor's
  figure; the children's user+sys from getrusage(RUSAGE_CHILDREN) is shown beside it);
* a real server (`python -m grader serve ... --rate-per-minute 0 --workers N`) on loopback, its clock an hour before
  the homework's deadline (GRADER_CLOCK_FILE), warmed up with one submission; then its memory: VmRSS summed over the
  server process and all its descendants (/proc), PSS beside it where /proc/<pid>/smaps_rollup is readable;
* idle: `--idle` files one at a time, each waited for to its verdict (and to its speed tier's end, below) before the
  next is sent; upload -> verdict p50/p95;
* burst: `--burst` files from `--students` students (file i from student i % S) sent at once from threads, each
  polling its submission every `--poll` s: upload -> verdict p50/p95, each student's first verdict (seconds from the
  burst's start; p50 and max), the last verdict and the last "complete" (below), all from the burst's start;
* the server's memory again, after the burst.

A verdict is the first answer of GET /api/submissions/{id} whose state is graded or failed. A server that records
the verdict at the first pass and times the speed tests later shows `"speed": "pending"` in that answer meanwhile;
a file is "complete" once `speed` is no longer "pending" (at its verdict where the key never shows).

Every file's kernels are distinct (scripts/bench_class.py tag_kernels: a comment line naming the run and the file
opens every @jit function's body), so Triton's cache shares no compilation between files, as in a real class.

Then one markdown table of these rows, and the ratios against their goals:

* idle p50 / `grade`'s latency (goal <= 1.1);
* the floor, B files x one lone file's core-seconds / os.cpu_count(), and the last verdict / the floor (<= 1.25);
* each student's first verdict within 90 s (yes/no);
* the server's memory after the warm-up and after the burst, in MiB.

A run cut short (Ctrl-C or SIGTERM, a server that does not start, an upload refused) still prints what it measured. The
server's log and the files graded are kept in the work folder (--keep; otherwise a temporary folder, named at the
end)."""

from __future__ import annotations

import argparse
import csv
import importlib.util
import os
import resource
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

VERDICT_STATES = ("graded", "failed")
IDLE_GOAL = 1.1  # idle p50 / grade's latency
FLOOR_GOAL = 1.25  # last verdict of the burst / the floor
FIRST_VERDICT_GOAL_S = 90.0  # each student's first verdict of the burst
SMOKE = {"homework": "puzzles", "task": "puzzle01_constant_add", "device": "cpu", "idle": 2, "burst": 4,
         "students": 2, "grade_runs": 1}
"""--smoke's settings (an option given on the command line as well wins)."""


def load_tag_kernels() -> Callable[[str, str], str]:
    """scripts/bench_class.py's tag_kernels (the script is no package: loaded from its file)."""
    spec = importlib.util.spec_from_file_location("bench_class", ROOT / "scripts" / "bench_class.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.tag_kernels


def machine_busy() -> float | None:
    """Busy core-seconds of the whole machine since boot, from /proc/stat (as scripts/bench_floor.py's cpu_times;
    None where there is no /proc/stat)."""
    try:
        fields = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    except (OSError, ValueError, IndexError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return (sum(fields) - idle) / os.sysconf("SC_CLK_TCK")


def children_cpu() -> float:
    """User + system seconds of this process's ended (and waited for) children and their own such children."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def process_tree(pid: int) -> list[int]:
    """`pid` and all its living descendants, by their parent ids in /proc/*/stat."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()  # after "pid (comm) ": state, ppid, ...
        if len(fields) > 1:
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    tree, todo = [], [pid]
    while todo:
        p = todo.pop()
        tree.append(p)
        todo.extend(children.get(p, []))
    return tree


def status_kib(path: Path, key: str) -> int | None:
    """The kB figure of `key:` in a /proc file such as status or smaps_rollup (None if unreadable or absent)."""
    try:
        for line in path.read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


@dataclass
class Memory:
    """The memory of a process tree: processes, VmRSS summed (MiB) and PSS summed (MiB, None if unreadable)."""

    processes: int
    rss_mib: float
    pss_mib: float | None


def tree_memory(pid: int) -> Memory:
    """Memory of the server process and all its descendants (shared pages count once per process in RSS: PSS shares
    them out)."""
    pids = process_tree(pid)
    rss = [status_kib(Path(f"/proc/{p}/status"), "VmRSS") for p in pids]
    pss = [status_kib(Path(f"/proc/{p}/smaps_rollup"), "Pss") for p in pids]
    unread = any(x is None for x, r in zip(pss, rss) if r is not None)  # a process's smaps_rollup not readable
    return Memory(sum(r is not None for r in rss), sum(r or 0 for r in rss) / 1024,
                  None if unread else sum(x or 0 for x in pss) / 1024)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pct(values: list[float], q: float) -> float:
    """The `q` quantile of `values`, nearest rank."""
    values = sorted(values)
    return values[min(len(values) - 1, max(0, round(q * (len(values) - 1))))]


@dataclass
class Sample:
    """One submission through the server; times are time.perf_counter() readings."""

    student: str
    state: str
    upload: float  # just before the upload
    verdict: float  # the first answer in VERDICT_STATES
    complete: float | None  # the first answer, at or after the verdict, whose `speed` is not "pending"
    pending_seen: bool  # whether any answer said "speed": "pending"


@dataclass
class Measured:
    """Everything the run measured so far (a run cut short prints what is here)."""

    grade_wall: list[float] = field(default_factory=list)
    grade_busy: list[float] = field(default_factory=list)  # the machine's, /proc/stat
    grade_children: list[float] = field(default_factory=list)  # the children's user+sys
    warmup: list[Sample] = field(default_factory=list)
    memory: dict[str, Memory] = field(default_factory=dict)  # "after warm-up", "after the burst"
    idle: list[Sample] = field(default_factory=list)
    idle_busy: list[float] = field(default_factory=list)  # the machine's busy core-s from upload to complete
    burst_start: float | None = None
    burst_busy: float | None = None  # the machine's busy core-s from the burst's start to its last answer
    burst_wall: float | None = None
    burst: list[Sample] = field(default_factory=list)
    burst_errors: list[str] = field(default_factory=list)


class Cancelled(Exception):
    """The run is being cut short."""


def fmt(value: float | None, digits: int = 2) -> str:
    return "" if value is None else f"{value:.{digits}f}"


def row(name: str, values: list[float], unit: str, digits: int = 2) -> str:
    """A table row: name, n, p50, p95, max, unit."""
    if not values:
        return f"| {name} | 0 | | | | {unit} |"
    return (f"| {name} | {len(values)} | {fmt(pct(values, .5), digits)} | {fmt(pct(values, .95), digits)} | "
            f"{fmt(max(values), digits)} | {unit} |")


class Bench:
    """One run: `grade` alone, then the server (warm-up, memory, idle, burst, memory)."""

    def __init__(self, args: argparse.Namespace, work: Path, tag_kernels: Callable[[str, str], str]) -> None:
        self.args = args
        self.work = work
        self.tag_kernels = tag_kernels
        self.source = (ROOT / "tasks" / args.task / "solution.py").read_text()
        self.run = secrets.token_hex(6)  # a file of an earlier run in a kept work folder would be a repeat
        self.counter = 0
        self.lock = threading.Lock()
        self.print_lock = threading.Lock()
        self.stop = threading.Event()
        self.m = Measured()
        self.url = ""
        self.tokens: dict[str, str] = {}
        self.server: subprocess.Popen | None = None

    # ------------------------------------------------------------------------------------------- files
    def new_file(self, kind: str) -> bytes:
        """The task's solution, every kernel tagged with this run and a new number: a file no other shares."""
        with self.lock:
            self.counter += 1
            n = self.counter
        return self.tag_kernels(self.source, f"bench {self.run} {kind} {n}").encode()

    def say(self, line: str) -> None:
        """Print a line whole (the burst's threads print too)."""
        with self.print_lock:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()

    def student(self, i: int) -> str:
        return f"s{i % max(self.args.students, 1):03d}"

    # ------------------------------------------------------------------------------------------- grade alone
    def grade_alone(self) -> None:
        """`--grade-runs` lone `grade` runs, each on a new file: wall, the machine's busy core-seconds, the
        children's user+sys."""
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
        for i in range(self.args.grade_runs):
            self.check_stop()
            folder = self.work / "grade" / f"{self.run}-{i}"
            folder.mkdir(parents=True)
            path = folder / f"{self.args.task}.py"
            path.write_bytes(self.new_file("grade"))
            cmd = [sys.executable, "-m", "grader", "grade", "--task", self.args.task, "--device", self.args.device,
                   str(path), "--json", str(folder / "result.json")]
            busy0, children0, start = machine_busy(), children_cpu(), time.perf_counter()
            done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
            wall = time.perf_counter() - start
            busy1, children1 = machine_busy(), children_cpu()
            (folder / "grade.log").write_text(done.stdout + done.stderr)
            if done.returncode not in (0, 1):  # 1: graded, not every point
                raise RuntimeError(f"grade exited {done.returncode}:\n{(done.stdout + done.stderr)[-3000:]}")
            self.m.grade_wall.append(wall)
            self.m.grade_children.append(children1 - children0)
            if busy0 is not None and busy1 is not None:
                self.m.grade_busy.append(busy1 - busy0)
            print(f"grade {i + 1}: {wall:.2f} s wall, "
                  f"{fmt(self.m.grade_busy[-1] if self.m.grade_busy else None, 1) or '?'} core-s busy (machine), "
                  f"{children1 - children0:.1f} core-s user+sys (children)"
                  f"{'' if done.returncode == 0 else ', not every point'}", flush=True)
        for r in self.grade_rows():
            print(f"row: {r}", flush=True)

    def grade_rows(self) -> list[str]:
        m = self.m
        if not m.grade_wall:
            return []
        children = f"; children's user+sys p50 {pct(m.grade_children, .5):.1f}" if m.grade_children else ""
        return [row("grade, one file alone, wall", m.grade_wall, "s, `python -m grader grade` as a subprocess"),
                row("grade, one file alone, core-seconds", m.grade_busy,
                    f"core-s busy, the whole machine (/proc/stat){children}", 1)]

    # ------------------------------------------------------------------------------------------- the server
    def start_server(self) -> None:
        """Tokens for the students and staff, then the server, its clock an hour before the homework's deadline;
        returns once /api/health answers."""
        args, work = self.args, self.work
        roster = work / "roster.csv"
        roster.write_text("student\n" + "".join(f"s{i:03d}\n" for i in range(max(args.students, 1))))
        tokens_csv = work / "tokens.csv"
        subprocess.run([sys.executable, "-m", "grader", "tokens", str(roster), "--out", str(tokens_csv), "--staff",
                        "bench"], cwd=ROOT, check=True, capture_output=True)
        with tokens_csv.open() as f:
            self.tokens = {r["student"]: r["token"] for r in csv.DictReader(f)}
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        cmd = [sys.executable, "-m", "grader", "serve", "--homework", args.homework, "--tokens", str(tokens_csv),
               "--data", str(work / "data"), "--port", str(port), "--device", args.device,
               "--rate-per-minute", "0", "--workers", str(args.workers)]
        # The server's clock an hour before the homework's deadline (the demo course's deadlines may be past, and a
        # late submission past the late limit is refused): what is timed is grading, not the late policy.
        from grader.config import load_config

        deadline = load_config().homeworks[args.homework].deadline
        env = dict(os.environ)
        if deadline is not None:
            clock = work / "clock.txt"
            clock.write_text((deadline - timedelta(hours=1)).isoformat())
            env["GRADER_CLOCK_FILE"] = str(clock)
        with open(work / "server.log", "ab") as log:
            self.server = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                           start_new_session=True, env=env)
        import httpx

        end = time.monotonic() + 120
        while True:
            self.check_stop()
            if self.server.poll() is not None:
                raise RuntimeError(f"the server exited {self.server.returncode}:\n{self.log_tail()}")
            try:
                if httpx.get(f"{self.url}/api/health", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if time.monotonic() > end:
                raise RuntimeError(f"the server did not answer /api/health in 120 s:\n{self.log_tail()}")
            time.sleep(0.3)

    def log_tail(self) -> str:
        try:
            return (self.work / "server.log").read_text(errors="replace")[-3000:]
        except OSError:
            return ""

    def stop_server(self) -> None:
        if self.server is None or self.server.poll() is not None:
            return
        try:
            os.killpg(self.server.pid, signal.SIGTERM)
            self.server.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(self.server.pid, signal.SIGKILL)
            self.server.wait(10)
        except ProcessLookupError:
            pass

    def check_stop(self) -> None:
        if self.stop.is_set():
            raise Cancelled

    def submit(self, client: Any, student: str, poll: float, on_verdict: Callable[[Sample], None] | None = None,
               ) -> Sample:
        """Upload a new file as `student` and poll its submission to the verdict, then on to the end of its speed
        tier (while `speed` is "pending")."""
        headers = {"Authorization": f"Bearer {self.tokens[student]}"}
        upload = time.perf_counter()
        r = client.post(f"{self.url}/api/submit", params={"task": self.args.task}, content=self.new_file("server"),
                        headers=headers, timeout=120)
        if r.status_code >= 400:
            raise RuntimeError(f"{student}: the upload was refused ({r.status_code}): {r.text[:300]}")
        sid = r.json()["id"]
        sample: Sample | None = None
        pending = False
        while True:
            s = client.get(f"{self.url}/api/submissions/{sid}", headers=headers, timeout=120).json()
            now = time.perf_counter()
            pending = pending or s.get("speed") == "pending"
            if sample is None and s.get("state") in VERDICT_STATES:
                sample = Sample(student, s["state"], upload, now, None, pending)
                if on_verdict is not None:
                    on_verdict(sample)
            if sample is not None and s.get("speed") != "pending":
                sample.complete, sample.pending_seen = now, pending
                return sample
            if now - upload > self.args.timeout:
                raise RuntimeError(f"{student}: submission {sid} still {s.get('state')!r} "
                                   f"(speed {s.get('speed')!r}) after {self.args.timeout:g} s")
            self.check_stop()
            time.sleep(poll)

    def warm_up(self) -> None:
        """One submission (the fork server, the oracle's first answers, the staff's baselines), then the memory."""
        import httpx

        with httpx.Client() as client:
            self.m.warmup.append(self.submit(client, self.student(0), 0.1))
        s = self.m.warmup[-1]
        print(f"warm-up: {s.verdict - s.upload:.2f} s to the verdict ({s.state}), "
              f"{(s.complete or s.verdict) - s.upload:.2f} s complete", flush=True)
        print(f"row: {self.warmup_rows()[0]}", flush=True)
        self.measure_memory("after warm-up")

    def warmup_rows(self) -> list[str]:
        return [row("warm-up, the server's first file", [s.verdict - s.upload for s in self.m.warmup],
                    "s upload -> verdict")]

    def measure_memory(self, when: str) -> None:
        if self.server is None or self.server.poll() is not None:
            return
        self.m.memory[when] = tree_memory(self.server.pid)
        print(f"row: {self.memory_row(when)}", flush=True)

    def memory_row(self, when: str) -> str:
        mem = self.m.memory[when]
        pss = f"; PSS {mem.pss_mib:.0f} MiB" if mem.pss_mib is not None else ""
        return (f"| server memory {when} | 1 | {mem.rss_mib:.0f} | | | MiB, VmRSS summed over the server and its "
                f"descendants ({mem.processes} processes){pss} |")

    def idle_series(self) -> None:
        """`--idle` files one after another, each to its verdict and the end of its speed tier."""
        import httpx

        with httpx.Client() as client:
            for i in range(self.args.idle):
                before = machine_busy()
                s = self.submit(client, self.student(i), 0.1)
                after = machine_busy()
                self.m.idle.append(s)
                if before is not None and after is not None:
                    self.m.idle_busy.append(after - before)
                print(f"idle {i + 1}: {s.verdict - s.upload:.2f} s ({s.state})"
                      + (f", complete {s.complete - s.upload:.2f} s" if s.pending_seen and s.complete else ""),
                      flush=True)
        print(f"row: {self.idle_rows()[0]}", flush=True)

    def idle_rows(self) -> list[str]:
        idle = self.m.idle
        complete = [s.complete - s.upload for s in idle if s.complete is not None]
        extra = f"; complete p50 {pct(complete, .5):.2f} s" if complete and any(s.pending_seen for s in idle) \
            else ""
        rows = [row("idle, one at a time", [s.verdict - s.upload for s in idle], f"s upload -> verdict{extra}")]
        if self.m.idle_busy:
            rows.append(row("idle, core-seconds a file", self.m.idle_busy, "core-s busy, the whole machine "
                            "(/proc/stat), upload to complete: the server's own cost of one file", 1))
        return rows

    def burst_series(self) -> None:
        """`--burst` files at once from `--students` students, each thread polling its own submission."""
        import httpx

        args, m = self.args, self.m

        def on_verdict(s: Sample) -> None:
            with self.lock:
                m.burst.append(s)  # at its verdict: a run cut short keeps it; `complete` is set when it comes
                k = len(m.burst)
            self.say(f"burst verdict {k}/{args.burst}: {s.student} {s.verdict - s.upload:.2f} s ({s.state}), "
                     f"{s.verdict - start:.2f} s from the burst's start")

        def one(i: int) -> None:
            try:
                with httpx.Client() as client:
                    self.submit(client, self.student(i), args.poll, on_verdict)
            except Cancelled:
                pass
            except Exception as exc:  # one file's failure is reported; the others go on
                if self.stop.is_set():  # the run is cut short: the server is going away
                    return
                with self.lock:
                    m.burst_errors.append(f"file {i}: {exc!r}"[:500])
                self.say(f"burst file {i}: {exc!r}"[:500])

        threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(args.burst)]
        before = machine_busy()
        start = m.burst_start = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        after = machine_busy()
        if before is not None and after is not None:
            m.burst_busy, m.burst_wall = after - before, time.perf_counter() - start
        for r in self.burst_rows():
            print(f"row: {r}", flush=True)

    def burst_rows(self) -> list[str]:
        m, args = self.m, self.args
        if m.burst_start is None:
            return []
        start = m.burst_start
        firsts = self.student_firsts()
        pending = any(s.pending_seen for s in m.burst)
        return [
            row(f"burst, {args.students} students", [s.verdict - s.upload for s in m.burst], "s upload -> verdict"),
            row("last verdict of the burst", [max(s.verdict for s in m.burst) - start] if m.burst else [],
                "s from the burst's start"),
            row("each student's first verdict (burst)", firsts, "s from the burst's start"),
            row("complete, speed tier timed (burst)", [s.complete - start for s in m.burst if s.complete is not None],
                "s from the burst's start" + ("" if pending else "; no \"speed\": \"pending\" seen: at the verdict")),
        ] + ([row("burst, busy core-seconds", [m.burst_busy], f"core-s busy, the whole machine (/proc/stat): "
                  f"{100 * m.burst_busy / (m.burst_wall * (os.cpu_count() or 1)):.0f}% of its cores over "
                  f"{m.burst_wall:.0f} s; {m.burst_busy / max(1, len(m.burst)):.1f} core-s a file", 0)]
             if m.burst_busy is not None and m.burst_wall else [])

    def student_firsts(self) -> list[float]:
        """Each student's first verdict in the burst, seconds from its start."""
        if self.m.burst_start is None:
            return []
        first: dict[str, float] = {}
        for s in self.m.burst:
            first[s.student] = min(first.get(s.student, float("inf")), s.verdict - self.m.burst_start)
        return sorted(first.values())

    # ------------------------------------------------------------------------------------------- the report
    def report(self) -> None:
        """The table of every row measured, then the ratios against their goals."""
        m, args = self.m, self.args
        rows = self.grade_rows()
        if m.warmup:
            rows += self.warmup_rows()
        if "after warm-up" in m.memory:
            rows.append(self.memory_row("after warm-up"))
        if m.idle:
            rows += self.idle_rows()
        rows += self.burst_rows()
        if "after the burst" in m.memory:
            rows.append(self.memory_row("after the burst"))
        print()
        print(f"| {args.device} {args.homework} {args.task} | n | p50 | p95 | max | unit |")
        print("| --- | ---: | ---: | ---: | ---: | --- |")
        for r in rows:
            print(r)
        print()
        latency = statistics.median(m.grade_wall) if m.grade_wall else None
        if latency and m.idle:
            idle = pct([s.verdict - s.upload for s in m.idle], .5)
            print(f"idle p50 / grade's latency: {idle:.2f} / {latency:.2f} s = {idle / latency:.2f} "
                  f"(goal <= {IDLE_GOAL}: {'met' if idle / latency <= IDLE_GOAL else 'MISSED'})")
        cores = os.cpu_count() or 1
        core_s = statistics.median(m.grade_busy) if m.grade_busy else None
        if core_s is not None:
            floor = args.burst * core_s / cores
            print(f"floor: {args.burst} files x {core_s:.1f} core-s (one lone file: the machine's busy core-seconds "
                  f"during `grade`, /proc/stat, median of {len(m.grade_busy)}) / {cores} cores = {floor:.1f} s")
            if m.burst and len(m.burst) == args.burst and floor > 0:
                last = max(s.verdict for s in m.burst) - (m.burst_start or 0.0)
                print(f"last verdict / floor: {last:.1f} / {floor:.1f} s = {last / floor:.2f} "
                      f"(goal <= {FLOOR_GOAL}: {'met' if last / floor <= FLOOR_GOAL else 'MISSED'})")
            elif m.burst_start is not None:
                print(f"last verdict / floor: not measured ({len(m.burst)} of {args.burst} files had a verdict)")
        if m.idle_busy and m.burst and len(m.burst) == args.burst:
            own = statistics.median(m.idle_busy)
            floor = args.burst * own / cores
            last = max(s.verdict for s in m.burst) - (m.burst_start or 0.0)
            print(f"floor by the server's own cost: {args.burst} files x {own:.1f} core-s (an idle file, upload to "
                  f"complete, median of {len(m.idle_busy)}) / {cores} cores = {floor:.1f} s; last verdict / floor: "
                  f"{last / floor:.2f}")
        firsts = self.student_firsts()
        if firsts:
            every = len(firsts) == min(args.students, args.burst) and max(firsts) <= FIRST_VERDICT_GOAL_S
            print(f"each student's first verdict within {FIRST_VERDICT_GOAL_S:g} s: {'yes' if every else 'no'} "
                  f"(max {max(firsts):.1f} s, p50 {pct(firsts, .5):.1f} s, {len(firsts)} of "
                  f"{min(args.students, args.burst)} students had one)")
        complete = [s.complete for s in m.burst if s.complete is not None]
        if complete:
            pending = sum(s.pending_seen for s in m.burst)
            print(f"last complete: {max(complete) - (m.burst_start or 0.0):.1f} s from the burst's start "
                  f"({len(complete)} of {args.burst} files complete; {pending} showed \"speed\": \"pending\")")
        if m.memory:
            print("server memory: " + ", ".join(f"{mem.rss_mib:.0f} MiB RSS {when} ({mem.processes} processes"
                                                 + (f", PSS {mem.pss_mib:.0f} MiB)" if mem.pss_mib is not None
                                                    else ")")
                                                 for when, mem in m.memory.items()))
        if m.burst_errors:
            print(f"burst: {len(m.burst_errors)} file(s) failed: " + "; ".join(m.burst_errors[:5]))
        print(f"work folder {self.work} (the server's log: server.log)", flush=True)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--homework", default="hw4_int8", help="homework id from config.yaml (default: hw4_int8)")
    ap.add_argument("--task", default="10_quantize_global_int8",
                    help="the task whose solution.py, tagged anew, is every file sent")
    ap.add_argument("--device", default="auto", choices=["auto", "cuda", "cpu"], help="grade's and the server's")
    ap.add_argument("--idle", type=int, default=20, help="files sent one at a time to the warmed-up server (20)")
    ap.add_argument("--burst", type=int, default=100, help="files sent at once (100)")
    ap.add_argument("--students", type=int, default=20, help="the burst's students, file i from student i %% S (20)")
    ap.add_argument("--workers", type=int, default=0, help="the server's --workers (0: config.yaml / per core)")
    ap.add_argument("--grade-runs", type=int, default=3,
                    help="lone `grade` runs before the server starts; their median is grade's latency (3)")
    ap.add_argument("--poll", type=float, default=1.0,
                    help="seconds between a burst client's status requests (triton-grader submit's: 1 s; the warm-up "
                         "and the idle series poll at 0.1 s)")
    ap.add_argument("--timeout", type=float, default=3600.0,
                    help="seconds a file may take to its verdict and speed tier before it counts as failed (3600)")
    ap.add_argument("--keep", type=Path, default=None, help="the work folder (default: a temporary one)")
    ap.add_argument("--smoke", action="store_true",
                    help="a tiny run for CI on the CPU: " + " ".join(f"--{k.replace('_', '-')} {v}"
                                                                      for k, v in SMOKE.items()))
    args = ap.parse_args(argv)
    if args.smoke:
        for key, value in SMOKE.items():
            if getattr(args, key) == ap.get_default(key):
                setattr(args, key, value)
    return args


def interrupted(signum: int, _frame: object) -> None:
    """SIGTERM as Ctrl-C: the server is stopped and what was measured is printed."""
    raise KeyboardInterrupt(signal.Signals(signum).name)


def main() -> int:
    args = parse_args()
    signal.signal(signal.SIGTERM, interrupted)
    work = args.keep or Path(tempfile.mkdtemp(prefix="bench-server-"))
    work.mkdir(parents=True, exist_ok=True)
    bench = Bench(args, work, load_tag_kernels())
    code = 0
    try:
        bench.grade_alone()
        bench.start_server()
        bench.warm_up()
        bench.idle_series()
        bench.burst_series()
        bench.measure_memory("after the burst")
    except KeyboardInterrupt:
        bench.stop.set()
        print("cut short: what was measured follows", flush=True)
        code = 130
    except Exception as exc:  # the rows measured so far are printed all the same
        bench.stop.set()
        print(f"stopped: {exc}", flush=True)
        code = 1
    finally:
        bench.stop.set()
        bench.stop_server()
        bench.report()
    return code


if __name__ == "__main__":
    sys.exit(main())
