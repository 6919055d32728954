"""Proves the answer key: every solution earns full marks, every skeleton 0, every wrong/ file fails exactly
the tests its task.yaml declares."""

from __future__ import annotations

import time

from grader import report
from grader.config import CourseConfig, TaskSpec
from grader.grading import Job, TaskResult, grade_jobs


def expectation(job_kind: str, task: TaskSpec, name: str) -> set[str]:
    if job_kind == "solution":
        return set()
    if job_kind == "skeleton":
        return set(task.test_names) - {"imports", "signatures"}
    return task.wrong[name].expected_failures(task.test_names)


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
        for name in sorted(task.wrong):
            jobs.append(Job(task, task.folder / "wrong" / name, f"wrong/{name}"))
            kinds.append(("wrong", task, name))
    print(f"selftest: {len(jobs)} files on {device}", flush=True)
    by_path = {str(j.submission): k for j, k in zip(jobs, kinds)}
    bad = []

    def check(result: TaskResult) -> None:
        kind, task, name = by_path[result.submission]
        want = expectation(kind, task, name)
        got = set(result.failed)
        ok = got == want
        if kind == "skeleton":
            ok = ok and result.score == 0
        label = f"{task.id}/{'wrong/' if kind == 'wrong' else ''}{name}"
        print(f"{'ok  ' if ok else 'FAIL'} {label}: {result.score:g}/{result.max_score:g}, "
              f"{len(got)} failing test(s)", flush=True)
        if not ok:
            bad.append(label)
            if got - want:
                print(f"     failed but should pass: {sorted(got - want)}")
            if want - got:
                print(f"     passed but should fail: {sorted(want - got)}")
            print(report.summary(result, staff=staff))

    start = time.monotonic()
    grade_jobs(jobs, cfg, device, workers, on_result=check)
    print(f"selftest took {time.monotonic() - start:.1f} s on {device}")
    print(f"selftest: {len(jobs) - len(bad)} passed, {len(bad)} failed", flush=True)
    return 1 if bad else 0
