"""Running workers on a Ray cluster: `--backend ray [--address ADDR]`.

Each shard of a (submission, task) becomes one Ray task. It carries the submission and its cases' inputs as bytes,
runs the same `run_shard` on whatever node Ray picks (one GPU each on CUDA), and returns each worker run's record
stream. The driver writes those streams into the job's trusted folder, so judging is exactly as for local
workers, and still happens only in the driver, which never imports a submission.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import asdict, replace
from pathlib import Path

from grader.config import ROOT
from grader.isolation.runner import JobSpec, run_shard
from grader.protocol import GradingTree, JobFolders, PerfItem, WorkerRun, create_trusted


def _remote_shard(payload: dict, *case_bytes: bytes) -> dict:
    """On a Ray node: write the submission and its cases' inputs into a grading tree of its own, run the shard,
    and send back each worker run's record stream (bytes) with the run."""
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
        if spec.device == "cuda":  # the node's GPU gate, shared by every Ray task on this node's GPU
            spec = replace(spec, gate=GradingTree(node_gates()).gate(None))
        runs = run_shard(tree.job("job"), payload["shard"], spec, payload["cases"])
        out = []
        for run in runs:
            data = {k: v for k, v in asdict(run).items() if k != "records"}
            data["records_bytes"] = run.records.read_bytes() if run.records and run.records.is_file() else None
            out.append(data)
        return {"runs": out}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


GPU_SHARE = 1 / 32
"""What one Ray task asks of a GPU: case workers share it (each CPU core runs one), and the node's GPU gate keeps
timed calls alone (grader/protocol GpuGate). Asking a whole GPU, as before, ran one shard at a time on a
one-GPU node."""


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
        self.remote = ray.remote(num_cpus=1, num_gpus=GPU_SHARE if device == "cuda" else 0)(_remote_shard)
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
        out = self.ray.get(self.remote.remote(payload, *[self._inputs[spec.inputs[i]] for i in needed]))
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
