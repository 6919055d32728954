"""Property-based fuzzing (Hypothesis) of the readers of a student's bytes: the notebook reader, the similarity
tokenizer, the `--manifest` CSV reader and the static check. Each property: it returns a result, or raises the
module's own documented error (ManifestError for the manifest; the others document none: they report), never
anything else, and within a time bound (each example's `deadline`; the module runs in well under a minute on 2
cores). Inputs: arbitrary bytes and text, and text built from Python's own pieces, nested deep (the 20,000-term
sum that once stopped a class is an explicit example)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from grader.config import load_task
from grader.course.batch import ManifestError, read_manifest
from grader.course.similarity import fingerprint
from grader.gates.notebook import Extraction, Notebook
from grader.gates.static import StaticReport, check_source

ROOT = Path(__file__).resolve().parent.parent
TASK = load_task(ROOT / "tasks" / "puzzle01_constant_add")
BOMB = "x = " + "+".join(["1"] * 20000)
FUZZ = settings(max_examples=100, deadline=5000, suppress_health_check=[HealthCheck.too_slow])

_PIECES = ["(", ")", "[", "]", "{", "}", "+", "-", "*", "lambda: ", "not ", "x", "1", "'s'", '"""', ",", ":", "\n",
           "    ", "def f():", "@triton.jit", "import os", "%%bash", "!ls", "\x00", "\x1b[2K", "\udcff", "\r",
           "tl.load(", "if x:", "add_kernel", " = ", "#", "\\"]
python_ish = st.one_of(
    st.text(max_size=400),
    st.lists(st.sampled_from(_PIECES), max_size=300).map("".join),
    st.tuples(st.sampled_from(["(", "[", "-", "not ", "lambda: ", "+1"]), st.integers(100, 6000)).map(
        lambda t: "x = " + t[0] * t[1] + "1"),
)


@FUZZ
@given(python_ish)
@example(BOMB)
@example("def add_kernel(x_ptr, z_ptr, N0, B0):\n    pass\n" + BOMB)
def test_static_check_always_reports(source):
    report = check_source(source, TASK, [], "s.py")
    assert isinstance(report, StaticReport)
    assert all(isinstance(m, str) and len(m) < 5000 for m in report.imports + report.signatures)


@FUZZ
@given(python_ish)
@example(BOMB)
def test_similarity_tokenizer_always_fingerprints(source):
    fp = fingerprint(source)
    assert fp.source == source and fp.coverage >= 0


def _nb(cells: list[str]) -> bytes:
    return json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {},
                       "cells": [{"cell_type": "code", "metadata": {}, "source": c, "outputs": [],
                                  "execution_count": None} for c in cells]}).encode()


notebook_bytes = st.one_of(
    st.binary(max_size=2000),
    st.lists(python_ish, max_size=4).map(_nb),
    st.integers(50, 5000).map(lambda n: b"[" * n + b"]" * n),  # JSON nested deep
)


@FUZZ
@given(notebook_bytes)
@example(_nb([BOMB]))
@example(_nb(["@triton.jit\ndef add_kernel(x_ptr, z_ptr, N0, B0):\n    pass\n" + BOMB]))
@example(b"\xff\xfe{")
def test_notebook_reader_always_extracts(data):
    book = Notebook(data, "nb.ipynb")
    extraction = book.extract(TASK)
    assert isinstance(extraction, Extraction) and isinstance(extraction.source, bytes)
    assert book.problem is None or extraction.problems


@FUZZ
@given(st.one_of(
    st.binary(max_size=1000),
    st.lists(st.tuples(st.text(max_size=20), st.text(max_size=20), st.one_of(
        st.text(max_size=30), st.datetimes(timezones=st.just(dt.timezone.utc)).map(lambda d: d.isoformat()))),
        max_size=5).map(lambda rows: ("student,task,submitted_at\n" + "".join(
            f'"{a}","{b}","{c}"\n' for a, b, c in rows)).encode("utf-8", errors="surrogatepass")),
))
@example(b"student,task\nann,t\n")
@example(b"student,task,submitted_at\nann\n")
@example(b"\x00\x00")
def test_manifest_reader_returns_times_or_says_why(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("m") / "times.csv"
    path.write_bytes(data)
    try:
        times = read_manifest(path)
    except ManifestError as exc:
        assert str(path) in str(exc)
        return
    assert all(isinstance(k, tuple) and v.tzinfo is not None for k, v in times.items())


@pytest.mark.parametrize("name", ["nb\n.ipynb", "\x1b]0;t\x07.ipynb", "bad\udcff.ipynb"])
def test_odd_notebook_names_are_quoted_in_problems(name):
    book = Notebook(b"{not json", name)
    assert book.problem is not None and "\n" not in book.problem and "\x1b" not in book.problem
