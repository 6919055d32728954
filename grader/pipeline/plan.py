"""Planning: which cases run together in one worker (shards, by compile key and cost), and how a harness launches a
kernel (task.yaml `launch`)."""

from __future__ import annotations

import torch

from grader import judge
from grader.config import TaskSpec


def specialization_key(case: judge.CaseData, specialize: bool = True) -> tuple:
    """Cases with equal keys most likely reuse one compiled kernel: Triton specializes integer arguments on
    divisibility by 16 and on equality to 1 (unless `specialize` is off), and constexpr flags come from
    non-tensor arguments."""
    key = []
    for value in [*case.args, *case.kwargs.values()]:
        if isinstance(value, torch.Tensor) and not specialize:
            key.append(str(value.dtype))
        elif isinstance(value, torch.Tensor):
            key.append((str(value.dtype), tuple((d % 16 == 0, d == 1) for d in value.shape),
                        tuple(st % 16 == 0 for st in value.stride())))
        else:
            key.append(repr(value))
    return tuple(key)


def plan_shards(cases_per_job: dict[int, list[judge.CaseData]], workers: int,
                specialize: dict[int, bool] | None = None,
                classes: dict[int, list[str]] | None = None) -> dict[int, list[list[int]]]:
    """Split each job's cases over workers when there are more cores than jobs (a student checking one file, a
    few tasks on a big box). Compilation is the slow part, so cases that share a specialization stay together
    and a shard costs about its number of distinct specializations. Cases of different `classes` (per job, a
    label per case: its visibility) never share a shard, so a worker grading public cases never holds a hidden
    case's inputs; every job gets one shard per class it has. Spare workers go one at a time to the job whose
    heaviest shard is heaviest, so the shards fit the workers and the slowest is as short as it can be (with
    Triton's specializations on, the five INT8 solutions made 24 shards of at most 2 specializations on 24
    workers, where the plan before made 25, one waiting for a free worker; both graded them in 24.5-29 s cold
    on the H100, compilation keeping all 16 cores busy. With them off, the default, there are 12
    specializations in all, and it took 16-17 s)."""
    groups = {}
    minimum = {}
    for n, cases in cases_per_job.items():
        labels = (classes or {}).get(n) or [""] * len(cases)
        by_key: dict[tuple, list[int]] = {}
        for i, case in enumerate(cases):
            by_key.setdefault((labels[i], specialization_key(case, (specialize or {}).get(n, True))), []).append(i)
        groups[n] = sorted(by_key.items(), key=lambda kv: len(kv[1]), reverse=True)
        minimum[n] = len({label for label, _ in by_key})
    shards = {n: max(1, minimum[n]) for n in groups}
    for _ in range(workers - sum(shards.values())):
        splittable = [n for n in groups if shards[n] < len(groups[n])]
        if not splittable:
            break
        worst = max(splittable, key=lambda n: (-(-len(groups[n]) // shards[n]), len(groups[n])))
        shards[worst] += 1
    plan = {}
    for n, job_groups in groups.items():
        labels = sorted({label for (label, _), _ in job_groups})
        # each class gets its own bins: at least one, and the job's other shards in proportion to its groups
        per_class = {label: 1 for label in labels}
        for _ in range(shards[n] - len(labels)):
            free = [c for c in labels if per_class[c] < sum(1 for (lab, _), _ in job_groups if lab == c)]
            if not free:
                break
            fullest = max(free, key=lambda c: sum(1 for (lab, _), _ in job_groups if lab == c) / per_class[c])
            per_class[fullest] += 1
        job_plan = []
        for label in labels:
            bins: list[list[list[int]]] = [[] for _ in range(per_class[label])]
            for (lab, _), group in job_groups:  # largest first, into the bin with the fewest specializations
                if lab == label:
                    min(bins, key=lambda b: (len(b), sum(map(len, b)))).append(group)
            job_plan += [b for b in bins if b]
        job_plan.sort(key=len, reverse=True)  # the heaviest shard first
        plan[n] = [sorted(i for group in b for i in group) for b in job_plan]
    return plan


def shard_cost(cases: list[judge.CaseData], indices: list[int], specialize: bool = True) -> int:
    """About how many compilations a shard costs: its number of distinct specializations."""
    return len({specialization_key(cases[i], specialize) for i in indices})


def launch_job(task: TaskSpec) -> dict | None:
    """What a worker needs to launch a task's kernel itself (tasks with `launch` in task.yaml)."""
    if task.launch is None:
        return None
    return {"kernel": task.launch.kernel, "grid": [list(axis) for axis in task.launch.grid],
            "env": dict(task.launch.env), "outputs": len(task.outputs)}
