"""Running workers on a Ray cluster: `--backend ray [--address ADDR]`.

Each shard of a (submission, task) becomes one Ray task. It carries the submission and its cases' inputs as
bytes, runs the same `run_shard` on whatever node Ray picks (on CUDA, on the GPU Ray gives it, through that GPU's
gate), and returns each worker run's record stream. The driver writes those streams into the job's trusted
folder, so judging is exactly as for local workers, and still happens only in the driver, which never imports a
submission.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import tempfile
import time
from dataclasses import asdict, replace
from pathlib import Path

from grader.config import ROOT
from grader.isolation.runner import POLL_S, STOPPED_WHY, JobSpec, run_shard, timing_stopped
from grader.protocol import GradingTree, JobFolders, PerfItem, WorkerRun, create_trusted


def _remote_shard(payload: dict, *case_bytes: bytes) -> dict:
    """On a Ray node: write the submission and its cases' inputs into a grading tree of its own, run the shard,
    and send back each worker run's record stream (bytes) with the run."""
    _interruptible()
    tmp = Path(tempfile.mkdtemp(prefix="grader-ray-"))
    try:
        tree = GradingTree(tmp)
        submission = tree.trusted / payload["name"]
        submission.write_bytes(payload["submission"])
        inputs = {}
        for index, data in zip(payload["inputs"], case_bytes):
            inputs[index] = tree.case_file("task", index)
            inputs[index].parent.mkdir(parents=True, exist_ok=True)
            inputs[index].write_bytes(data)
        perf = [PerfItem(**p) for p in payload["spec"].pop("perf")]
        spec = JobSpec(**{**payload["spec"], "submission": submission, "inputs": inputs, "perf": perf, "gpu": None})
        if spec.device == "cuda":
            gpu, gate = task_gpu()
            spec = replace(spec, gpu=gpu, gate=gate)
        runs = run_shard(tree.job("job"), payload["shard"], spec, payload["cases"])
        out = []
        for run in runs:
            data = {k: v for k, v in asdict(run).items() if k != "records"}
            data["records_bytes"] = run.records.read_bytes() if run.records and run.records.is_file() else None
            data["node"] = _node_id()
            out.append(data)
        return {"runs": out}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _interruptible() -> None:
    """Let `ray.cancel` interrupt this task. Ray cancels a running task by raising KeyboardInterrupt in it as a
    SIGINT would (`_thread.interrupt_main`), which does nothing where SIGINT is ignored; and a shell without job
    control starts a background job (`grader batch ... &`, `nohup`) with SIGINT ignored, which Ray's processes
    inherit: a timing task whose speed tests were decided then ran to its end (tests/test_ray.py saw 67 s, not
    14)."""
    import signal
    import threading

    if threading.current_thread() is threading.main_thread() \
            and signal.getsignal(signal.SIGINT) in (signal.SIG_IGN, signal.SIG_DFL):
        signal.signal(signal.SIGINT, signal.default_int_handler)


def _node_id() -> str:
    import ray

    try:
        return str(ray.get_runtime_context().get_node_id())
    except Exception:  # noqa: BLE001 - not in a Ray task (a test calling the function itself)
        return ""


def gpu_share(nodes: list[dict]) -> float:
    """What one Ray task asks of a GPU, from `ray.nodes()`: the GPU nodes' fewest GPUs per core (rounded down to
    Ray's 1e-4), so that each core of the node with the most cores per GPU runs a shard. Case workers share a GPU,
    and its gate keeps timed calls alone (grader/protocol GpuGate).

    Ray fills one GPU with fractional tasks before it starts on the next: with a fixed 1/32, a 32-core node's
    tasks all went to its first GPU (tests/test_ray.py shows it); with a whole GPU a task, a one-GPU node ran one
    shard at a time. A node with fewer cores per GPU than the others fills its first GPUs first."""
    ratios = [r["GPU"] / r["CPU"] for node in nodes if node.get("Alive")
              for r in [node.get("Resources", {})] if r.get("GPU", 0) > 0 and r.get("CPU", 0) > 0]
    if not ratios:  # no GPU node yet: Ray holds the tasks until one joins
        return 1 / 32
    return min(1.0, max(1e-4, math.floor(min(ratios) * 1e4) / 1e4))


