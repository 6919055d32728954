"""Proves the answer key: every solution earns full marks, and so does every right/ file (another correct way of
writing the answer, which the grader must not penalize); every skeleton earns 0, and every wrong/ file fails
exactly the tests its task.yaml declares.

Device-aware: a test the task does not run on this device (a speed test on the CPU interpreter) must be reported
as not run, and is taken out of every expectation, so a wrong/ file that declares only speed failures is expected
to fail nothing there."""

from __future__ import annotations

import time

from grader.config import CourseConfig, TaskSpec
from grader.pipeline.grading import Job, TaskResult, grade_jobs
from grader.protocol import COUNTED_STAGES
from grader.results import report


def expectation(job_kind: str, task: TaskSpec, name: str, device: str) -> set[str]:
    if job_kind in ("solution", "right"):
        return set()
    if job_kind == "skeleton":
        want = set(task.test_names) - {"imports", "signatures"}
    else:
        want = task.wrong[name].expected_failures(task.test_names, device)
    return want - task.not_run_on(device)


def selftest(tasks: dict[str, TaskSpec], cfg: CourseConfig, device: str, only: list[str] | None = None,
             workers: int = 0, staff: bool = False) -> int:
    jobs, kinds = [], []
    for task in tasks.values():
        if only and task.id not in only:
            continue
        jobs.append(Job(task, task.folder / "solution.py", "solution"))
        kinds.append(("solution", task, "solution.py"))
        jobs.append(Job(task, task.folder / "skeleton.py", "skeleton"))
        kinds.append(("skeleton", task, "skeleton.py"))
        for name in task.right:
            jobs.append(Job(task, task.folder / "right" / name, f"right/{name}"))
            kinds.append(("right", task, name))
        for name in sorted(task.wrong):
            jobs.append(Job(task, task.folder / "wrong" / name, f"wrong/{name}"))
            kinds.append(("wrong", task, name))
    print(f"selftest: {len(jobs)} files on {device}", flush=True)
    by_path = {str(j.submission): k for j, k in zip(jobs, kinds)}
    bad = []
    stages: dict[str, float] = {}
    by_task: dict[str, list[float]] = {}  # task -> [files, workers' wall seconds, judge seconds]

    def check(result: TaskResult) -> None:
        if result.pending:
            return  # a first result (its speed tests not timed yet): the full one is checked
        kind, task, name = by_path[result.submission]
        for stage, seconds in ((result.staff or {}).get("stages") or {}).items():
            if isinstance(seconds, (int, float)) and not isinstance(seconds, bool):
                stages[stage] = stages.get(stage, 0.0) + seconds
        spent = by_task.setdefault(task.id, [0, 0.0, 0.0])
        mine = (result.staff or {}).get("stages") or {}
        spent[0] += 1
        spent[1] += sum(v for k, v in mine.items() if k.endswith("worker_wall") and isinstance(v, (int, float)))
        spent[2] += float(mine.get("judge") or 0.0)
        want = expectation(kind, task, name, device)
        got = set(result.failed)
        not_run = task.not_run_on(device)
        ok = got == want and set(result.not_run) == not_run
        if kind in ("solution", "right"):
            ok = ok and result.score == result.max_score
        if kind == "skeleton":
            ok = ok and result.score == 0
        declared = task.wrong[name].diagnosis if kind == "wrong" else ""
        ok = ok and declared in result.diagnosis and (kind == "wrong" or not result.diagnosis)
        label = f"{task.id}/{kind + '/' if kind in ('wrong', 'right') else ''}{name}"
        skipped = f", {len(result.not_run)} not run on {device}" if result.not_run else ""
        print(f"{'ok  ' if ok else 'FAIL'} {label}: {result.score:g}/{result.max_score:g}, "
              f"{len(got)} failing test(s){skipped}", flush=True)
        for t in result.tests:
            if t.name in {p.id for p in task.perf} and t.outcome != "not_run":
                print(f"     {t.name}: {t.outcome}: {t.message}", flush=True)
        if result.diagnosis or declared:
            print(f"     diagnosis: {result.diagnosis or '(none)'}" + (f" (declared: {declared!r})" if declared
                                                                         else ""), flush=True)
        if not ok:
            bad.append(label)
            if got - want:
                print(f"     failed but should pass: {sorted(got - want)}")
            if want - got:
                print(f"     passed but should fail: {sorted(want - got)}")
            if set(result.not_run) != not_run:
                print(f"     not run: {sorted(result.not_run)}, expected {sorted(not_run)}")
            print(report.summary(result, staff=staff))

    start = time.monotonic()
    grade_jobs(jobs, cfg, device, workers, on_result=check)
    print(f"selftest took {time.monotonic() - start:.1f} s on {device}")
    if stages:  # where the time went, summed over the files (staff JSON `stages`: core-seconds, and some walls)
        counts = {k: stages.pop(k) for k in COUNTED_STAGES if k in stages}
        print("selftest stages (s, all files): " + ", ".join(
            f"{name} {seconds:.0f}" for name, seconds in sorted(stages.items(), key=lambda kv: -kv[1]))
            + ("; counts: " + ", ".join(f"{name} {n:.0f}" for name, n in counts.items()) if counts else ""),
            flush=True)
    if by_task:  # which tasks' files the time went to (a task author's view of the answer key's cost)
        print("selftest by task (files, workers' wall s, judge s): " + "; ".join(
            f"{t} {n}, {w:.0f}, {j:.0f}" for t, (n, w, j) in sorted(by_task.items(), key=lambda kv: -kv[1][1])),
            flush=True)
    print(f"selftest: {len(jobs) - len(bad)} passed, {len(bad)} failed", flush=True)
    if not jobs:
        print("selftest: nothing was tested", flush=True)
        return 1
    return 1 if bad else 0
