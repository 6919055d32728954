"""Command line: `python -m grader grade | grade-dir | batch | selftest | tasks | release | gradescope |
similarity`."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from grader.config import ROOT, ConfigError, discover_tasks, load_config
from grader.gates.intake import IntakeError, read_submitted, shown, student_id, task_files
from grader.gates.notebook import Notebook, NotebookFolder, is_notebook
from grader.results import escape, report

if TYPE_CHECKING:
    from grader.pipeline.grading import TaskResult

SOME_FAILED = 3
"""The exit code of `batch`, `grade-dir` and `similarity` when every report was written but some students' files
could not be read or graded (a link, an unreadable notebook, a file the grader could not judge): each such
student's result says what. 0: everyone's files were read and graded (whatever their scores); 1: the grader itself
failed (a traceback); 2: a usage or configuration error (`grade` keeps its own: 0 full marks, 1 not)."""

CHECKS = "checks"
"""Where `grade` and `grade-dir` write by default: a folder of their own under the results folder, never the
files `batch` keeps for a class (its ledger decides those)."""


def _batch_owns(folder: Path) -> bool:
    """True (and a message on stderr) when `folder` holds a class's records, which only `batch` writes."""
    if (folder / "ledger.sqlite").exists():
        print(f"{folder} holds a class's records (ledger.sqlite): only `batch` writes there, so that its gradebook, "
              "results.json and student files agree; grade into another folder (--out, --json)", file=sys.stderr)
        return True
    return False


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", choices=["auto", "cuda", "cpu"], default=None,
                   help="where kernels run (default: config.yaml's grading.device, normally auto)")
    p.add_argument("--config", type=Path, default=ROOT / "config.yaml", help="the course configuration")
    p.add_argument("--workers", type=int, default=0, help="submissions graded at once (0: config.yaml / one per core)")
    p.add_argument("--staff", action="store_true", help="also print tracebacks and worker logs")
    p.add_argument("--backend", choices=["local", "ray"], default="local",
                   help="where workers run: processes here, or tasks on a Ray cluster")
    p.add_argument("--address", default=None, help="with --backend ray: the cluster (default: a local Ray instance)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m grader", description="Autograder for Triton kernel homework.")
    sub = parser.add_subparsers(dest="command", required=True)
    g = sub.add_parser("grade", help="grade one file for one task")
    g.add_argument("--task", required=True, help="task id, e.g. 10_quantize_global_int8")
    g.add_argument("file", type=Path, help="the task's .py, or a notebook (.ipynb) that defines it")
    g.add_argument("--json", type=Path, help="write the student result here (and the staff one beside it)")
    g.add_argument("--student", default=None, help="name recorded in the result (default: the file's folder)")
    _common(g)
    d = sub.add_parser("grade-dir", help="grade every <task_id>.py (or a notebook's tasks) in student folders")
    d.add_argument("folders", type=Path, nargs="+", metavar="folder")
    d.add_argument("--out", type=Path, default=None,
                   help="results folder (default: config.yaml's results_dir/checks; never a folder batch keeps)")
    _common(d)
    b = sub.add_parser("batch", help="grade a class: attempts, deadline, ledger, gradebook")
    b.add_argument("root", type=Path, help="folder of <student>/<task_id>.py")
    b.add_argument("--homework", required=True, help="homework id from config.yaml")
    b.add_argument("--out", type=Path, default=None, help="results folder (default: config.yaml's results_dir)")
    b.add_argument("--force", action="store_true", help="regrade files already graded by this grader version")
    b.add_argument("--verbose", action="store_true", help="each job's full per-test report (default: one line)")
    b.add_argument("--manifest", type=Path, help="CSV student,task,submitted_at (default: file modification times)")
    _common(b)
    s = sub.add_parser("selftest", help="solutions earn full marks, skeletons 0, wrong/ files fail what they declare")
    s.add_argument("--task", action="append", help="only these tasks (repeatable)")
    _common(s)
    t = sub.add_parser("tasks", help="list the tasks found in tasks/ (--check: what an author got wrong)")
    t.add_argument("--check", action="store_true", help="import each reference, make each case's inputs, match "
                   "each wrong file's fails: patterns against the task's tests")
    t.add_argument("--staff", action="store_true", help="with --check: tracebacks too")
    r = sub.add_parser("release", help="write the student kit of a homework: no solution, no wrong/, no hidden case")
    r.add_argument("--homework", required=True, help="homework id from config.yaml")
    r.add_argument("--out", type=Path, required=True, help="a new folder for the kit")
    r.add_argument("--config", type=Path, default=ROOT / "config.yaml", help="the course configuration")
    z = sub.add_parser("gradescope", help="write a homework's autograder zip for Gradescope")
    z.add_argument("--homework", required=True, help="homework id from config.yaml")
    z.add_argument("--out", type=Path, default=Path("autograder.zip"), help="the zip to write")
    z.add_argument("--config", type=Path, default=ROOT / "config.yaml", help="the course configuration")
    m = sub.add_parser("similarity", help="a homework's similarity report: pairs of submissions sharing code")
    m.add_argument("root", type=Path, nargs="?", default=Path("submissions"),
                   help="folder of <student>/<task_id>.py (default: ./submissions)")
    m.add_argument("--homework", required=True, help="homework id from config.yaml")
    m.add_argument("--out", type=Path, default=None,
                   help="where the CSV and HTML go (default: config.yaml's results_dir/similarity)")
    m.add_argument("--threshold", type=float, default=None,
                   help="flag pairs scoring above this (default: grader/course/similarity.py's THRESHOLD, 0.8)")
    m.add_argument("--config", type=Path, default=ROOT / "config.yaml", help="the course configuration")
    lb = sub.add_parser("leaderboard", help="write a graded class's speed leaderboard again, or say why it is empty")
    lb.add_argument("--homework", required=True, help="homework id from config.yaml")
    lb.add_argument("--out", type=Path, default=None, help="the class's results folder (default: config.yaml's "
                                                           "results_dir)")
    lb.add_argument("--config", type=Path, default=ROOT / "config.yaml", help="the course configuration")
    zr = sub.add_parser("gradescope-run", help="(inside the autograder) grade /autograder/submission into "
                                               "/autograder/results/results.json")
    zr.add_argument("--homework", required=True)
    zr.add_argument("--submission", type=Path, default=None,
                    help="the student's files (default: $AUTOGRADER_ROOT/submission, /autograder/submission)")
    zr.add_argument("--results", type=Path, default=None,
                    help="where results.json goes (default: $AUTOGRADER_ROOT/results/results.json)")
    zr.add_argument("--device", choices=["auto", "cuda", "cpu"], default=None)
    zr.add_argument("--config", type=Path, default=ROOT / "config.yaml")
    tk = sub.add_parser("tokens", help="a random token per student of a roster, for the submission server")
    tk.add_argument("roster", type=Path, help="a CSV with a `student` column")
    tk.add_argument("--out", type=Path, required=True, help="TOKENS.csv: student,token,role (hand each student "
                                                             "their line; the server keeps only hashes)")
    tk.add_argument("--staff", action="append", default=[], metavar="NAME", help="a staff token too (repeatable)")
    sv = sub.add_parser("serve", help="the submission server: students submit, the GPU box grades, they read "
                                      "the verdict in seconds")
    sv.add_argument("--homework", required=True, help="homework id from config.yaml")
    sv.add_argument("--tokens", type=Path, required=True, help="TOKENS.csv from `tokens`")
    sv.add_argument("--data", type=Path, required=True, help="where the server keeps everything (its queue, the "
                                                             "uploads, the ledger and the class's results)")
    sv.add_argument("--host", default="127.0.0.1")
    sv.add_argument("--port", type=int, default=8000)
    sv.add_argument("--device", choices=["auto", "cuda", "cpu"], default=None)
    sv.add_argument("--config", type=Path, default=ROOT / "config.yaml")
    sv.add_argument("--workers", type=int, default=0, help="workers of the grading pool (0: config.yaml / per core)")
    sv.add_argument("--rate-per-minute", type=int, default=10, help="a student's submissions a minute, at most")
    sv.add_argument("--paused", action="store_true", help="start with the queue paused (staff resume it)")
    sv.add_argument("--roster", type=Path, default=None, help="the roster `tokens` was made from: serve warns at "
                                                              "start of each student in it without a token")
    sv.add_argument("--backend", choices=["local", "ray"], default="local",
                    help="where workers run: processes here, or tasks on a Ray cluster of GPU boxes")
    sv.add_argument("--address", default=None, help="with --backend ray: the cluster")
    sm = sub.add_parser("submit", help="hand a file in to the course's submission server and wait for its verdict")
    sm.add_argument("--server", required=True, help="the server's address, e.g. http://gpu-box:8000")
    sm.add_argument("--token", required=True, help="your token (from the course staff)")
    sm.add_argument("--task", required=True, help="task id, e.g. 10_quantize_global_int8")
    sm.add_argument("file", type=Path, help="the task's .py, or a notebook (.ipynb) that defines it")
    sm.add_argument("--json", type=Path, default=None, help="write the result here (the JSON `grade --json` writes)")
    sm.add_argument("--no-wait", action="store_true", help="exit once the server has stored the file")
    return parser


