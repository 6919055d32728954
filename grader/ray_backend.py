"""Running workers on a Ray cluster: `--backend ray [--address ADDR]`.

Each shard of a (submission, task) becomes one Ray task. It carries the submission and the inputs as bytes, runs
the same `run_shard` on whatever node Ray picks (one GPU each on CUDA), and returns the files the workers wrote.
The driver puts those files in the job's local folder, so judging is exactly as for local workers, and still
happens only in the driver, which never imports a submission.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import asdict, replace
from pathlib import Path

from grader.config import ROOT
from grader.runner import JobSpec, WorkerRun, run_shard


def _remote_shard(payload: dict, inputs_bytes: bytes) -> dict:
    """On a Ray node: write the submission and inputs, run the shard, send back every file of the job folder."""
    tmp = Path(tempfile.mkdtemp(prefix="grader-ray-"))
    try:
        submission = tmp / payload["name"]
        submission.write_bytes(payload["submission"])
        inputs = tmp / "inputs.pt"
        inputs.write_bytes(inputs_bytes)
        jobdir = tmp / "job"
        jobdir.mkdir()
        spec = JobSpec(**{**payload["spec"], "submission": submission, "inputs": inputs, "gpu": None})
        runs = run_shard(jobdir, payload["shard"], spec, payload["cases"])
        files = {p.name: p.read_bytes() for p in jobdir.iterdir() if p.is_file()}
        return {"files": files, "runs": [{k: v for k, v in asdict(r).items() if k != "jobdir"} for r in runs]}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


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
        self.remote = ray.remote(num_cpus=1, num_gpus=1 if device == "cuda" else 0)(_remote_shard)
        self._inputs: dict[Path, object] = {}

    def __call__(self, jobdir: Path, shard: int, spec: JobSpec, cases: list[int]) -> list[WorkerRun]:
        if spec.inputs not in self._inputs:  # one copy of each task's inputs in the object store
            self._inputs[spec.inputs] = self.ray.put(spec.inputs.read_bytes())
        payload = {
            "name": spec.submission.name, "submission": spec.submission.read_bytes(),
            "shard": shard, "cases": cases,
            "spec": {k: v for k, v in asdict(replace(spec, gpu=None)).items() if k not in ("submission", "inputs")},
        }
        out = self.ray.get(self.remote.remote(payload, self._inputs[spec.inputs]))
        for name, data in out["files"].items():
            if "/" not in name and name not in ("", ".", ".."):
                (jobdir / name).write_bytes(data)
        return [WorkerRun(jobdir=jobdir, **run) for run in out["runs"]]
