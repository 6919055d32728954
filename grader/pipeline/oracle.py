"""The oracle stage: each task's inputs and answers for one device, computed once and shared by every job."""

from __future__ import annotations

import hashlib
import importlib
import sys
import zlib
from pathlib import Path

import torch

from grader import judge
from grader.config import ROOT, TaskSpec
from grader.protocol import (
    GradingTree,
)

TWIN_MAX_ELEMENTS = 1 << 20
"""A case whose tensor inputs hold more elements than this has no twin: making it, its answer and its call cost
about as much as the case (on the H200, with twins for every case, the class benchmark's busy core-seconds grew
1.31x, most of it for task 10's 67-million-element case and its kind), and carrying that many values through Python
is itself slow (str() of 2^20 float32 elements: 14.8 s on a CI-like CPU, before any parsing)."""


class Prepared:
    """Each task's inputs and oracle answers for one device, computed once and shared by every job.

    Inputs come first (workers need them: one file per case in the trusted tree, so that a worker is handed only
    its own cases'); the oracle's answers are computed later, while the workers run.
    """

    def __init__(self, device: str, tree: GradingTree, save_answers: bool = False, audit: bool = False,
                 twins: bool = False) -> None:
        self.device = device
        self.tree = tree
        self.save_answers = save_answers
        """Also write the answers to a file, for judge processes (see `judge_job_apart`)."""
        self.audit = audit and device == "cuda"
        """Also write the inputs the CPU grades, for the address check's interpreted calls on CUDA."""
        self.twins = twins
        """Give each case of a task whose wrapper the submission writes a twin (`twin_of`), for the provenance
        check."""
        self._cases: dict[str, list[judge.CaseData]] = {}
        self._answered: set[str] = set()
        self._keys: dict[str, str] = {}

    @staticmethod
    def _oracle(task: TaskSpec):
        if str(ROOT) not in sys.path:
            sys.path.insert(0, str(ROOT))
        return importlib.import_module(f"reference.{task.reference}")

    def cases(self, task: TaskSpec) -> list[judge.CaseData]:
        """The cases with their inputs (written to `case_paths` for the workers); `expected` not yet filled."""
        if task.id not in self._cases:
            oracle = self._oracle(task)
            data = []
            for i, case in enumerate(task.cases):
                args, kwargs = oracle.generate_input(**case.params_for(self.device))
                twin = None
                size = sum(v.numel() for v in [*args, *kwargs.values()] if isinstance(v, torch.Tensor))
                if self.twins and task.launch is None and size <= TWIN_MAX_ELEMENTS:
                    t_args, t_kwargs = twin_of(f"{task.id}/{case.id}", list(args), dict(kwargs))
                    twin = judge.CaseData(case.id, t_args, t_kwargs, ())
                data.append(judge.CaseData(case.id, list(args), dict(kwargs), (), twin=twin))
                # On CUDA, the address check (grader/worker/address_check.py) runs the kernels in the interpreter, on
                # the inputs the CPU grades: the case's own where it has no `cpu:` sizes, else those.
                audit = None
                if self.audit and case.params_for("cpu") != case.params_for("cuda"):
                    a_args, a_kwargs = oracle.generate_input(**case.params_for("cpu"))
                    audit = {"args": list(a_args), "kwargs": dict(a_kwargs)}
                path = self.tree.case_file(task.id, i)
                path.parent.mkdir(parents=True, exist_ok=True)
                torch.save({"id": case.id, "args": list(args), "kwargs": dict(kwargs),
                            **({"audit": audit} if audit else {}),
                            **({"twin": {"args": twin.args, "kwargs": twin.kwargs}} if twin else {})}, path)
            self._cases[task.id] = data
        return self._cases[task.id]

    def answer(self, task: TaskSpec) -> None:
        """Fill every case's `expected` with the oracle's answer (once per task)."""
        if task.id not in self._answered:
            answer_cases(task, self.cases(task))
            if self.save_answers:
                path = self.tree.answers_file(task.id)
                path.parent.mkdir(parents=True, exist_ok=True)
                cases = self.cases(task)  # with the accepted ranges, computed here once (judge.ranges_of)
                torch.save({"expected": [list(c.expected) for c in cases],
                            "ranges": [judge.ranges_of(task, c) for c in cases],
                            "twins": [None if c.twin is None else {"expected": list(c.twin.expected),
                                                                   "ranges": judge.ranges_of(task, c.twin)}
                                      for c in cases]}, path)
                self._keys[task.id] = hashlib.sha256(path.read_bytes()).hexdigest()
            self._answered.add(task.id)

    def answers_key(self, task: TaskSpec) -> str:
        """The sha256 of the answers file (once answered with `save_answers`): what a judge process keys the
        cases it read by, so that its cache holds each content once, whatever folder it came from."""
        return self._keys.get(task.id, "")

    def case_paths(self, task: TaskSpec) -> dict[int, Path]:
        return {i: self.tree.case_file(task.id, i) for i in range(len(task.cases))}


def twin_of(key: str, args: list, kwargs: dict) -> tuple[list, dict]:
    """A case's twin: the same arguments, each tensor's elements in another order (a permutation drawn from `key`),
    with the same shape and strides. Its values are the case's own, so every constraint a task puts on a value
    (codes in range, positive scales) holds, and so do statistics of a whole tensor (its absmax); what a position
    holds changes, so a value computed from the inputs changes with it (grader/worker/provenance.py)."""
    gen = torch.Generator().manual_seed(zlib.crc32(key.encode()))

    def shuffled(value):
        if not isinstance(value, torch.Tensor) or value.numel() <= 1:
            return value
        flat = value.reshape(-1)
        out = torch.empty_strided(tuple(value.shape), value.stride(), dtype=value.dtype, device=value.device)
        out.copy_(flat[torch.randperm(flat.numel(), generator=gen)].reshape(value.shape))
        return out

    return [shuffled(a) for a in args], {k: shuffled(v) for k, v in kwargs.items()}


def answer_cases(task: TaskSpec, cases: list[judge.CaseData]) -> None:
    oracle = Prepared._oracle(task)
    for case in [*cases, *(c.twin for c in cases if c.twin is not None)]:
        expected = tuple(oracle.ref_kernel(case.args, case.kwargs))
        if len(expected) != len(task.outputs):
            raise ValueError(f"reference/{task.reference}.py returned {len(expected)} outputs for case "
                             f"{case.id}; tasks/{task.id}/task.yaml declares {len(task.outputs)}")
        case.expected = expected
