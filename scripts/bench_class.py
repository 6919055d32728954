"""Class-scale timing: the demo class copied to N students, graded with `batch` rules, next to a serial run.

    python scripts/bench_class.py --students 200 [--serial-students 5] [--device cuda] [--workers N]
    python scripts/bench_class.py --students 12 --serial-students 0 --provenance both --repeats 2 --no-speed-tier
        # the provenance check's cost: off, on, off, on (alternating, so that what else the machine does falls on
        # both settings alike), each run cold, and the ratio of each pair

The parallel run grades all N students; the serial run (one worker) grades the first few copies and its time
is scaled to N, since a serial pass over a whole class would not fit in one sitting (`--students 0` runs the
serial part alone). Both start from a cold Triton cache (the grader's shared one too, grader/worker/tritoncache.py).
Triton's cache is keyed by a kernel's source, so copies of one file would compile once: each copy's kernels get a
comment naming the copy, and every student's kernels compile anew, as in a real class of different files
(`--identical` keeps the copies byte for byte).
"""

from __future__ import annotations

import argparse
import ast
import cProfile
import dataclasses
import functools
import json
import os
import pstats
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from grader.config import ROOT, SandboxConfig, discover_tasks, load_config  # noqa: E402
from grader.course.batch import GRADESCOPE_STAFF, run_batch  # noqa: E402
from grader.pipeline.grading import grade_jobs, resolve_device  # noqa: E402
from grader.pipeline.result import PROFILE_ENV  # noqa: E402
from scripts.bench_floor import cpu_times, floor  # noqa: E402


def tag_kernels(source: str, tag: str) -> str:
    """The source with a comment line `# tag` opening the body of every function decorated with a `jit`."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source
    lines = source.splitlines(keepends=True)
    starts = sorted({(node.body[0].lineno, node.body[0].col_offset) for node in ast.walk(tree)
                     if isinstance(node, ast.FunctionDef) and "jit" in ast.unparse(node.decorator_list)
                     if node.body[0].lineno > node.lineno}, reverse=True)
    for lineno, col in starts:
        lines.insert(lineno - 1, " " * col + f"# {tag}\n")
    return "".join(lines)


def synthetic_class(n: int, dest: Path, identical: bool = False) -> Path:
    demo = sorted(p for p in (ROOT / "submissions").iterdir() if p.is_dir())
    for i in range(n):
        student = dest / f"student{i:03d}"
        shutil.copytree(demo[i % len(demo)], student)
        for f in [] if identical else student.glob("*.py"):
            f.write_text(tag_kernels(f.read_text(), f"copy {i}"))
    return dest


def read_staff(results: Path) -> list[tuple[str, dict]]:
    """Each graded job's staff section ("student/task", staff), read once for the reports below (not a student's
    gradescope.staff.json, which is no job: counted as one, it made every stage's figure per file too small)."""
    return [(f"{path.parent.name}/{path.name.split('.')[0]}", json.loads(path.read_text()).get("staff", {}))
            for path in results.glob("*/*.staff.json") if path.name != GRADESCOPE_STAFF]


def quiet_report(staffs: list[tuple[str, dict]], stall_s: float) -> None:
    """How close right workers came to the stall limit: the longest stretch each job's workers went without a
    progress report (staff JSON `worker_quiet_s`), over the jobs whose workers were not stopped."""
    quiet, stopped = [], 0
    for name, staff in staffs:
        if "stopped" in staff.get("worker_exit", ""):
            stopped += 1
        elif staff.get("worker_quiet_s"):
            quiet.append((staff["worker_quiet_s"], name))
    if quiet:
        quiet.sort()
        print(f"quiet   : longest wait for a progress report, jobs not stopped: max {quiet[-1][0]:.1f} s "
              f"({quiet[-1][1]}), 99th percentile {quiet[int(0.99 * (len(quiet) - 1))][0]:.1f} s, median "
              f"{quiet[len(quiet) // 2][0]:.1f} s; stall limit {stall_s:g} s; {stopped} job(s) stopped", flush=True)


