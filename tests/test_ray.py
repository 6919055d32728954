"""The Ray backend on a local Ray instance (CPU): the same verdicts as local workers, judged by the driver, and a
GPU and its gate for each task on a node of two (logical) GPUs."""

import os
import time
from collections import Counter

import pytest

from grader.config import load_config
from grader.pipeline.grading import Job, grade_jobs

if os.environ.get("GRADER_TESTS_NEED_RAY") == "1":  # make test: the Ray tests run, never skip in silence
    import ray
else:
    ray = pytest.importorskip("ray", reason="the Ray backend needs ray (make test installs it)")


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=4, num_gpus=2, include_dashboard=False, log_to_driver=False)  # Ray's logical CPUs and GPUs
    yield
    ray.shutdown()


def _verdicts(result) -> list[tuple]:
    return [(t.name, t.outcome, t.message) for t in result.tests]


def test_ray_gives_the_local_verdicts(local_ray, task10, tmp_path):
    task = task10.subset({"n1_fp32", "n1023_fp32"})
    cfg = load_config()
    files = [task.folder / "solution.py", task.folder / "wrong" / "no_tail_mask.py"]
    jobs = [Job(task, f, f.stem) for f in files]
    remote = grade_jobs(jobs, cfg, "cpu", workers=2, backend="ray")
    local = grade_jobs(jobs, cfg, "cpu", workers=2)
    for r, loc in zip(remote, local):
        assert _verdicts(r) == _verdicts(loc)
    assert remote[0].staff["backend"] == "ray" and local[0].staff["backend"] == "local"
    assert remote[0].score == remote[0].max_score
    assert "out-of-bounds write" in {t.name: t for t in remote[1].tests}["n1023_fp32"].message


def test_a_timing_task_is_cancelled_once_every_speed_tests_case_has_failed(local_ray, slow_wrong_timed):
    """As with local workers (tests/test_perf.py): the Ray task of a job's timing worker is cancelled once the
    job's cases are judged and its speed test's case failed, and its result comes then. The task was interrupted,
    not killed: its runner killed the worker it waited for and removed the task's grading tree."""
    import tempfile
    from pathlib import Path

    from conftest import check_timer_stopped

    leftovers = set(Path(tempfile.gettempdir()).glob("grader-ray-*"))
    task, wrong = slow_wrong_timed
    (result,) = grade_jobs([Job(task, wrong, "s")], load_config(), "cpu", workers=2, backend="ray")
    assert result.staff["backend"] == "ray"
    check_timer_stopped(result)
    assert set(Path(tempfile.gettempdir()).glob("grader-ray-*")) <= leftovers


def test_cheats_lose_their_points_through_ray_and_its_tasks_leave_no_folder(local_ray, task10, answer_reader):
    """Through Ray tasks, as through local workers: launder_copy.py (torch computes, a kernel copies) fails every
    case by the op audit, with the local backend's very messages; the answer-key reader, with the static policy off,
    is refused by the sandbox and its message holds no line of the key. No task's grading tree stays behind."""
    import tempfile
    from pathlib import Path

    task = task10.subset({"n1_fp32", "n127_fp16"})
    cfg = load_config()
    leftovers = {p for p in Path(tempfile.gettempdir()).glob("grader-ray-*")}
    launder = [Job(task, task.folder / "wrong" / "launder_copy.py", "launder")]
    (remote,), (local,) = grade_jobs(launder, cfg, "cpu", backend="ray"), grade_jobs(launder, cfg, "cpu")
    assert remote.score == 0 and remote.max_score > 0
    assert _verdicts(remote) == _verdicts(local)
    assert "must come from your kernel" in {t.name: t.message for t in remote.tests}["n127_fp16"]
    (reader,) = grade_jobs([Job(task, answer_reader, "reader")], cfg, "cpu", backend="ray",
                           static_checks=False)
    message = {t.name: t.message for t in reader.tests}["n1_fp32"]
    assert reader.score == 0
    assert "opening tasks/10_quantize_global_int8/solution.py was refused by the grader's sandbox" in message
    assert "Reference solution" not in message
    assert {p for p in Path(tempfile.gettempdir()).glob("grader-ray-*")} <= leftovers


def test_a_full_node_spreads_its_tasks_over_both_gpus_each_with_its_gate(local_ray, tmp_path):
    """Four tasks at once, as the backend asks them, on a node of four cores and two GPUs: two on each GPU, each
    with its own GPU's gate; then four more, in processes that ran one before. With the share it asked before (1/32),
    Ray put all four on GPU 0, and one gate held both GPUs' workers up; with Ray's default for a GPU task, each
    task had a new process (eight in all), which imported the grader and torch again."""
    from grader.isolation.ray_backend import gpu_share, shard_task

    assert gpu_share(ray.nodes()) == 0.5

    def probe(barrier: str, n: int) -> tuple:
        from pathlib import Path

        from grader.isolation.ray_backend import task_gpu

        (Path(barrier) / str(os.getpid())).touch()
        deadline = time.monotonic() + 120
        while len(list(Path(barrier).iterdir())) < n and time.monotonic() < deadline:  # all four hold a GPU
            time.sleep(0.05)
        return os.getpid(), [str(i) for i in ray.get_gpu_ids()], *task_gpu()

    remote = shard_task(ray, probe, "cuda")
    (tmp_path / "first").mkdir()
    first = ray.get([remote.remote(str(tmp_path / "first"), 4) for _ in range(4)])
    assert len(list((tmp_path / "first").iterdir())) == 4  # they ran at once
    assert Counter(ids[0] for _, ids, _, _ in first) == {"0": 2, "1": 2}
    for _, ids, gpu, gate in first:
        assert gpu == int(ids[0]) and gate.endswith(f"gpu-{gpu}")
    (tmp_path / "second").mkdir()
    second = ray.get([remote.remote(str(tmp_path / "second"), 4) for _ in range(4)])
    assert len({pid for pid, *_ in first + second}) < 8  # some process ran two of them
