"""The contract between the worker, which runs a submission, and the trusted side (runner and judge).

Every file of a grading run, the job the worker receives and the records it sends back are defined here, and
nowhere else. This package imports nothing else of the grader: the worker and the trusted side meet only here.

What each module is for:
- `tree`: the folders of one grading run (`GradingTree`, `JobFolders`, `make_run_folder`): a trusted half that no
  worker can reach, and a scratch half with a folder per worker run (its docstring draws the tree);
- `trusted_files`: opening and creating the files of the trusted tree (`open_trusted`, `create_trusted`), never
  through a link;
- `job`: the job one worker run is told (`WorkerJob`, with its speed tests as `PerfItem`), as JSON;
- `records`: the record stream a worker sends back (`Kind`, `RecordWriter`, `RecordStream`, `StatusTail`), its
  frame format, and the stages a worker's last progress report counts (`worker_stages`);
- `runs`: what the runner saw of one worker run, for the judge (`WorkerRun`);
- `gate`: the GPU gate (`GpuGate`): any number of case workers at once, or one speed test's timed calls alone;
- `guards`: guard bands, the poison-filled buffers around every buffer a kernel can touch;
- `torch_ops`: the op audit's policy (which torch work a task's wrapper may do) and the check of a call's record;
- `known_errors`: the errors a worker names by a kind instead of by their text.
"""

from __future__ import annotations

from grader.protocol.gate import GpuGate
from grader.protocol.job import PerfItem, WorkerJob
from grader.protocol.records import (
    COUNTED_STAGES,
    HEADER,
    JSON_LIMIT,
    MAGIC,
    RECORDS_FD_ENV,
    STAGES,
    TENSOR_LIMIT,
    Kind,
    RecordStream,
    RecordWriter,
    StatusTail,
    compile_passed,
    worker_stages,
)
from grader.protocol.runs import WorkerRun
from grader.protocol.tree import SCRATCH_MODE, TRUSTED_MODE, GradingTree, JobFolders, make_run_folder
from grader.protocol.trusted_files import create_trusted, open_trusted

__all__ = [
    "HEADER",
    "JSON_LIMIT",
    "MAGIC",
    "RECORDS_FD_ENV",
    "SCRATCH_MODE",
    "COUNTED_STAGES",
    "STAGES",
    "TENSOR_LIMIT",
    "TRUSTED_MODE",
    "GpuGate",
    "GradingTree",
    "JobFolders",
    "Kind",
    "PerfItem",
    "RecordStream",
    "RecordWriter",
    "StatusTail",
    "WorkerJob",
    "WorkerRun",
    "compile_passed",
    "create_trusted",
    "make_run_folder",
    "open_trusted",
    "worker_stages",
]
