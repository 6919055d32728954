"""The server's grading scheduler: the queue fed into one grading run that lives as long as the server.

Autolab's Tango admits a job when a worker of its pool frees up; this does the same with the grading pipeline's
own pool (grader/pipeline/grading.py `GradingRun.serve`, grader/isolation/schedule.py):

* **No barrier.** A submission is admitted as soon as the pool has a slot that no waiting item wants
  (`GradingRun.room`), whatever else runs: a student's quick file does not wait for another's slow one, and
  nothing waits in the pool that could still wait in the queue, in the queue's fair order (round-robin by
  student, grader/server/queue.py).
* **One budget.** The pool's slots are the machine's (about its cores, 1.5 per core on CUDA, where workers wait
  on the compiler): every worker of every submission, and each worker's compile children, share them.
* **The verdict at the first pass.** A submission's verdict is recorded when its cases are judged; its speed
  tests are timed in a lane below every case shard, and its result is completed after ("speed: pending").
* **Lanes.** A staff regrade's submissions are taken only when no student's waits, their items run after every
  student's, and they never hold every slot: a student's file always finds one.
* **State kept.** Each task's inputs, answers and warm-up are made once, at the start; the judge processes, the
  staff's timing runs and their Inductor caches live as long as the server; a job's state is dropped once it is
  recorded.
* **Off the grading path.** The course's views (gradebook, Canvas CSV, summary, leaderboard) are written by a
  thread of their own, at most every few seconds, from the ledger.

`backend="ray"` runs the workers as Ray tasks on a cluster's GPUs (each GPU behind its own gate, as `batch` does
with `--backend ray`), fed from the same queue.
"""

from __future__ import annotations

import datetime as dt
import statistics
import threading
from collections.abc import Callable

from grader.config import CourseConfig, TaskSpec
from grader.pipeline.grading import Job, close_run, serving_run
from grader.results import TaskResult
from grader.server.queue import Queue

PUBLISH_EVERY_S = 5.0
"""The course's views are rewritten at most this often while verdicts come in (and once more when they stop)."""


class GradingScheduler:
    """Feeds the queue's submissions into a serving GradingRun as it has room. `prepare(row)` turns a row into a
    Job, or into a result when it is refused before anything runs; `record(row, result)` records a result (a
    first pass while `result.pending`, then the full one); `fail(row, why)` records the grader's own failure."""

    def __init__(self, queue: Queue, cfg: CourseConfig, device: str, tasks: list[TaskSpec],
                 prepare: Callable[[dict], Job | TaskResult], record: Callable[[dict, TaskResult], None],
                 fail: Callable[[dict, str], None], publish: Callable[[], None], workers: int = 0,
                 backend: str = "local", address: str | None = None) -> None:
        self.queue, self.tasks = queue, tasks
        self.prepare, self.record, self.fail, self.publish = prepare, record, fail, publish
        self.run = serving_run(cfg, device, workers, backend, address)
        self.paused = False
        self._stop = threading.Event()
        self._dirty = threading.Event()
        self._threads: list[threading.Thread] = []

    # ------------------------------------------------------------------------------------------ life

    def start(self) -> None:
        self.run.prepare_tasks(self.tasks)  # inputs, answers and warm-up once, before the first submission
        for target, name in ((self.run.serve, "grader-run"), (self._admit_loop, "grader-admit"),
                             (self._publish_loop, "grader-publish")):
            thread = threading.Thread(target=target, args=(self._stop,) if target == self.run.serve else (),
                                      name=name, daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        self._stop.set()
        with self.queue.wake:
            self.queue.wake.notify_all()
        for thread in self._threads:
            thread.join(timeout=30)
        close_run(self.run)

    # ------------------------------------------------------------------------------------------ admission

    def _admit_loop(self) -> None:
        while not self._stop.is_set():
            with self.queue.wake:
                row = self._next()
                if row is None:
                    self.queue.wake.wait(timeout=0.5)
                    continue
            self._admit(row)

    def _next(self) -> dict | None:
        """The next queued submission the pool has room for, marked running (a student's before a regrade's)."""
        if self.paused:
            return None
        for lanes in ((0,), (1,)):
            if self.run.room(lanes[0]) > 0:
                rows = self.queue.take(1, lanes)
                if rows:
                    return rows[0]
        return None

    def _admit(self, row: dict) -> None:
        try:
            job = self.prepare(row)
        except Exception as exc:  # noqa: BLE001 - the grader's own failure: this submission fails, the rest go on
            self.fail(row, f"the grader failed ({type(exc).__name__}): tell the course staff")
            return
        if isinstance(job, TaskResult):  # refused before anything ran (a notebook without the task's code)
            self._recorded(row, job)
            return
        # Wait until the run has admitted it (a fraction of a second): the next room() counts its items.
        self.run.submit([job], lambda r, row=row: self._recorded(row, r), lane=row["lane"]).wait(60)

    def _recorded(self, row: dict, result: TaskResult) -> None:
        try:
            self.record(row, result)
        except Exception as exc:  # noqa: BLE001 - this submission fails, the rest go on
            self.fail(row, f"the grader failed recording the result ({type(exc).__name__}): tell the course staff")
        if not result.pending:
            self._dirty.set()

    # ------------------------------------------------------------------------------------------ views

    def _publish_loop(self) -> None:
        while not self._stop.is_set():
            if not self._dirty.wait(timeout=0.5):
                continue
            self._dirty.clear()
            try:
                self.publish()
            except Exception:  # noqa: BLE001 - the views are made again at the next verdict
                self._dirty.set()
            self._stop.wait(PUBLISH_EVERY_S)

    # ------------------------------------------------------------------------------------------ estimates

    def estimate(self, position: int | None, started_at: str | None = None) -> float | None:
        """Seconds until a submission gets its verdict, from the latest verdicts (None before any): queued
        `position` places into the queue (0: next), the queue's pace (the median seconds between one start and
        the next) for each submission ahead and for its own turn, then one file's latency (the median seconds
        from a start to its verdict); running since `started_at`, that latency less the time it has run."""
        gaps, latency = self.queue.paces()
        if not latency:
            return None
        one = statistics.median(latency)
        if position is None:
            if started_at is None:
                return round(one, 1)
            ran = (dt.datetime.now(dt.timezone.utc) - dt.datetime.fromisoformat(started_at)).total_seconds()
            return round(max(0.0, one - ran), 1)
        pace = statistics.median(gaps) if len(gaps) >= 3 else one
        return round((position + 1) * pace + one, 1)
