"""With grading.judges > 0, judging runs in a pool of judge processes: the verdicts must not change."""

import dataclasses

from grader.config import load_config
from grader.pipeline.grading import Job, grade_jobs


def test_judge_processes_give_the_same_verdicts(task10):
    task = task10.subset({"n1_fp32", "n1023_fp32"})
    files = [task.folder / "solution.py", task.folder / "wrong" / "no_tail_mask.py",
             task.folder / "wrong" / "truncate.py", task.folder / "wrong" / "forbidden_import.py"] * 2
    jobs = [Job(task, f, f"s{i}") for i, f in enumerate(files)]
    cfg = load_config()
    inline = grade_jobs(jobs[:4], cfg, "cpu", workers=2)
    pooled = grade_jobs(jobs, dataclasses.replace(cfg, judges=2), "cpu", workers=4)
    for a, b in zip(inline * 2, pooled):
        assert [(t.name, t.outcome, t.message) for t in a.tests] == [(t.name, t.outcome, t.message) for t in b.tests]
    assert [r.student for r in pooled] == [f"s{i}" for i in range(8)]