STAGE_ROWS = (
    ("static", "static check (trusted side)"),
    ("oracle", "inputs and oracle (trusted side, a task's share per file)"),
    ("load", "worker: reading inputs, sandbox, start-up"),
    ("load_inputs", "of which the cases' inputs read (every worker)"),
    ("load_sandbox", "of which the sandbox (every worker)"),
    ("load_cuda", "of which the CUDA context (every worker)"),
    ("import", "worker: importing the submission"),
    ("compile", "worker: Triton compilations (cases and timing), each in full, side by side ones too"),
    ("compile_wall", "of which the workers' wall (grader/worker/parallel_compile.py: the rest overlapped)"),
    ("cases", "worker: running the cases (op audit included; compile and waits excluded)"),
    ("address", "worker: the address check's interpreted re-run (CUDA)"),
    ("records", "worker: sending the records"),
    ("twin", "worker: the provenance check's call of each case's twin"),
    ("timing", "worker: speed tests (warm-up and timed calls; compile excluded)"),
    ("timing_warm_baseline", "of which the baseline's warm-up (torch.compile's tracing, its kernels' autotuning)"),
    ("timing_warm_submission", "of which the submission's warm-up (its autotuner's benchmarks)"),
    ("timing_timed", "of which the timed calls, the GPU the worker's alone"),
    ("timing_load", "the timing worker's start-up (of load)"),
    ("load_baseline", "of which its staff baselines loaded"),
    ("timing_load_inputs", "of which its inputs read"),
    ("timing_load_sandbox", "of which its sandbox"),
    ("timing_load_cuda", "of which its CUDA context"),
    ("timing_import", "the timing worker's import (of import)"),
    ("judge", "judge (pytest suite, value checks)"),
)


def stage_report(staffs: list[tuple[str, dict]]) -> dict[str, float]:
    """Seconds per graded file by stage, summed from the staff JSON files (`staff.stages`), and the workers'
    wall time beside them: where a class's core-seconds go. Returns the per-file seconds by stage."""
    totals: dict[str, float] = {}
    files = reused = 0
    for _, staff in staffs:
        if staff.get("reuses"):
            reused += 1
            continue
        files += 1
        for name, value in (staff.get("stages") or {}).items():
            if isinstance(value, (int, float)):
                totals[name] = totals.get(name, 0.0) + value
    if not files:
        return {}
    logs = [str(staff.get("worker_log", "")) for _, staff in staffs]
    gate = sorted((line for log in logs for line in log.splitlines() if line.startswith("gate:")),
                  key=lambda ln: float(ln.rsplit("(at ", 1)[-1].rstrip(")")))
    reloaded = sum("Failed to load artifact" in log for log in logs)
    stopped = sum("the grader stopped the worker" in str(staff.get("worker_exit", "")) for _, staff in staffs)
    if stopped:  # grader/isolation/runner.py stop_timing: every speed test's case had failed
        print(f"timers  : {stopped} timing worker(s) stopped once the job's speed tests were decided", flush=True)
    if reloaded:  # Inductor dropped a cached graph of the staff run and compiled the baseline again
        print(f"inductor: {reloaded} job(s) compiled a baseline again (\"Failed to load artifact\")", flush=True)
    if gate:  # the GPU gate's long waits and holds, in time order (grader/protocol GpuGate)
        print(f"gate    : {len(gate)} long waits or holds; the first 40:\n  " + "\n  ".join(gate[:40]), flush=True)
    print(f"stages  : seconds per file, over {files} graded files ({reused} identical copies reused)", flush=True)
    for key, words in STAGE_ROWS:
        print(f"  {key:<22} {totals.get(key, 0.0) / files:8.2f}  {words}", flush=True)
    print(f"  {'timing_compile':<22} {totals.get('timing_compile', 0.0) / files:8.2f}  of compile, the timing "
          "workers' (a kernel the case workers did not compile for them, a baseline's; cache hits too)", flush=True)
    for key in ("case_worker_wall", "timing_worker_wall", "gate_wait"):
        print(f"  {key:<22} {totals.get(key, 0.0) / files:8.2f}  (wall seconds, not core-seconds)", flush=True)
    print(f"  gate_bypassed  {totals.get('gate_bypassed', 0.0):8.0f}  waits at the GPU gate that ran out (in all)",
          flush=True)
    print(f"  parallel_comp. {totals.get('parallel_compiles', 0.0):8.0f}  compilations made side by side in child "
          "processes (in all)", flush=True)
    print(f"  parallel_fail. {totals.get('parallel_failed', 0.0):8.0f}  of those, children that failed (the worker "
          "compiled them again)", flush=True)
    print(f"  gate_idle_rel. {totals.get('gate_idle_releases', 0.0):8.0f}  shared holds let go while a call idled "
          "(in all)", flush=True)
    return {key: totals.get(key, 0.0) / files for key, _ in STAGE_ROWS}


