"""The judge: turns what a worker saw into verdicts. It never imports the submission.

Everything the worker sent is treated as untrusted data: the record streams are read through grader/protocol
(bounded frames, tensors loaded with `weights_only=True`), each record's shape is checked, and anything missing,
late or garbled fails that test with a message (fail closed). No text of a worker's becomes a path.

What each module is for:
- `data`: a case as the judge prepared it (`CaseData`) and the verdict of one test (`Verdict`);
- `worker_results`: reading what the workers of one (submission, task) left (`WorkerResults`, `check_load`,
  `resolve_shared`) and a run's printed output (`printed_text`);
- `values`: the value check of an output, its rules and tolerances (`compare_values`, `value_problem`), the
  accepted ranges kept with the answers (`accepted_range`, `ranges_of`, `keep_ranges`, `passes_fast`), and the
  twin's replay rule (`replays`);
- `writes`: out-of-bounds writes into the guard bands (`guard_damage`, `check_guards`) and the write check's
  findings (`write_problems`);
- `messages`: what the student reads of an error a call raised (`error_problem`) and of an address-check finding
  (`describe_bounds`);
- `case`: judging one case: each call's problems (`check_run`), its twin (`twin_problems`), the verdict
  (`judge_case`);
- `drawing`: which output a failing call's picture shows and its tiles (`draw_run`, `tiles_of`); `pictures`
  draws it;
- `speed`: the verdict of a speed test; `suite`: the tests pytest runs over a job's results; `diagnosis`: one line
  across cases; `provenance`: the twin's and the graded call's records compared; `known_errors`: the grader's
  words for a known error.
"""

from __future__ import annotations

from grader.judge import known_errors, provenance
from grader.judge.case import check_run, input_names, judge_case, n_buffers, twin_problems
from grader.judge.data import CaseData, Verdict
from grader.judge.drawing import draw_run, tiles_of
from grader.judge.messages import ERROR_HINTS, NOISE, _error_text, describe_bounds, error_problem
from grader.judge.values import (
    DTYPES,
    SHOW,
    TWIN_SLACK,
    accepted_range,
    bad_values,
    close_tolerance,
    compare_values,
    keep_ranges,
    passes_fast,
    ranges_of,
    replays,
    resolve_dtype,
    rounded_bounds,
    value_problem,
)
from grader.judge.worker_results import (
    LOAD_TEXT,
    PRINTED_CHARS,
    WorkerResults,
    check_load,
    printed_text,
    resolve_shared,
)
from grader.judge.writes import check_guards, guard_damage, write_problems

__all__ = [
    "DTYPES",
    "ERROR_HINTS",
    "LOAD_TEXT",
    "NOISE",
    "PRINTED_CHARS",
    "SHOW",
    "TWIN_SLACK",
    "CaseData",
    "Verdict",
    "WorkerResults",
    "_error_text",
    "accepted_range",
    "bad_values",
    "check_guards",
    "check_load",
    "check_run",
    "close_tolerance",
    "compare_values",
    "describe_bounds",
    "draw_run",
    "error_problem",
    "guard_damage",
    "input_names",
    "judge_case",
    "keep_ranges",
    "known_errors",
    "n_buffers",
    "passes_fast",
    "provenance",
    "printed_text",
    "ranges_of",
    "replays",
    "resolve_dtype",
    "resolve_shared",
    "rounded_bounds",
    "tiles_of",
    "twin_problems",
    "value_problem",
    "write_problems",
]
