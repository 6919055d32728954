"""The Ray backend on a local Ray instance (CPU): the same verdicts as local workers, judged by the driver."""


import pytest

from grader.config import load_config
from grader.pipeline.grading import Job, grade_jobs

ray = pytest.importorskip("ray", reason="the Ray backend needs ray (make test installs it)")


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def test_ray_gives_the_local_verdicts(local_ray, task10, tmp_path):
    task = task10.subset({"n1_fp32", "n1023_fp32"})
    cfg = load_config()
    files = [task.folder / "solution.py", task.folder / "wrong" / "no_tail_mask.py"]
    jobs = [Job(task, f, f.stem) for f in files]
    remote = grade_jobs(jobs, cfg, "cpu", workers=2, backend="ray")
    local = grade_jobs(jobs, cfg, "cpu", workers=2)
    for r, loc in zip(remote, local):
        assert [(t.name, t.outcome, t.message) for t in r.tests] == [(t.name, t.outcome, t.message) for t in loc.tests]
    assert remote[0].staff["backend"] == "ray" and local[0].staff["backend"] == "local"
    assert remote[0].score == remote[0].max_score
    assert "out-of-bounds write" in {t.name: t for t in remote[1].tests}["n1023_fp32"].message