def timed(n: int, workers: int, device: str, hw, tasks, cfg, identical: bool, profile: int = 0,
          profile_judge: int = 0, backend: str = "local", keep: Path | None = None,
          ) -> tuple[float, float, dict[str, float]]:
    """Grade `n` students' copies cold. `keep`: the grader's own caches (the shared Triton cache, the staff's timing
    runs) are there and stay, as on a course's box after its first run; the students' kernels still compile anew."""
    work = Path(tempfile.mkdtemp(prefix="bench-class-"))
    os.environ["TRITON_CACHE_DIR"] = str(work / "triton-cache")
    own = keep or work
    os.environ["GRADER_TRITON_SHARED"] = str(own / "triton-shared")  # the grader's shared cache starts cold too
    os.environ["GRADER_STAFF_TIMING"] = str(own / "staff-timing")  # and so do the staff's timing runs
    root = synthetic_class(n, work / "subs", identical)
    if profile_judge:  # every job's judging, profiled in the process that judges it (grader/pipeline/result.py)
        (work / "judge-profiles").mkdir()
        os.environ[PROFILE_ENV] = str(work / "judge-profiles")
    before = cpu_times()
    prof = cProfile.Profile() if profile else None
    start = time.perf_counter()
    if prof:
        prof.enable()
    done: list[float] = []  # when each job's full result came in (run_batch shows a line per result)
    first: list[float] = []  # and its first one (its cases judged, its speed tests not timed yet)

    def show(line: str) -> None:
        if RESULT_LINE.match(line):
            (first if "not timed yet" in line else done).append(time.perf_counter() - start)

    run_batch(root, hw, tasks, cfg, device, work / "results", workers,
              grade=functools.partial(grade_jobs, backend=backend), show=show)
    if prof:
        prof.disable()
    seconds = time.perf_counter() - start
    after = cpu_times()
    busy = float("nan")
    if before and after:  # is the machine's CPU the limit? (everything running on it counts)
        busy, total = after[0] - before[0], after[1] - before[1]
        print(f"cpu     : {busy:.0f} core-seconds busy of {total:.0f} ({100 * busy / max(total, 1e-9):.0f}%), "
              f"{busy / max(seconds, 1e-9):.1f} cores on average", flush=True)
    if done:  # a long tail (one slow job at the end) shows as a late 100% after an early 90%
        print("results : " + ", ".join(f"{q}% in {done[min(len(done) - 1, len(done) * q // 100)]:.0f} s"
                                        for q in (25, 50, 75, 90, 100))
              + f"; the first at {min(first + done):.1f} s" + (f" ({len(first)} first passes)" if first else ""),
              flush=True)
    staffs = read_staff(work / "results")
    quiet_report(staffs, cfg.stall_s.get(device, 0.0))
    stages = stage_report(staffs)
    if prof:  # this process only: the oracle, the judge (with grading.judges 0) and the orchestration
        for key in ("cumulative", "tottime"):
            pstats.Stats(prof).sort_stats(key).print_stats(profile)
    profiles = sorted(str(p) for p in (work / "judge-profiles").glob("*.prof"))
    if profiles:
        os.environ.pop(PROFILE_ENV, None)
        print(f"judge   : {len(profiles)} jobs' judging, profiled", flush=True)
        for key in ("cumulative", "tottime"):
            pstats.Stats(*profiles).sort_stats(key).print_stats(profile_judge)
    shutil.rmtree(work, ignore_errors=True)
    marks = {"first": min(first + done, default=float("nan")), "all": max(done, default=float("nan"))}
    return seconds, busy, stages, marks


