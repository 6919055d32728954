"""The write check (grader/worker/write_check.py): what a call returns must be what its kernels wrote.

Unit tests on guarded buffers, with the launches played by hand (a "kernel" here is a Python function that writes
the buffer between `before` and `launched`); tests/test_integrity.py grades the known cheats with it."""

from __future__ import annotations

import torch

from grader.judge import write_problems
from grader.protocol import guards
from grader.worker.write_check import WriteWatch


def _watch(*inputs: torch.Tensor) -> tuple[WriteWatch, list]:
    watch, allocs = WriteWatch(__file__), []
    watch.start(allocs, list(inputs))
    return watch, allocs


def _alloc(watch: WriteWatch, allocs: list, n: int, dtype=torch.float32, fill=None) -> torch.Tensor:
    buf, view, offset = guards.guarded_empty((n,), dtype, "cpu")
    if fill is not None:
        view.fill_(fill)
    allocs.append((buf, view, offset))
    watch.allocated(len(allocs) - 1)
    return view


def _launch(watch: WriteWatch, kernel, *tensors: torch.Tensor) -> None:
    owners, line = watch.before(list(tensors), kernel.__name__)
    kernel(*tensors)
    watch.launched(owners, kernel.__name__, line)


def double(x, out):
    out.copy_(x * 2)


def add_into(x, out):
    out.add_(x)


def test_an_honest_call_leaves_no_event():
    x = torch.arange(8, dtype=torch.float32)
    watch, allocs = _watch(x)
    out = _alloc(watch, allocs, 8)
    _launch(watch, double, x, out)  # poison before: untouched
    acc = _alloc(watch, allocs, 8, fill=0.0)
    _launch(watch, add_into, x, acc)  # zeros before: a kernel may accumulate into them
    acc.zero_()
    _launch(watch, add_into, x, acc)  # zeroed again between two launches
    inplace = _alloc(watch, allocs, 8)
    inplace.copy_(x)
    _launch(watch, double, inplace, inplace)  # a copy of an input, worked on in place
    one = _alloc(watch, allocs, 1)
    one.fill_(float("-inf"))
    _launch(watch, add_into, x[:1], one)  # a reduction's starting value
    for j in range(len(allocs)):
        watch.returned(j)
    assert watch.events == []
    assert write_problems("out", 0, watch.events) == []


def test_values_placed_before_between_or_after_the_launches_are_events():
    x = torch.arange(1, 9, dtype=torch.float32)
    watch, allocs = _watch(x)
    before = _alloc(watch, allocs, 8)
    before.copy_(x * 2)  # the answer, placed before a kernel that does nothing
    _launch(watch, lambda *t: None, x, before)
    between = _alloc(watch, allocs, 8)
    _launch(watch, double, x, between)
    between[3] = 0.5  # changed by Python between two launches
    _launch(watch, lambda *t: None, x, between)
    after = _alloc(watch, allocs, 8)
    _launch(watch, double, x, after)
    after[:2] = 7.0  # changed after the last launch
    one = _alloc(watch, allocs, 1)
    one.fill_(16.0)  # one element placed before the launch: not a reduction's starting value
    _launch(watch, lambda *t: None, x, one)
    for j in range(len(allocs)):
        watch.returned(j)
    got = {(e["alloc"], e["when"], e["elements"]) for e in watch.events}
    assert got == {(0, "before", 8), (1, "between", 1), (2, "after", 2), (3, "before", 1)}, watch.events
    assert all(e["line"] is not None and e["line"] > 0 for e in watch.events)  # the launch's line in this file
    msg = write_problems("q", 1, watch.events)
    assert msg and msg[0].startswith("q: 1 element(s) changed between two kernel launches"), msg
    assert write_problems("q", 5, watch.events) == []  # another buffer's events are not this output's


def test_a_garbled_record_is_that_runs_failure():
    assert write_problems("q", 0, None) == []  # the check was off
    for garbled in ("x", [1], [{"alloc": 0, "when": "later", "elements": 1, "kernel": "k", "line": 1}],
                    [{"alloc": "0", "when": "before", "elements": 1, "kernel": "k", "line": 1}]):
        assert write_problems("q", 0, garbled) == ["the worker's record of the write check is garbled"]
    odd = [{"alloc": 0, "when": "after", "elements": 2, "kernel": "x'; rm -rf /", "line": None}]
    assert write_problems("q", 0, odd)[0].startswith("q: 2 element(s) changed after the last kernel launch that "
                                                     "received it (a kernel)")
