"""The speed leaderboard: each ranked speed test's measurement (judge.Verdict.metric: the speedup over the
baseline, and over the reference's in the staff's run), per student, from the attempt the homework counts.

`batch` writes `leaderboard.csv`, `leaderboard.md` and, with matplotlib, `leaderboard.png` into the results folder,
and adds each student's own entries to their Gradescope `results.json` (its `leaderboard` field); `gradescope-run`
fills that field for the one submission it grades. Which tests rank is the homework's `leaderboard` (config.yaml;
default: every speed test). Students are named by a pseudonym unless the homework opts in to names
(`leaderboard_names: student`): an HMAC of the student's folder name under a secret kept in the results folder
(`leaderboard.secret`, staff only), so a pseudonym is stable across runs and cannot be recomputed from a class
list without it. Each student learns theirs in their `results.json` entry names; `leaderboard_names.csv` maps
them back for staff. Only a correct, timed result ranks: a speed test whose case failed, or that could not be
judged fairly (the baseline slowed down beside it), has no measurement.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import hmac
import io
import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from grader.config import Homework
from grader.results import escape

SECRET = "leaderboard.secret"
ADJECTIVES = ("amber", "brisk", "calm", "deft", "eager", "fleet", "gentle", "hardy", "ivory", "jolly", "keen",
              "lucid", "mellow", "nimble", "ochre", "plucky", "quiet", "rapid", "steady", "tidy", "umber", "vivid",
              "witty", "young", "zesty", "bold", "crisp", "dusky", "early", "frank", "grand", "hazel")
ANIMALS = ("otter", "heron", "lynx", "marten", "ibis", "bison", "gecko", "koala", "lemur", "newt", "oriole",
           "puffin", "quail", "raven", "stoat", "tapir", "urchin", "vole", "walrus", "yak", "zebu", "alpaca",
           "badger", "crane", "dingo", "egret", "ferret", "gannet", "hare", "impala", "jackal", "kestrel")


@dataclass(frozen=True)
class Entry:
    student: str
    task: str
    test: str
    speedup: float
    """The baseline's median time over the submission's (higher is faster)."""
    vs_reference: float
    """That speedup over the reference's in the staff's run."""
    ms: float


def secret_of(out: Path) -> bytes:
    """The results folder's pseudonym secret, made on first use (32 random bytes, readable by staff only)."""
    path = out / SECRET
    if not path.is_file():
        out.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):  # created 0600 from the start; a concurrent batch's stays
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as fh:
                fh.write(secrets.token_hex(32) + "\n")
    return bytes.fromhex(path.read_text().strip())


def pseudonym(secret: bytes, student: str) -> str:
    """A stable name like `brisk-otter-17` for `student` under `secret` (32 x 32 x 100 names: two students of a
    class of 200 share one with a chance of about 2%, so the rank list keys by student, not by this name)."""
    digest = hmac.new(secret, student.encode(), hashlib.sha256).digest()
    return f"{ADJECTIVES[digest[0] % len(ADJECTIVES)]}-{ANIMALS[digest[1] % len(ANIMALS)]}-{digest[2] % 100:02d}"


def entries_of(student: str, task_id: str, tests: list[dict], hw: Homework) -> list[Entry]:
    """The ranked measurements in one result's `tests` (student or staff JSON)."""
    out = []
    for t in tests:
        metric = t.get("metric") or {}
        if t.get("outcome") == "passed" and hw.ranks(task_id, t.get("name", "")) and "speedup" in metric:
            out.append(Entry(student, task_id, t["name"], float(metric["speedup"]),
                             float(metric.get("vs_reference", 0.0)), float(metric.get("ms", 0.0))))
    return out


def collect(out: Path, hw: Homework, students: list[str]) -> list[Entry]:
    """Every student's ranked measurements, from the counted attempt of each task (results/<student>/<task>.json,
    the grader's own file: the batch wrote it)."""
    found = []
    for student in students:
        for task_id in hw.tasks:
            path = out / student / f"{task_id}.json"
            if path.is_file():
                found += entries_of(student, task_id, json.loads(path.read_text()).get("tests", []), hw)
    return found