RESULT_LINE = re.compile(r"^student\d+/\S+: [\d.e+-]+ / ")
"""A job's line in run_batch's output (grader/results/report.py `one_line`): a student of `synthetic_class`."""


def no_speed_tests(tasks: dict) -> dict:
    """The tasks without their speed tests."""
    return {k: dataclasses.replace(t, perf=[]) for k, t in tasks.items()}


def bare(cfg, tasks: dict) -> tuple:
    """The pipeline with every check off: no address check, write check, provenance check, GPU compile check
    (CPU only) or sandbox, and no speed tests."""
    return (dataclasses.replace(cfg, bounds=False, writes=False, provenance=False, gpu_compile=False,
                                sandbox=SandboxConfig(enabled=False)), no_speed_tests(tasks))


COMPARE_ROWS = ("floor", "bare", "notier", "full", "kept", "latency")


def compare(n: int, workers: int, device: str, hw, tasks, cfg, identical: bool,
            rows_wanted: tuple[str, ...] = COMPARE_ROWS) -> None:
    """The cost table, in one run, each setting cold: the compile floor (scripts/bench_floor.py), the bare
    pipeline, every check on without the speed tests (`notier`), every check on (`full`), then again with the
    staff's timing runs and the shared cache that `full` made (`kept`, as on a course's box); their ratios, the
    time to the first result; then one student's files and one task-12 file alone on the idle machine, every
    check on, cold and with the grader's own caches kept. `rows_wanted`: which of these (COMPARE_ROWS) to run (an
    older grader measured beside a newer one needs only its own rows: the floor compiles and grades nothing)."""
    work = Path(tempfile.mkdtemp(prefix="bench-compare-"))
    root = synthetic_class(n, work / "subs", identical)
    os.environ["TRITON_CACHE_DIR"] = str(work / "triton-cache")
    rows = {}
    if "floor" in rows_wanted:
        rows["floor"] = floor(root, {t: tasks[t] for t in hw.tasks if t in tasks}, cfg, device, workers)
    files = sum(1 for _ in root.glob("*/*.py"))  # graded; the floor counts the files whose kernels compile
    shutil.rmtree(work, ignore_errors=True)
    kept = Path(tempfile.mkdtemp(prefix="bench-kept-"))  # the full row's staff runs and shared cache, for `kept`
    for name, (c, t) in (("bare", bare(cfg, tasks)), ("notier", (cfg, no_speed_tests(tasks))), ("full", (cfg, tasks)),
                         ("kept", (cfg, tasks))):
        if name not in rows_wanted:
            continue
        print(f"--- {name}", flush=True)
        wall, busy, _, marks = timed(n, workers, device, hw, t, c, identical,
                                     keep=kept if name in ("full", "kept") else None)
        rows[name] = {"wall": wall, "busy": busy, **marks}
    shutil.rmtree(kept, ignore_errors=True)
    print(f"compare : {n} students, {files} files, {device}", flush=True)
    print(f"  {'':6} {'wall s':>8} {'core-s':>8} {'core-s/file':>12} {'first s':>8} {'last s':>8}", flush=True)
    for name, row in rows.items():
        print(f"  {name:6} {row['wall']:8.1f} {row['busy']:8.0f} {row['busy'] / max(1, row.get('files', files)):12.2f} "
              f"{row.get('first', float('nan')):8.1f} {row.get('all', float('nan')):8.1f}", flush=True)
    full, base, low = rows.get("full"), rows.get("bare"), rows.get("floor")
    if full and base:
        print(f"  full / bare : wall {full['wall'] / base['wall']:.2f}x, core-s {full['busy'] / base['busy']:.2f}x "
              "(goal <= 1.4)", flush=True)
    tier = rows.get("notier")
    if tier and base:
        print(f"  notier / bare: wall {tier['wall'] / base['wall']:.2f}x, core-s {tier['busy'] / base['busy']:.2f}x "
              "(the checks without the speed tier)", flush=True)
    for name, words in (("full", "cold: the staff's timing runs in it"), ("kept", "the staff's runs kept")):
        if tier and rows.get(name):
            print(f"  {name} / notier: wall {rows[name]['wall'] / tier['wall']:.2f}x, core-s "
                  f"{rows[name]['busy'] / tier['busy']:.2f}x (the speed tier's cost, {words}; goal: core-s <= 1.15)",
                  flush=True)
    if full and low:
        scaled = low["busy"] / max(1, low["files"]) * files  # the floor leaves out files whose kernels fail
        print(f"  full / floor: wall {full['wall'] / low['wall']:.2f}x, core-s {full['busy'] / scaled:.2f}x "
              f"(goal <= 1.8; the floor's core-seconds per file times the {files} files graded)", flush=True)
    if full:
        print(f"  first result: {full['first']:.1f} s with every check on (goal <= 30 s)", flush=True)
    if "latency" not in rows_wanted:
        return
    # Each latency twice: cold (the staff's timing runs and the grader's shared cache made in the run), then with
    # those kept, as on a course's box after its first run (the student's kernels compile anew either way); the
    # first result is the file's verdict on its cases, before its speed tests.
    kept = Path(tempfile.mkdtemp(prefix="bench-kept-"))
    twelve = [t for t in hw.tasks if t.startswith("12_")]
    for what, subset, goal in ((f"one student's {sum(1 for t in hw.tasks if t in tasks)} files", hw, 15),
                               *((f"one {t} file", dataclasses.replace(hw, tasks={t: hw.tasks[t]}), 10)
                                 for t in twelve[:1])):
        shutil.rmtree(kept, ignore_errors=True)
        kept.mkdir()
        for when in ("cold", "staff's runs kept"):  # the first run fills `kept`, the second finds it
            wall, _, _, marks = timed(1, workers, device, subset, tasks, cfg, identical, keep=kept)
            print(f"latency : {what}, every check on, {when}: {wall:.1f} s, its first result at "
                  f"{marks['first']:.1f} s (goal <= {goal} s)", flush=True)
    shutil.rmtree(kept, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=200)
    parser.add_argument("--serial-students", type=int, default=5)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--homework", default="hw4_int8")
    parser.add_argument("--backend", choices=["local", "ray"], default="local",
                        help="ray: the parallel run's shards as tasks of a local Ray instance (one per core)")
    parser.add_argument("--judges", type=int, default=None, help="override config.yaml's grading.judges")
    parser.add_argument("--identical", action="store_true", help="copies share kernel sources (and compilations)")
    parser.add_argument("--no-speed-tier", action="store_true", help="grade without the tasks' speed tests")
    parser.add_argument("--compare", action="store_true",
                        help="the compile floor, the bare pipeline and every check on, in one run")
    parser.add_argument("--rows", default=",".join(COMPARE_ROWS),
                        help=f"with --compare: which rows, of {','.join(COMPARE_ROWS)}")
    parser.add_argument("--provenance", choices=["on", "off", "both"], default="on",
                        help="the provenance check (grading.provenance); both: the class without it, then with it, "
                             "and the ratio of busy core-seconds")
    parser.add_argument("--repeats", type=int, default=1,
                        help="with --provenance both: this many off/on pairs, alternating")
    parser.add_argument("--profile-judge", type=int, default=0, metavar="N",
                        help="profile every job's judging (in the judge processes) and print the N costliest functions")
    parser.add_argument("--profile", type=int, default=0, metavar="N",
                        help="profile this process in the parallel run and print its N costliest functions")
    args = parser.parse_args()
    tasks, _ = discover_tasks()
    cfg = load_config(tasks=tasks)
    tasks = cfg.course_tasks(tasks)
    if args.no_speed_tier:  # after the course's points are checked against the tasks'
        tasks = no_speed_tests(tasks)
    if args.judges is not None:
        cfg = dataclasses.replace(cfg, judges=args.judges)
    hw = cfg.homeworks[args.homework]
    device = resolve_device(args.device)
    demo = sorted(p for p in (ROOT / "submissions").iterdir() if p.is_dir())
    files = sum(len(list(demo[i % len(demo)].glob("*.py"))) for i in range(args.students))
    serial = None
    if args.serial_students:  # first: it is the short one
        serial = timed(args.serial_students, 1, device, hw, tasks, cfg, args.identical)[0] / args.serial_students
        print(f"serial  : {args.serial_students} students, one worker: {serial:.1f} s a student, "
              f"{serial * 200:.0f} s for 200", flush=True)
    if not args.students:
        return 0
    if args.compare:
        compare(args.students, args.workers, device, hw, tasks, cfg, args.identical,
                tuple(r for r in args.rows.split(",") if r in COMPARE_ROWS))
        return 0
    settings = [args.provenance == "on"] if args.provenance != "both" else [False, True] * max(1, args.repeats)
    runs: list[tuple[bool, tuple[float, float, dict[str, float]]]] = []
    for setting in settings:
        print(f"--- provenance check {'on' if setting else 'off'}", flush=True)
        runs.append((setting, timed(args.students, args.workers, device, hw, tasks,
                                    dataclasses.replace(cfg, provenance=setting), args.identical, args.profile,
                                    args.profile_judge, args.backend)))
    parallel = runs[-1][1][0]
    if args.provenance == "both":
        pairs = [(runs[i][1], runs[i + 1][1]) for i in range(0, len(runs), 2)]
        for k, ((wall0, busy0, _, _), (wall1, busy1, _, _)) in enumerate(pairs, 1):
            print(f"provenance pair {k}: busy core-seconds {busy0:.0f} -> {busy1:.0f} ({busy1 / busy0:.3f}x), wall "
                  f"{wall0:.1f} -> {wall1:.1f} s ({wall1 / wall0:.3f}x), {files} files", flush=True)
        busy = [sum(p[i][1] for p in pairs) for i in (0, 1)]
        print(f"provenance: busy core-seconds over {len(pairs)} pair(s) {busy[0]:.0f} -> {busy[1]:.0f} "
              f"({busy[1] / busy[0]:.3f}x)", flush=True)
        keys = [key for key, _ in STAGE_ROWS]
        mean = [{key: sum(p[i][2].get(key, 0.0) for p in pairs) / len(pairs) for key in keys} for i in (0, 1)]
        total = [sum(m.values()) for m in mean]
        print(f"provenance: stage seconds per file, mean of the pairs, off -> on (sum {total[0]:.2f} -> {total[1]:.2f},"
              f" {total[1] / max(total[0], 1e-9):.3f}x):", flush=True)
        for key in keys:
            print(f"  {key:<14} {mean[0][key]:8.2f} -> {mean[1][key]:8.2f}  ({mean[1][key] - mean[0][key]:+.2f})",
                  flush=True)
    kind = ", identical copies" if args.identical else ""
    print(f"parallel: {args.students} students ({files} files{kind}) in {parallel:.1f} s on {device}, {args.backend}"
          f" (judges: {'auto' if cfg.judges < 0 else cfg.judges})")
    if serial:
        print(f"speed-up: about {serial * args.students / parallel:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
