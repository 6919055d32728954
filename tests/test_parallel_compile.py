"""A CUDA worker compiles an autotuned kernel's configs side by side, each in a child process, at a case's first
launch (grader/worker/parallel_compile.py). On the CPU: which launches it asks for, through Triton's real
Autotuner over a stand-in kernel, and the fork pool's contract. With CUDA (the device box): each config compiles
in a child, the worker loads the binaries from the cache, and the launches that follow compile nothing."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import torch
import triton

from grader.worker import parallel_compile
from grader.worker.parallel_compile import ForkPool, ParallelCompile, most_at_once


def _body(x, n, BLOCK):  # noqa: N803 - the stand-in's Python function (what Autotuner reads names from)
    pass


class StandIn:
    """What an Autotuner wraps, as far as it looks: `fn`, `arg_names`, `run`."""

    def __init__(self, failing: int | None = None) -> None:
        self.fn = _body
        self.arg_names = ["x", "n"]
        self.calls: list[tuple[tuple, dict]] = []
        self.failing = failing

    def run(self, *args, **kwargs):
        self.calls.append((args, kwargs))
        if kwargs.get("warmup") and kwargs.get("BLOCK") == self.failing:
            raise RuntimeError("this config does not compile")
        return "launched"


CONFIGS = [triton.Config({"BLOCK": b}, num_warps=w) for b, w in ((16, 1), (32, 2), (64, 4), (128, 4))]


def _tuner(stand_in: StandIn):
    tuner = triton.autotune(configs=list(CONFIGS), key=[])(stand_in)
    tuner.configs = [CONFIGS[0]]  # as run_case forces one config
    return tuner


@pytest.fixture
def restore_autotuner():
    from triton.runtime.autotuner import Autotuner

    run = Autotuner.run
    yield
    Autotuner.run = run


def test_an_armed_launch_asks_for_every_config_first_and_an_unarmed_one_for_none(restore_autotuner):
    stand_in = StandIn()
    tuner = _tuner(stand_in)
    waits = []
    pc = ParallelCompile(4, on_wait=lambda work: (waits.append(1), work())[1])
    pc.install([(tuner, CONFIGS)])
    x = object()
    pc.armed = True
    assert tuner.run(x, 5, grid=(1,), warmup=False) == "launched"
    warm = [kw for _, kw in stand_in.calls if kw.get("warmup")]
    assert [kw["BLOCK"] for kw in warm] == [16, 32, 64, 128]
    assert [kw["num_warps"] for kw in warm] == [1, 2, 4, 4]
    assert all(args == (x, 5) and kw["grid"] == (1,) for args, kw in stand_in.calls)
    launched = [kw for _, kw in stand_in.calls if not kw.get("warmup")]
    assert len(launched) == 1 and launched[0]["BLOCK"] == 16  # the forced config's own launch, once
    assert waits == [1]  # the gate let go once for the whole batch
    stand_in.calls.clear()
    pc.armed = False
    tuner.run(x, 5, grid=(1,), warmup=False)
    assert [kw.get("warmup") for _, kw in stand_in.calls] == [False]


def test_a_config_that_fails_to_compile_is_left_to_its_own_launch(restore_autotuner):
    stand_in = StandIn(failing=32)
    tuner = _tuner(stand_in)
    pc = ParallelCompile(4)
    pc.install([(tuner, CONFIGS)])
    pc.armed = True
    assert tuner.run(object(), 5, grid=(1,), warmup=False) == "launched"
    assert [kw["BLOCK"] for _, kw in stand_in.calls if kw.get("warmup")] == [16, 32, 64, 128]


def test_one_thread_or_one_config_compiles_nothing_ahead(restore_autotuner):
    stand_in = StandIn()
    tuner = _tuner(stand_in)
    pc = ParallelCompile(1)  # grading.compile_processes: 1
    pc.install([(tuner, CONFIGS)])
    pc.armed = True
    tuner.run(object(), 5, grid=(1,), warmup=False)
    assert [kw.get("warmup") for _, kw in stand_in.calls] == [False]
    assert most_at_once(0, 1) == 1 and most_at_once(3, 8) == 3 and 1 <= most_at_once(0, 64) <= 8


def test_a_timing_worker_compiles_what_the_autotuners_pruning_keeps(restore_autotuner):
    stand_in = StandIn()
    seen = []

    def keep_two(configs, nargs, **kwargs):
        seen.append(nargs)
        return configs[1:3]

    tuner = triton.autotune(configs=list(CONFIGS), key=[], prune_configs_by={"early_config_prune": keep_two})(stand_in)
    pc = ParallelCompile(4)
    pc.install([(tuner, CONFIGS)], forced=False)
    x = object()
    with pc.arming():
        pc.compile_configs(tuner, (x, 5), {"grid": (1,), "warmup": False})
    assert pc.armed is False
    assert [kw["BLOCK"] for _, kw in stand_in.calls] == [32, 64]
    assert seen == [{"x": x, "n": 5}] and tuner.nargs is None


def _compile_into(cache: Path, name: str, crash: bool = False):
    """A stand-in for Triton's compilation: the binary from the cache if it is there, else made (slowly) and put
    there; `crash`: a child dies instead."""
    worker = os.getpid()

    def compile_():
        entry = cache / name
        if entry.exists():
            return ("loaded", entry.read_text(), os.getpid(), parallel_compile.in_pool())
        if crash and os.getpid() != worker:
            os._exit(70)
        time.sleep(0.3)
        entry.write_text(str(os.getpid()))
        return ("compiled", str(os.getpid()), os.getpid(), parallel_compile.in_pool())

    return compile_


def test_the_fork_pool_compiles_in_children_and_loads_their_binaries(tmp_path):
    pool = ForkPool(3)
    start = time.perf_counter()
    futures = [pool.submit(_compile_into(tmp_path, f"k{i}")) for i in range(3)]
    pool.submitted()
    results = [f.result(timeout=30) for f in futures]
    wall = time.perf_counter() - start
    pool.shutdown()
    me = str(os.getpid())
    assert all(r[0] == "loaded" and r[1] != me and r[2] == os.getpid() and r[3] for r in results), results
    assert len({r[1] for r in results}) == 3  # three children, one compilation each
    assert wall < 0.85, wall  # side by side: three compilations of 0.3 s in about one's time
    assert pool.children == 3 and pool.failed == 0 and pool.seconds >= 0.9


def test_a_child_that_dies_leaves_the_compilation_to_the_worker_and_the_rest_waits_for_its_turn(tmp_path):
    pool = ForkPool(2)
    futures = [pool.submit(_compile_into(tmp_path, "a", crash=True)), pool.submit(_compile_into(tmp_path, "b")),
               pool.submit(_compile_into(tmp_path, "c"))]  # the third is past `most`: no child
    assert not futures[2].done()  # nothing compiles in the worker before every fork is made
    pool.submitted()
    crashed, forked, beyond = (f.result(timeout=30) for f in futures)
    pool.shutdown()
    assert pool.children == 2 and pool.failed == 1
    assert crashed[0] == "compiled" and crashed[2] == os.getpid()  # made again by the worker itself
    assert forked[0] == "loaded" and forked[1] != str(os.getpid())
    assert beyond[0] == "compiled" and beyond[2] == os.getpid()


def test_compile_processes_is_a_count_in_a_worker_job():
    from grader.protocol import WorkerJob

    job = WorkerJob(run_id="r", submission="s.py", entry="f", kernels=[], device="cuda", inputs={})
    assert WorkerJob.from_json(job.to_json()).compile_processes == 0
    for bad in ('"8"', "-1", "true", "1.5"):
        with pytest.raises(ValueError, match="compile_processes"):
            WorkerJob.from_json(job.to_json().replace('"compile_processes": 0', f'"compile_processes": {bad}'))


def _counting(log: Path):
    """triton.compiler.compile, writing a line per call: the process, and whether it found the cache entry."""
    import triton.compiler

    orig = triton.compiler.compile

    def counted(*args, **kwargs):
        start = time.perf_counter()
        out = orig(*args, **kwargs)
        with open(log, "a") as fh:
            fh.write(f"{os.getpid()} {time.perf_counter() - start:.3f}\n")
        return out

    return orig, counted


def _calls(log: Path) -> list[tuple[int, float]]:
    return [(int(p), float(s)) for p, s in (line.split() for line in log.read_text().splitlines())] \
        if log.exists() else []


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_the_configs_compile_in_children_and_their_launches_compile_nothing(restore_autotuner, tmp_path,
                                                                                 monkeypatch):
    import triton.compiler
    import triton.language as tl

    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))

    @triton.autotune(configs=[triton.Config({"BLOCK": b}, num_warps=w) for b, w in
                              ((64, 1), (128, 2), (256, 4), (512, 4), (1024, 8))], key=[])
    @triton.jit
    def add_one(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1, mask=offs < n)

    configs = list(add_one.configs)
    log = tmp_path / "compiles.log"
    orig, triton.compiler.compile = _counting(log)
    try:
        pc = ParallelCompile(4)
        pc.install([(add_one, configs)])
        x = torch.arange(1000, device="cuda", dtype=torch.float32)
        for c, config in enumerate(configs):
            add_one.configs = [config]
            pc.armed = c == 0
            out = torch.empty_like(x)
            add_one[lambda meta: (triton.cdiv(1000, meta["BLOCK"]),)](x, out, 1000)
            torch.testing.assert_close(out, x + 1)
            if c == 0:
                calls = _calls(log)
                children = [p for p, _ in calls if p != os.getpid()]
                assert len(children) == 4 and len(set(children)) == 4, calls  # four children, one config each
                assert len([p for p, _ in calls if p == os.getpid()]) == len(configs), calls  # and the fifth here
        assert len(_calls(log)) == len(configs) + 4  # the later configs' launches found their binaries
        assert pc.children == 4 and pc.failed == 0
    finally:
        triton.compiler.compile = orig


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_a_timing_workers_autotuner_benchmarks_binaries_compiled_side_by_side(restore_autotuner, tmp_path,
                                                                                  monkeypatch):
    import triton.compiler
    import triton.language as tl

    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))

    @triton.autotune(configs=[triton.Config({"BLOCK": b}, num_warps=w) for b, w in
                              ((64, 1), (128, 2), (256, 4), (512, 4))], key=["n"],
                     prune_configs_by={"early_config_prune": lambda configs, nargs, **kw: configs[1:]})
    @triton.jit
    def times_two(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)

    log = tmp_path / "compiles.log"
    orig, triton.compiler.compile = _counting(log)
    try:
        pc = ParallelCompile(4)
        pc.install([(times_two, list(times_two.configs))], forced=False)
        x = torch.arange(3000, device="cuda", dtype=torch.float32)
        out = torch.empty_like(x)
        with pc.arming():
            times_two[lambda meta: (triton.cdiv(3000, meta["BLOCK"]),)](x, out, 3000)
        torch.testing.assert_close(out, x * 2)
        calls = _calls(log)
        assert len([p for p, _ in calls if p != os.getpid()]) == 3, calls  # the three the pruning keeps
        assert len([p for p, _ in calls if p == os.getpid()]) == 3, calls  # loaded, and benchmarked as they are
    finally:
        triton.compiler.compile = orig


def test_grading_compile_processes_reaches_every_worker_job(tmp_path):
    """config.yaml's `grading.compile_processes` (auto = 0) is what each worker of a grading run is told."""
    from grader import protocol
    from grader.config import ROOT, ConfigError, load_config, load_task
    from grader.isolation.runner import worker_job
    from grader.pipeline import grading
    from grader.pipeline.grading import Job

    base = (ROOT / "config.yaml").read_text()
    assert "  compile_processes: auto " in base and load_config().compile_processes == 0
    (tmp_path / "three.yaml").write_text(base.replace("  compile_processes: auto ", "  compile_processes: 3 ", 1))
    cfg = load_config(tmp_path / "three.yaml")
    assert cfg.compile_processes == 3
    (tmp_path / "bad.yaml").write_text(base.replace("  compile_processes: auto ", "  compile_processes: -2 ", 1))
    with pytest.raises(ConfigError, match="compile_processes"):
        load_config(tmp_path / "bad.yaml")
    told = []

    def runner(folders, shard, spec, cases):
        told.append(worker_job(folders, f"probe{len(told)}", spec, cases).compile_processes)
        return grading.run_shard(folders, shard, spec, cases)

    task = load_task(ROOT / "tasks" / "puzzle01_constant_add")
    (tmp_path / "tree").mkdir()
    result = grading.GradingRun([Job(task, task.folder / "solution.py", "alice")], cfg, "cpu",
                                protocol.GradingTree(tmp_path / "tree"), 1, 0, runner).grade()[0]
    assert result.score == result.max_score and told and set(told) == {3}