def why_empty(out: Path, hw: Homework, students: list[str], tasks: dict) -> str:
    """Why `collect` found nothing, in one sentence for the TA: no ranked speed test in the homework, no result yet,
    speed tests not run where the class was graded (the CPU interpreter), or no correct, fairly timed result."""
    ranked = [(t, p.id) for t in hw.tasks if t in tasks for p in tasks[t].perf if hw.ranks(t, p.id)]
    if not ranked:
        return (f"no leaderboard for {hw.id}: none of its tasks has a ranked speed test (task.yaml `perf`, "
                "config.yaml `leaderboard`)")
    outcomes, devices = [], set()
    for student in students:
        for task_id in hw.tasks:
            path = out / student / f"{task_id}.json"
            if not path.is_file():
                continue
            data = json.loads(path.read_text())
            devices.add(str((data.get("environment") or {}).get("device", "?")))
            outcomes += [t.get("outcome") for t in data.get("tests", [])
                         if (task_id, t.get("name")) in ranked]
    if not outcomes:
        return f"no leaderboard for {hw.id}: {out} holds no result of its tasks yet (run batch first)"
    if all(o == "not_run" for o in outcomes):
        runs_on = sorted({d for t, p in ranked for perf in tasks[t].perf if perf.id == p for d in perf.devices})
        return (f"no leaderboard for {hw.id}: its speed tests run on {', '.join(runs_on)} only, and this class was "
                f"graded on {', '.join(sorted(devices))} (the CPU interpreter's times mean nothing): grade it on a "
                "GPU machine for a leaderboard")
    return (f"no leaderboard for {hw.id}: no submission passed a ranked speed test (a correct result, timed "
            "fairly, ranks; the speed tests' messages say why each did not)")


def gradescope_entries(entries: list[Entry]) -> list[dict]:
    """Gradescope's results.json `leaderboard` items for one student's entries (higher ranks first)."""
    return [{"name": f"{e.task} {e.test} (speedup)", "value": round(e.speedup, 3), "order": "desc"}
            for e in entries]


def write(out: Path, hw: Homework, entries: list[Entry]) -> list[Path]:
    """leaderboard.csv, leaderboard.md, leaderboard_names.csv (staff) and leaderboard.png (with matplotlib) in
    `out`; returns the paths written. Ranks per speed test, fastest first."""
    secret = secret_of(out)
    shown = {e.student: e.student if hw.leaderboard_names == "student" else pseudonym(secret, e.student)
             for e in entries}
    by_test: dict[tuple[str, str], list[Entry]] = {}
    for e in entries:
        by_test.setdefault((e.task, e.test), []).append(e)
    rows, md = [], [f"# {hw.title}: speed leaderboard", "",
                    "Speedup over the task's baseline (`torch.compile` of its math), medians of interleaved runs; "
                    "only correct results rank. Names are "
                    + ("the students'." if hw.leaderboard_names == "student" else "pseudonyms (yours is in your "
                                                                                    "results.json).")]
    for (task_id, test), group in sorted(by_test.items()):
        group.sort(key=lambda e: (-e.speedup, e.student))
        md += ["", f"## {task_id} / {test}", "", "| rank | name | speedup | vs the reference | ms |",
               "| ---: | --- | ---: | ---: | ---: |"]
        for rank, e in enumerate(group, 1):
            rows.append([task_id, test, rank, shown[e.student], f"{e.speedup:.3f}", f"{e.vs_reference:.3f}",
                         f"{e.ms:.4f}"])
            # with leaderboard_names: student, a name is a folder's: a table cell of text, not Markdown
            md.append(f"| {rank} | {escape.md_inline(shown[e.student])} | {e.speedup:.2f}x | {e.vs_reference:.2f}x "
                      f"| {e.ms:.4f} |")
    text = io.StringIO(newline="")
    w = csv.writer(text, lineterminator="\n")
    w.writerow(["task", "test", "rank", "name", "speedup", "vs_reference", "ms"])
    w.writerows(escape.csv_row(r) for r in rows)  # a student's name is no formula (escape.csv_cell)
    names = io.StringIO(newline="")
    csv.writer(names, lineterminator="\n").writerows(
        [["name", "student"], *(escape.csv_row(r) for r in sorted((v, k) for k, v in shown.items()))])
    written = {out / "leaderboard.csv": text.getvalue(), out / "leaderboard.md": "\n".join(md) + "\n",
               out / "leaderboard_names.csv": names.getvalue()}
    for path, body in written.items():
        path.write_text(body)
    png = plot(by_test, shown, out / "leaderboard.png")
    return [*written, *([png] if png else [])]


def plot(by_test: dict[tuple[str, str], list[Entry]], shown: dict[str, str], path: Path) -> Path | None:
    """One panel per ranked test: each student's speedup, fastest first, and the 1x line; None without
    matplotlib or entries."""
    if not by_test:
        return None
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, axes = plt.subplots(len(by_test), 1, figsize=(8, 2.6 * len(by_test)), squeeze=False)
    for ax, ((task_id, test), group) in zip(axes[:, 0], sorted(by_test.items())):
        group = sorted(group, key=lambda e: -e.speedup)[:30]
        # matplotlib reads $...$ in a label as mathtext (a malformed one raises): a name is shown as written
        ax.barh([escape.terminal(shown[e.student]).replace("$", r"\$") for e in group][::-1],
                [e.speedup for e in group][::-1], color="#4c72b0")
        ax.axvline(1.0, color="black", linewidth=0.8)
        ax.set_title(f"{task_id} / {test}", fontsize=9)
        ax.set_xlabel("speedup over the baseline (x)", fontsize=8)
        ax.tick_params(labelsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
