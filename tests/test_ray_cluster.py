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


def test_the_server_grades_submissions_on_both_nodes(cluster, tmp_path, tmp_path_factory):
    """`serve --backend ray --address ...`: the server's one queue feeds the cluster's nodes; each submission is
    recorded once, with the local verdict, and its workers ran on the cluster (its staff JSON names their nodes)."""
    import json
    import subprocess
    import sys

    from server_support import SKELETON, SOLUTION, TASK, Served, make_tokens, variant

    tokens, tok = make_tokens(tmp_path_factory)
    served = Served(tmp_path, tokens, "--backend", "ray", "--address", cluster.address)
    served.start("--workers", "4")
    try:
        files = [("ann", variant(SOLUTION, 1, tmp_path)), ("bob", variant(SOLUTION, 2, tmp_path)),
                 ("cid", SKELETON), ("ann", variant(SOLUTION, 3, tmp_path))]
        procs = [subprocess.Popen([sys.executable, "-m", "grader", "submit", "--server", served.url, "--token",
                                   tok[who], "--task", TASK, str(f), "--no-wait"], stdout=subprocess.PIPE, text=True)
                 for who, f in files]
        assert all(p.wait(120) == 0 for p in procs)
        for who, n in (("ann", 2), ("bob", 1), ("cid", 1)):
            subs = served.wait_graded(tok[who], n, timeout=300)
            assert all(s["state"] == "graded" for s in subs), subs
            assert all(s["score"] == (0.0 if who == "cid" else 1.0) for s in subs), subs
        nodes = set()
        for staff in (served.data / "results").glob("*/attempts/*.staff.json"):
            data = json.loads(staff.read_text())
            assert data["staff"]["backend"] == "ray", staff
            nodes |= set(data["staff"].get("nodes", []))
        alive = {n["NodeID"] for n in ray.nodes() if n["Alive"]}
        assert nodes == alive and len(nodes) == 2, (nodes, alive)
    finally:
        served.stop()
