"""The Ray backend over more than one box: a local Ray cluster of two nodes (ray.cluster_utils.Cluster, each with
two cores and one logical GPU) runs GPU tasks on both, each node's GPU behind its own gate, and grades a class
with the verdicts the local backend gives. (Both nodes run on this one machine, so their gates are one file per GPU id
here: a gate lives in the machine's temporary folder, as it must for the GPUs of one box.)"""

import os
import shutil
import tempfile
import time

import pytest

from grader.config import load_config
from grader.pipeline.grading import Job, grade_jobs

if os.environ.get("GRADER_TESTS_NEED_RAY") == "1":  # make test: the Ray tests run, never skip in silence
    import ray
else:
    ray = pytest.importorskip("ray", reason="the Ray backend needs ray (make test installs it)")


@pytest.fixture(scope="module")
def cluster():
    from ray.cluster_utils import Cluster

    # The nodes' temporary folder is their own (a short path: Ray's sockets go below it too): tests/test_ray.py,
    # which may run beside this file, counts the grader-ray-* folders of the machine's.
    tmp = tempfile.mkdtemp(prefix="rc-")
    before = os.environ.get("TMPDIR")
    os.environ["TMPDIR"] = tmp
    try:
        c = Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "num_gpus": 1, "include_dashboard": False})
        c.add_node(num_cpus=2, num_gpus=1)
        c.wait_for_nodes()
        ray.init(address=c.address, log_to_driver=False)
        yield c
        ray.shutdown()
        c.shutdown()
    finally:
        if before is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = before
        shutil.rmtree(tmp, ignore_errors=True)


def test_a_two_node_cluster_runs_gpu_tasks_on_both_nodes_each_behind_its_own_gate(cluster, tmp_path):
    from grader.isolation.ray_backend import gpu_share, shard_task

    assert len([n for n in ray.nodes() if n["Alive"]]) == 2
    assert gpu_share(ray.nodes()) == 0.5  # a task per core: two on each node's one GPU

    def probe(barrier: str, n: int) -> tuple:
        from pathlib import Path

        from grader.isolation.ray_backend import task_gpu

        (Path(barrier) / str(os.getpid())).touch()
        deadline = time.monotonic() + 120
        while len(list(Path(barrier).iterdir())) < n and time.monotonic() < deadline:  # all four at once
            time.sleep(0.05)
        gpu, gate = task_gpu()
        return ray.get_runtime_context().get_node_id(), gpu, gate

    remote = shard_task(ray, probe, "cuda")
    got = ray.get([remote.remote(str(tmp_path), 4) for _ in range(4)])
    by_node: dict[str, set] = {}
    for node, _gpu, gate in got:
        by_node.setdefault(node, set()).add(gate)
    assert len(by_node) == 2, got  # four GPU tasks at once need both nodes' GPUs
    assert all(len(gates) == 1 for gates in by_node.values()), by_node  # one gate per node's GPU
    assert all(gate.endswith(f"gpu-{gpu}") for _, gpu, gate in got), got


def test_a_class_graded_across_two_nodes_gets_the_local_verdicts(cluster, task10):
    """The verdicts tests/test_ray.py compares with the local backend's: full marks for the solution, and the
    out-of-bounds write of no_tail_mask.py named, through the two nodes' Ray tasks."""
    task = task10.subset({"n1_fp32", "n1023_fp32"})
    files = [task.folder / "solution.py", task.folder / "wrong" / "no_tail_mask.py"]
    right, wrong = grade_jobs([Job(task, f, f.stem) for f in files], load_config(), "cpu", workers=4, backend="ray",
                              address=cluster.address)
    assert right.staff["backend"] == wrong.staff["backend"] == "ray"
    assert right.score == right.max_score and wrong.score < wrong.max_score
    assert "out-of-bounds write" in {t.name: t for t in wrong.tests}["n1023_fp32"].message