def task_gpu() -> tuple[int | None, str]:
    """In a Ray task: the GPU Ray gave it (`ray.get_gpu_ids()`), and that GPU's gate in this node's gate folder,
    shared by every task on the GPU. Where Ray names none: None (the worker uses the GPUs it sees) and the node's
    only gate."""
    import ray

    ids = [str(i) for i in ray.get_gpu_ids()]
    gpu = int(ids[0]) if ids and ids[0].isdigit() else None
    return gpu, GradingTree(node_gates()).gate(gpu)


def shard_task(ray, fn, device: str):
    """`fn` as the backend's Ray task: one core and, on CUDA, a share of a GPU (`gpu_share`). Its worker processes
    run task after task (`max_calls=0`). Ray's default for a task that asks a GPU is a new process each: every
    shard imported the grader and started a fork server of its own (torch's import again), and 24 students' 93
    files took 4131 busy core-seconds and 154 s on the 2 x H200 box, against the local backend's 1632 and 80 s.
    The GPU is used only by the sandboxed worker each task starts, never by the Ray process itself."""
    return ray.remote(num_cpus=1, num_gpus=gpu_share(ray.nodes()) if device == "cuda" else 0, max_calls=0)(fn)


def node_gates() -> Path:
    """A folder of this node's, the same for every Ray task on it, for the GPU gate: a grading tree whose trusted
    half holds only the gate (no worker can write it)."""
    path = Path(tempfile.gettempdir()) / f"grader-node-{os.getuid()}"
    path.mkdir(mode=0o711, exist_ok=True)
    return path


class RayShards:
    """A drop-in for `run_shard` that runs the shard as a Ray task."""

    def __init__(self, address: str | None, device: str) -> None:
        import ray

        self.ray = ray
        if not ray.is_initialized():
            if address:
                ray.init(address=address, runtime_env={"working_dir": str(ROOT),
                                                       "excludes": [".venv", "results", ".git", "submissions"]})
            else:
                ray.init(include_dashboard=False, log_to_driver=False)
        self.remote = shard_task(ray, _remote_shard, device)
        self._inputs: dict[Path, object] = {}

    def __call__(self, folders: JobFolders, shard: int, spec: JobSpec, cases: list[int]) -> list[WorkerRun]:
        needed = sorted({*cases, *(p.case for p in spec.perf)})
        for index in needed:  # one copy of each case's inputs in the object store
            if spec.inputs[index] not in self._inputs:
                self._inputs[spec.inputs[index]] = self.ray.put(spec.inputs[index].read_bytes())
        fields = asdict(replace(spec, gpu=None, inductor_from=None, gate=""))
        payload = {
            "name": spec.submission.name, "submission": spec.source_bytes(),
            "shard": shard, "cases": cases, "inputs": needed,
            "spec": {k: v for k, v in fields.items() if k not in ("submission", "inputs", "source")},
        }
        start = time.monotonic()
        ref = self.remote.remote(payload, *[self._inputs[spec.inputs[i]] for i in needed])
        if spec.perf and not cases:  # a timing worker: cancelled once its job's speed tests are decided without it
            while not self.ray.wait([ref], timeout=POLL_S)[0]:
                if timing_stopped(folders):
                    # Ray interrupts the task (KeyboardInterrupt): its runner kills the worker it waits for and
                    # removes the task's folder, and the Ray process and its fork server go on to the next task
                    self.ray.cancel(ref)
                    with contextlib.suppress(Exception):
                        self.ray.get(ref, timeout=60)  # (raises: cancelled) the task has cleaned up
                    return [WorkerRun(records=None, returncode=None, timed_out=False,
                                      seconds=time.monotonic() - start, log="", run_id=f"{shard}-0",
                                      perf=True, sees_hidden=spec.sees_hidden, stopped=STOPPED_WHY)]
        out = self.ray.get(ref)
        runs = []
        for data in out["runs"]:
            records = data.pop("records_bytes")
            run = WorkerRun(records=None, **data)
            if isinstance(records, bytes) and isinstance(run.run_id, str) and run.run_id.replace("-", "").isdigit():
                run.records = folders.records(run.run_id)
                fd = create_trusted(run.records)
                with os.fdopen(fd, "wb") as fh:
                    fh.write(records)
            runs.append(run)
        return runs