def _joined_token(argv: list[str]) -> list[str]:
    """`--token VALUE` as `--token=VALUE`: a token may start with "-" (one made before `grader tokens` stopped
    making those), which argparse would read as an option and refuse."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        if argv[i] == "--token" and i + 1 < len(argv):
            out.append(f"--token={argv[i + 1]}")
            i += 2
        else:
            out.append(argv[i])
            i += 1
    return out


def main(argv: list[str] | None = None) -> int:
    """Parse the command line and run its command (`COMMANDS`): a function per command, given what it needs."""
    args = build_parser().parse_args(_joined_token(list(sys.argv[1:] if argv is None else argv)))
    if args.command in PLAIN:  # no task or config read (a student's machine for `submit`)
        return PLAIN[args.command](args)
    try:
        tasks, broken = discover_tasks()
        for name, err in broken.items():
            print(f"task {name} is broken and will not be graded: {err}", file=sys.stderr)
        cfg = load_config(getattr(args, "config", ROOT / "config.yaml"), tasks)
        tasks = cfg.course_tasks(tasks)
    except ConfigError as exc:
        print(f"configuration error: {exc}", file=sys.stderr)
        return 2
    if args.command in COURSE:
        return COURSE[args.command](args, cfg, tasks, broken)
    # The grading commands load torch and Triton (4-5 s); the ones above answer without them.
    from grader.pipeline.grading import resolve_device

    device = resolve_device(args.device or cfg.device)
    return GRADING[args.command](args, cfg, tasks, broken, device)


def _submit(args: argparse.Namespace) -> int:
    from grader.server.client import submit

    return submit(args.server, args.token, args.task, args.file, args.json, wait=not args.no_wait)


def _tokens(args: argparse.Namespace) -> int:
    from grader.server.tokens import TokenError, make_tokens

    try:
        n = make_tokens(args.roster, args.out, args.staff)
    except (TokenError, OSError) as exc:
        print(f"tokens: {exc}", file=sys.stderr)
        return 2
    print(f"{n} tokens in {args.out} (student,token,role): hand each student their own line")
    return 0


def _tasks(args: argparse.Namespace, cfg, tasks: dict, broken: dict) -> int:
    if args.check:
        from grader.authoring.taskcheck import check_tasks

        return check_tasks(tasks, broken, staff=args.staff)
    for t in tasks.values():
        print(f"{t.id:40} {t.points:5g} pts  {len(t.cases):3} cases  {t.title}")
    for name in broken:
        print(f"{name:40} BROKEN (above)")
    return 1 if broken else 0


def _similarity(args: argparse.Namespace, cfg, tasks: dict, broken: dict) -> int:
    from grader.course.similarity import THRESHOLD, similarity_report

    if not _known_homework(args.homework, cfg):
        return 2
    if not args.root.is_dir():
        print(f"no such folder: {args.root}", file=sys.stderr)
        return 2
    skipped: dict[str, list[str]] = {}
    csv_path, html_path = similarity_report(args.root, cfg.homeworks[args.homework], tasks,
                                            args.out or ROOT / cfg.results_dir / "similarity",
                                            THRESHOLD if args.threshold is None else args.threshold,
                                            skipped=skipped)
    print(f"similarity of {args.homework}: {html_path} (pairs above the threshold, side by side), "
          f"{csv_path} (every pair)")
    for student, whys in sorted(skipped.items()):
        print(f"{student}: not compared: {'; '.join(whys)}", file=sys.stderr)
    return SOME_FAILED if skipped else 0


def _leaderboard(args: argparse.Namespace, cfg, tasks: dict, broken: dict) -> int:
    from grader.course import leaderboard

    if not _known_homework(args.homework, cfg):
        return 2
    hw, out = cfg.homeworks[args.homework], args.out or ROOT / cfg.results_dir
    students = sorted(p.name for p in out.iterdir() if p.is_dir() and not p.is_symlink()) if out.is_dir() else []
    board = leaderboard.collect(out, hw, students)
    if not board:
        print(leaderboard.why_empty(out, hw, students, tasks))
        return 0
    for path in leaderboard.write(out, hw, board):
        print(f"wrote {path}")
    return 0


class _Shown:
    """Prints each result as it comes; a job's full result after its first pass (its cases, `result.pending` not
    timed yet) shows only the tests the first one left out, and the score."""

    def __init__(self, staff: bool) -> None:
        self.staff = staff
        self.first: dict[tuple[str, str], set[str]] = {}

    def __call__(self, result: TaskResult, pictures: Path | None = None) -> None:
        if pictures is not None:
            report.save_pictures(result, pictures)
        key = (result.student, result.submission)
        if result.pending:
            self.first[key] = set(result.pending)
        only = self.first.pop(key, None) if not result.pending else None
        print(report.summary(result, staff=self.staff, only=only), flush=True)
        print(flush=True)


def _grade(args: argparse.Namespace, cfg, tasks: dict, broken: dict, device: str) -> int:
    from grader.pipeline.grading import Job, grade_jobs

    if args.task not in tasks:
        print(f"unknown task {args.task!r}; known: {', '.join(tasks)}", file=sys.stderr)
        return 2
    if not args.file.is_file():
        print(f"no such file: {args.file}", file=sys.stderr)
        return 2
    # `grade` is a student's own check: a link they made to their own file is their business, but no link is
    # followed into the grader's tasks/ or reference/ (a link to the answer key is not a submission). The
    # bytes checked are the ones graded: read once, from the resolved path, with no link left to follow.
    real = args.file.resolve()
    if real != Path(os.path.abspath(args.file)) and any(
            real.is_relative_to((ROOT / keep).resolve()) for keep in ("tasks", "reference")):
        print(f"{shown(args.file)} is a symbolic link into the grader's own files ({real.parent.name}/"
              f"{real.name}): submissions are graded only as regular files", file=sys.stderr)
        return 2
    try:
        source = read_submitted(real.parent, real.name)
    except IntakeError as exc:
        print(f"{shown(args.file)}: not graded: {exc}", file=sys.stderr)
        return 2
    job = Job(tasks[args.task], args.file, args.student or args.file.resolve().parent.name,
              None if is_notebook(args.file) else source)
    if is_notebook(args.file):
        job.notebook = Notebook(source, args.file.name).extract(job.task)
        job.source = job.notebook.source  # graded as the .py it holds for this task (grader/gates/notebook.py)
        job.read()
        if not job.notebook.defines:
            print(escape.terminal(f"{args.file}: {job.notebook.why_not()}"), file=sys.stderr)
            return 2
    folder = args.json.parent if args.json else ROOT / cfg.results_dir / CHECKS / job.student
    if _batch_owns(folder) or _batch_owns(folder.parent):
        return 2
    (result,) = grade_jobs([job], cfg, device, args.workers, on_result=partial(_Shown(args.staff), pictures=folder),
                           backend=args.backend, address=args.address)
    if args.json:
        report.write_json(result, args.json, args.json.with_suffix(".staff.json"))
    return 0 if result.score == result.max_score else 1


def _grade_dir(args: argparse.Namespace, cfg, tasks: dict, broken: dict, device: str) -> int:
    from grader.pipeline.grading import grade_jobs

    jobs, refused, failed = _folder_jobs(args.folders, tasks, device)
    if not jobs and not refused:
        print("no <task_id>.py files, and no notebook defining a task, found", file=sys.stderr)
        return 2 if not failed else SOME_FAILED
    out = args.out or ROOT / cfg.results_dir / CHECKS
    if _batch_owns(out):
        return 2
    show = _Shown(args.staff)
    for r in refused:
        show(r)
    results = refused + (grade_jobs(jobs, cfg, device, args.workers,
                                    on_result=lambda r: show(r, pictures=out / r.student), backend=args.backend,
                                    address=args.address) if jobs else [])
    failed |= {r.student for r in results if r.staff.get("grader_error")}
    totals: dict[str, list[float]] = {}
    for r in results:
        report.write_json(r, out / r.student / f"{r.task}.json", out / r.student / f"{r.task}.staff.json")
        totals.setdefault(r.student, [0.0, 0.0])
        totals[r.student][0] += r.score
        totals[r.student][1] += r.max_score
    for student, (score, max_score) in totals.items():  # a student is a folder's name: escape.terminal
        print(f"{escape.terminal(student):20} {score:6g} / {max_score:g}")
    print(f"results in {out}/<student>/<task>.json")
    if failed:
        print(f"some students' files could not be read or graded: {', '.join(sorted(failed))} (their results "
              "say what)", file=sys.stderr)
        return SOME_FAILED
    return 0


def _folder_jobs(folders: list[Path], tasks: dict, device: str) -> tuple[list, list, set[str]]:
    """grade-dir's jobs: each folder's file per task (the rule batch and Gradescope's run share), its notebooks'
    tasks, the files refused at once (with why) and the students whose files could not be read."""
    from grader.pipeline.grading import Job
    from grader.pipeline.result import refused_result

    jobs, refused, failed = [], [], set()
    for folder in folders:
        # the folder's own name (not a link's target): a printable id, whatever bytes the name holds
        student = student_id(Path(os.path.abspath(folder)).name)
        if folder.is_symlink() or not folder.is_dir():
            print(f"{shown(folder)}: not graded: {'a symbolic link' if folder.is_symlink() else 'not a folder'}",
                  file=sys.stderr)
            failed.add(student)
            continue
        # Which file counts for a task, and what is said of the rest: the rule batch and Gradescope's run share
        # (grader/gates/intake.py `task_files`; no link followed).
        decided = task_files(folder, list(tasks))
        for task_id, rel in decided.files.items():
            try:
                jobs.append(Job(tasks[task_id], folder / rel, student, read_submitted(folder, rel)))
            except IntakeError as exc:  # a link, not a regular file, too large: 0 points, and why
                refused.append(refused_result(tasks[task_id], student, str(folder / rel), device, str(exc)))
                failed.add(student)
        for note in decided.notes + (["holds no file: nothing was handed in"] if decided.empty else []):
            print(escape.terminal(f"{shown(folder)}: {note}"), file=sys.stderr)
        # A notebook submits every task it defines that has no <task_id>.py here (grader/gates/notebook.py).
        notebooks = NotebookFolder(folder, deep=True)
        for task in tasks.values():
            found = None if task.id in decided.files else notebooks.for_task(task)
            if found:
                jobs.append(Job(task, found[0], student, found[1].source, found[1]))
        for note in [*notebooks.notes, *notebooks.problems]:
            print(escape.terminal(f"{shown(folder)}: {shown(note)}"), file=sys.stderr)
        if notebooks.problems:
            failed.add(student)
    return jobs, refused, failed


def _batch(args: argparse.Namespace, cfg, tasks: dict, broken: dict, device: str) -> int:
    from grader.course.batch import ManifestError, OtherClass, run_batch
    from grader.pipeline.grading import grade_jobs

    if not _known_homework(args.homework, cfg):
        return 2
    try:
        rows = run_batch(args.root, cfg.homeworks[args.homework], tasks, cfg, device,
                         args.out or ROOT / cfg.results_dir, args.workers, args.force, args.manifest,
                         grade=partial(grade_jobs, backend=args.backend, address=args.address),
                         verbose=args.verbose or args.staff)
    except (OtherClass, ManifestError) as exc:
        print(exc, file=sys.stderr)
        return 2
    names = {s: escape.terminal(s) for s in rows}  # folder names: one line each, no escape sequence
    width = max([len(s) for s in names.values()] + [7])
    print(f"{'student':{width}}  total  late")
    for student in sorted(rows):
        print(f"{names[student]:{width}}  {rows[student]['total']:5g}  {rows[student]['late']}")
    return SOME_FAILED if getattr(rows, "failed", None) else 0


def _selftest(args: argparse.Namespace, cfg, tasks: dict, broken: dict, device: str) -> int:
    from grader.authoring.selftest import selftest

    unknown = [t for t in args.task or [] if t not in tasks and t not in broken]
    if unknown:
        print(f"selftest: no task {', '.join(map(repr, unknown))}; known: {', '.join(sorted(tasks))}",
              file=sys.stderr)
        return 2
    named_broken = [t for t in broken if not args.task or t in args.task]
    code = selftest(tasks, cfg, device, args.task, args.workers, staff=args.staff)
    if named_broken:  # a task that drops out of the selftest fails it: CI must not stay green without it
        print(f"selftest: FAILED, {len(named_broken)} task(s) broken and not tested: {', '.join(named_broken)}",
              file=sys.stderr)
        return 1
    return code


def _course(args: argparse.Namespace) -> int:
    """release, gradescope and gradescope-run: what a course hands out, and what runs on Gradescope."""
    from grader.authoring.release import write_tree
    from grader.course import gradescope

    if args.command == "gradescope-run":
        root = gradescope.default_root()
        return gradescope.run(args.homework, args.submission or root / "submission",
                              args.results or root / "results" / "results.json", args.config, args.device)
    try:
        if args.command == "release":
            files = write_tree(args.homework, args.out, kit=True, config=args.config)
            print(f"student kit of {args.homework}: {len(files)} files in {args.out} (no solution, no wrong/ file, "
                  f"no hidden case); students start with {args.out / 'README.md'}")
        else:
            gradescope.bundle(args.homework, args.out, args.config)
            print(f"Gradescope autograder of {args.homework}: {args.out} (upload it as the assignment's "
                  f"autograder; docs/tas.md: Gradescope)")
    except (ConfigError, FileExistsError) as exc:
        print(f"{args.command}: {exc}", file=sys.stderr)
        return 2
    return 0


SERVER_EXTRA = ('the submission server needs FastAPI, uvicorn and Jinja2 (the "server" extra): '
                'EXTRAS="plots server" make setup, or .venv/bin/python -m pip install fastapi uvicorn jinja2')


def _serve(args: argparse.Namespace, cfg, tasks: dict, broken: dict, device: str) -> int:
    try:
        from grader.server.app import serve
    except ModuleNotFoundError as exc:
        if exc.name not in ("fastapi", "uvicorn", "starlette", "h11", "jinja2"):
            raise
        print(f"serve: {SERVER_EXTRA}", file=sys.stderr)
        return 2
    from grader.server.service import Server, ServerConfig
    from grader.server.tokens import TokenBook, TokenError

    if not _known_homework(args.homework, cfg):
        return 2
    try:
        book = TokenBook.from_file(args.tokens)
    except (TokenError, OSError) as exc:
        print(f"serve: {exc}", file=sys.stderr)
        return 2
    server = Server(ServerConfig(cfg.homeworks[args.homework], tasks, cfg, device, args.data, book,
                                 workers=args.workers, rate_per_minute=args.rate_per_minute,
                                 backend=args.backend, address=args.address))
    server.paused = args.paused
    roster = None
    if args.roster is not None:
        from grader.server.tokens import read_roster

        try:
            roster = read_roster(args.roster)
        except (TokenError, OSError) as exc:
            print(f"serve: {exc}", file=sys.stderr)
            return 2
    for line in server.warnings(roster):
        print(f"serve: warning: {line}", file=sys.stderr, flush=True)
    serve(server, args.host, args.port, listening=lambda: print(
        f"serving {args.homework} on http://{args.host}:{args.port} ({device}); data in {args.data}", flush=True))
    return 0


class Stopped(BaseException):
    """SIGTERM of the command, raised in the main thread (as Ctrl-C raises KeyboardInterrupt)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _known_homework(hw_id: str, cfg) -> bool:
    """Whether config.yaml has homework `hw_id`; if not, says so with the known ones (the CLI then exits 2)."""
    if hw_id not in cfg.homeworks:
        print(f"unknown homework {hw_id!r}; known: {', '.join(cfg.homeworks)}", file=sys.stderr)
        return False
    return True


PLAIN = {"release": _course, "gradescope": _course, "gradescope-run": _course, "submit": _submit,
         "tokens": _tokens}
"""Commands that read no task and no config.yaml (`submit` runs on a student's machine)."""
COURSE = {"tasks": _tasks, "similarity": _similarity, "leaderboard": _leaderboard}
"""Commands over the tasks and config.yaml that grade nothing (no torch, no Triton)."""
GRADING = {"grade": _grade, "grade-dir": _grade_dir, "batch": _batch, "selftest": _selftest, "serve": _serve}
"""Commands that grade, on the device config.yaml or --device names."""


def entry() -> None:
    """The command. Ctrl-C (SIGINT) and SIGTERM end it in one line and an exit code of 128 + the signal: every worker,
    fork server and judge process it started is stopped first (no traceback from any of them, no process left).
    What was judged before is kept: `batch` records each job as it is judged, and its rerun goes on from there."""
    def on_term(signum, _frame):
        raise Stopped(signum)

    signal.signal(signal.SIGTERM, on_term)
    try:
        code = main()
    except (KeyboardInterrupt, Stopped) as exc:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C does not cut the clean-up short
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signum = getattr(exc, "signum", signal.SIGINT)
        code = 128 + signum
        # Out within seconds whatever the interrupted code held: the clean-up has a deadline, and the exit skips
        # the interpreter's shutdown, which joins threads and pools (a fresh clone's make test once saw a Ctrl-C'd
        # batch still running 60 s later). Nothing is lost by it: each judged job's files and ledger row are on
        # disk (written whole and synced) before the next one.
        watchdog = threading.Timer(20.0, os._exit, args=(code,))
        watchdog.daemon = True
        watchdog.start()
        _stop_children()
        print(f"\n{'interrupted (Ctrl-C)' if signum == signal.SIGINT else 'stopped (SIGTERM)'}: every worker is "
              "stopped; what was judged is kept (a batch run again goes on from there)", file=sys.stderr, flush=True)
        sys.stdout.flush()
        os._exit(code)
    sys.exit(code)


def _stop_children() -> None:
    import multiprocessing

    from grader.isolation.runner import stop_everything

    stop_everything()
    for child in multiprocessing.active_children():  # the judge processes
        child.terminate()
    for child in multiprocessing.active_children():
        child.join(5)
        if child.is_alive():
            child.kill()
