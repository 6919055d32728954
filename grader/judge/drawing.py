"""What a failing call's picture shows (tasks with `pictures: true`): the first output with wrong, unwritten or
out-of-bounds elements, with its tiles labelled by the program that owns them (grader/judge/pictures.py draws
it)."""

from __future__ import annotations

from grader.config import TaskSpec
from grader.judge.data import CaseData
from grader.judge.values import bad_values
from grader.judge.writes import guard_damage
from grader.protocol import guards


def tiles_of(task: TaskSpec, case: CaseData, ndim: int) -> list[tuple[int, int] | None] | None:
    """Per output dimension, (block, grid axis) of the blocking that walks it, from task.yaml's launch.tiles."""
    if not task.launch or not task.launch.tiles or len(task.launch.tiles) != ndim:
        return None
    tiles = []
    for pair in task.launch.tiles:
        if pair is None or pair not in task.launch.grid or pair[1] not in case.kwargs:
            tiles.append(None)
        else:
            tiles.append((int(case.kwargs[pair[1]]), task.launch.grid.index(pair)))
    return tiles


def draw_run(task: TaskSpec, case: CaseData, run: dict) -> tuple[bytes, str] | None:
    """A picture of the first output of a failing call that has wrong, unwritten or out-of-bounds elements."""
    from grader.judge import pictures

    outputs = run.get("outputs")
    if not isinstance(outputs, list) or len(outputs) != len(task.outputs):
        return None
    allocs = run.get("allocs") or []
    for spec, got, ref in zip(task.outputs, outputs, case.expected):
        if got.get("kind") != "tensor" or not spec.shape_ok(tuple(got["tensor"].shape), tuple(ref.shape)):
            continue
        t = got["tensor"].reshape(ref.shape)
        poison = guards.bits_view(t) == guards.poison_bits(t.dtype)
        bad, _ = bad_values(spec, t, ref)
        state = pictures.classify(t, bad, poison)
        before, after = [], []
        alloc = got.get("alloc")
        if isinstance(alloc, int) and 0 <= alloc < len(allocs):
            positions, offset, n_span = guard_damage(allocs[alloc])
            before = [int(p) - offset for p in positions if p < offset]
            after = [int(p) - offset - n_span for p in positions if p >= offset + n_span]
        if not (state != pictures.OK).any() and not before and not after:
            continue
        title = f"{task.id} / {case.id}: {spec.name} {list(t.shape)}"
        return pictures.render(spec.name, title, state, before, after, tiles_of(task, case, t.dim()))
    return None
