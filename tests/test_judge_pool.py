"""With grading.judges > 0, judging runs in a pool of judge processes: the verdicts must not change."""

import dataclasses

from grader.config import load_config
from grader.pipeline.grading import JOBS_PER_JUDGE, Job, grade_jobs, judges_for


def test_judge_processes_give_the_same_verdicts(task10):
    task = task10.subset({"n1_fp32", "n1023_fp32"})
    files = [task.folder / "solution.py", task.folder / "wrong" / "no_tail_mask.py",
             task.folder / "wrong" / "truncate.py", task.folder / "wrong" / "forbidden_import.py"] * 2
    jobs = [Job(task, f, f"s{i}") for i, f in enumerate(files)]
    cfg = load_config()
    assert judges_for(cfg, "cpu", 4, cores=64) == 0  # `auto`: four jobs on the CPU are judged here
    inline = grade_jobs(jobs[:4], cfg, "cpu", workers=2)
    pooled = grade_jobs(jobs, dataclasses.replace(cfg, judges=2), "cpu", workers=4)
    for a, b in zip(inline * 2, pooled):
        assert [(t.name, t.outcome, t.message) for t in a.tests] == [(t.name, t.outcome, t.message) for t in b.tests]
    assert [r.student for r in pooled] == [f"s{i}" for i in range(8)]


def test_judge_processes_are_started_for_jobs_enough_to_repay_their_start():
    """`judges: auto` starts one per two cores, at most one per JOBS_PER_JUDGE jobs (a process's start costs about
    2 s of a core, a job's judging 0.35 s on the CPU's sizes); a number in config.yaml is kept as it is."""
    auto = dataclasses.replace(load_config(), judges=-1)
    assert JOBS_PER_JUDGE == {"cpu": 8, "cuda": 2}
    assert judges_for(auto, "cpu", 1, cores=16) == 0  # one job: judged here, whatever the setting
    assert judges_for(dataclasses.replace(auto, judges=3), "cpu", 1, cores=16) == 0
    assert judges_for(auto, "cpu", 5, cores=2) == judges_for(auto, "cpu", 5, cores=16) == 0  # a student's files
    assert judges_for(auto, "cpu", 159, cores=2) == 1  # the selftest on CI's two cores
    assert judges_for(auto, "cpu", 40, cores=16) == 5
    assert judges_for(auto, "cuda", 5, cores=16) == 2
    assert judges_for(auto, "cuda", 40, cores=16) == 8  # a class on the 16-core box: one per two cores
    assert judges_for(dataclasses.replace(auto, judges=3), "cpu", 2, cores=2) == 3
    assert judges_for(dataclasses.replace(auto, judges=0), "cuda", 40, cores=16) == 0
