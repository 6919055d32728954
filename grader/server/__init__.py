"""The submission service: students hand files in to the course's GPU box and read its verdicts in seconds.

* queue (the submissions table: stored before answered, taken round-robin by student, lanes for regrades);
* scheduler (the queue fed into one grading run that lives as long as the server: no barrier, one budget of
  processes, the verdict at the first pass, the course's views off the grading path);
* service (the Server: refusals, attempts and lateness by its clock, what a student and the staff see);
* app (the HTTP face: FastAPI, served by uvicorn) and pages (the student's and the staff's pages);
* tokens (a token per student, kept as hashes) and client (`triton-grader submit`).

It is built on grader/course (batch's ledger and views) and grader/pipeline; neither imports it (pyproject.toml's
import-linter contracts).
"""
