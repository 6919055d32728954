"""What a course hands out: the student kit holds nothing of the answer key and grades a correct file
to every public point on its own; visibility reaches every output; the Gradescope bundle, unpacked into a temp
root, grades a reference solution to full marks and a wrong/ file to exactly its declared partial score."""

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import jsonschema
import pytest
import yaml

from grader import results
from grader.authoring.release import leaks, write_tree
from grader.config import ROOT, ConfigError, discover_tasks, load_config
from grader.course import gradescope
from grader.pipeline import toolchain
from grader.pipeline.result import environment
from grader.results import report

TASKS, _ = discover_tasks()
CFG = load_config(ROOT / "config.yaml", TASKS)
HOMEWORK = "hw4_int8"


def _hw_tasks(hw_id):
    return {t: TASKS[t] for t in CFG.homeworks[hw_id].tasks}


def _grader(cwd: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "grader", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=600, env={**os.environ, **(env or {})})


@pytest.fixture(scope="module")
def kits(tmp_path_factory):
    base = tmp_path_factory.mktemp("kits")
    out = {}
    for hw_id in CFG.homeworks:
        done = _grader(ROOT, "release", "--homework", hw_id, "--out", str(base / hw_id))
        assert done.returncode == 0, done.stderr
        out[hw_id] = base / hw_id
    return out


@pytest.mark.parametrize("hw_id", list(CFG.homeworks))
def test_kit_holds_no_answer_key(kits, hw_id):
    kit = kits[hw_id]
    files = [p.relative_to(kit) for p in kit.rglob("*") if p.is_file()]
    assert not [f for f in files if f.name == "solution.py" or "wrong" in f.parts]
    assert not [f for f in files if f.suffix in (".sqlite", ".csv") or f.parts[0] in ("results", "submissions",
                                                                                           "tests", "scripts")]
    assert leaks(kit) == []  # no line of any task's solution, wrong/ file or speed baseline, in any file
    # no hidden case's value pattern or layout: its generator (reference/_hidden.py) stays with the staff, and no
    # string a hidden case alone asks for (`pattern: zero_rows`, `layout: stepped`) appears in the kit's oracles
    assert not (kit / "reference" / "_hidden.py").exists()
    oracles = "\n".join(p.read_text() for p in (kit / "reference").glob("*.py"))
    for task in (t for t in TASKS.values() if t.id in CFG.homeworks[hw_id].tasks):
        public = {str(v) for c in task.cases if c.visibility == "public" for v in c.params_for("cuda").values()}
        for case in (c for c in task.cases if c.visibility != "public"):
            for key, value in case.params_for("cuda").items():
                if isinstance(value, str) and value not in public:
                    assert f'"{value}"' not in oracles and f"'{value}'" not in oracles and \
                        f"``{value}``" not in oracles, (task.id, key, value)
    # only this homework's tasks, with their public cases; a hidden case's id appears nowhere in the kit
    hw_tasks = _hw_tasks(hw_id)
    assert {p.name for p in (kit / "tasks").iterdir()} == set(hw_tasks)
    assert set(yaml.safe_load((kit / "config.yaml").read_text())["homeworks"]) == {hw_id}
    text = "\n".join(p.read_text(errors="replace") for p in kit.rglob("*") if p.is_file())
    for task in hw_tasks.values():
        kit_yaml = yaml.safe_load((kit / "tasks" / task.id / "task.yaml").read_text())
        assert [c["id"] for c in kit_yaml["cases"]] == [c.id for c in task.cases if c.visibility == "public"]
        assert "wrong" not in kit_yaml and "perf" not in kit_yaml
        for case in task.cases:
            if case.visibility != "public":
                assert not re.search(rf"\b{re.escape(case.id)}\b", text), case.id


def test_the_leak_check_can_fail(kits, tmp_path):
    kit = tmp_path / "kit"
    shutil.copytree(kits[HOMEWORK], kit)
    solution = ROOT / "tasks" / "12_matmul_int8_fused_dequant" / "solution.py"
    lines = solution.read_text().splitlines()
    (kit / "tasks" / "helper.py").write_text("\n".join(lines[len(lines) // 2:]) + "\n")  # half a solution, renamed
    found = leaks(kit)
    assert found and all("tasks/12_matmul_int8_fused_dequant/solution.py" in f for f in found)
    (kit / "tasks" / "10_quantize_global_int8" / "wrong").mkdir()
    (kit / "tasks" / "10_quantize_global_int8" / "wrong" / "mine.py").write_text("x = 1\n")
    assert any("staff-only" in f for f in leaks(kit))
    with pytest.raises(FileExistsError):
        write_tree(HOMEWORK, kit, kit=True)


def test_hidden_cases_exist_and_are_proven():
    """Every INT8 and lowbit task has hidden cases, and each one is declared as failing by a wrong/ file."""
    for hw_id in ("hw4_int8", "lowbit"):
        for task in _hw_tasks(hw_id).values():
            hidden = [c.id for c in task.cases if c.visibility != "public"]
            assert hidden, f"{task.id} has no hidden case"
            caught = set().union(*(w.expected_failures(task.test_names) for w in task.wrong.values()))
            assert set(hidden) <= caught, f"{task.id}: no wrong/ file fails {sorted(set(hidden) - caught)}"


def test_the_kit_installs_a_command_that_grades_from_any_folder(kits, tmp_path):
    """The kit's own setup.sh, run as a student runs it, makes a fresh venv (Python 3.11's comes with setuptools 65
    and no `wheel`) with the `triton-grader` command, which then grades from another folder: a correct file to
    every public point (the hidden cases withheld, and said so), the skeleton to 0 with what fails. On 1824752 this
    venv got no command: the editable install failed with "invalid command 'bdist_wheel'", and setup.sh blamed a
    missing setuptools. Here PY is this test's python, which has torch and triton: the venv sees them through a
    .pth file (as on a GPU box, or from a conda environment), so nothing large is installed."""
    kit = tmp_path / "kit"
    shutil.copytree(kits[HOMEWORK], kit)
    assert "TORCH_INDEX" in (kit / "setup.sh").read_text() and "TORCH_INDEX" in (kit / "README.md").read_text()
    setup = (kit / "setup.sh").read_text()  # the course's torch and triton (config.yaml `toolchain`)
    assert f"torch=={CFG.toolchain['torch']}" in setup and f"triton=={CFG.toolchain['triton']}" in setup
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    done = subprocess.run(["bash", str(kit / "setup.sh")], capture_output=True, text=True, timeout=600,
                          env={**env, "PY": sys.executable}, cwd=tmp_path)
    assert done.returncode == 0 and "was not installed" not in done.stdout, done.stdout + done.stderr
    assert "ready: torch" in done.stdout
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    task = TASKS["10_quantize_global_int8"]
    mine = elsewhere / "alice" / f"{task.id}.py"
    mine.parent.mkdir()
    shutil.copyfile(task.folder / "solution.py", mine)

    def grade(file: Path, *more: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(kit / ".venv" / "bin" / "triton-grader"), "grade", "--task", task.id, str(file),
                               "--device", "cpu", *more], cwd=elsewhere, capture_output=True, text=True,
                              timeout=600, env=env)

    with ThreadPoolExecutor(2) as pool:  # the two checks side by side (each a process that mostly waits on imports)
        mine_run = pool.submit(grade, mine, "--json", str(tmp_path / "r.json"))
        skeleton = pool.submit(grade, kit / "tasks" / task.id / "skeleton.py")  # it also says why a file fails
    done = mine_run.result()
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads((tmp_path / "r.json").read_text())
    public = round(task.autotune_points + sum(c.points for c in task.cases if c.visibility == "public"), 6)
    assert result["score"] == result["max_score"] == public < task.points
    hidden = sum(c.visibility != "public" for c in task.cases)
    assert result["withheld"]["cases"] == hidden and f"{hidden} hidden case" in done.stdout
    assert "graded after you submit" in done.stdout
    done = skeleton.result()
    assert done.returncode == 1 and "score: 0 /" in done.stdout and "FAIL" in done.stdout, done.stdout + done.stderr


def test_release_refuses_a_bad_homework(tmp_path):
    with pytest.raises(ConfigError, match="unknown homework"):
        write_tree("no_such_homework", tmp_path / "k", kit=True)


def _result(visibilities: dict[str, str]) -> results.TaskResult:
    tests = [results.TestResult(name, "failed", 0.0, 1.0, f"{name}: 3 of 8 elements differ", "traceback", visibility=v)
             for name, v in visibilities.items()]
    return results.TaskResult(task="10_quantize_global_int8", student="s", submission="s.py", score=0.0, max_score=3.0,
                      tests=tests, checks={}, environment={"device": "cpu"}, submission_sha256="",
                      graded_at="2026-11-24T00:00:00+00:00")


def test_visibility_in_every_output():
    result = _result({"a": "public", "b": "hidden", "c": "after_due_date"})
    student = {t["name"]: t for t in result.student_json()["tests"]}
    staff = {t["name"]: t for t in result.staff_json()["tests"]}
    # a test that is not public has a neutral name in what the student sees (a case id tells its shape)
    assert list(student) == ["a", "hidden_1", "hidden_2"]
    assert [student[n]["visibility"] for n in student] == ["public", "hidden", "after_due_date"]
    assert student["a"]["message"] == "a: 3 of 8 elements differ"
    assert "differ" not in student["hidden_1"]["message"] and "after the due date" in student["hidden_2"]["message"]
    assert all(staff[n]["message"].endswith("differ") for n in "abc")  # staff see everything
    entries = {e["name"].split(" / ")[1]: e for e in gradescope.entries_of(result.task, result.staff_json()["tests"])}
    assert [entries[n]["visibility"] for n in "abc"] == ["visible", "hidden", "after_due_date"]
    assert entries["b"]["output"] == "```text\nb: 3 of 8 elements differ\n```"  # Gradescope gates it by visibility
    assert all(e["output_format"] == "md" for e in entries.values())  # a code block: shown as the grader wrote it
    assert gradescope.fenced("a ``` b") == "````text\na ``` b\n````"
    text = report.summary(result)
    assert "b [hidden]" in text and "c [after_due_date]" in text and "a [" not in text


def test_gradescope_bundle(tmp_path):
    zip_path = tmp_path / "autograder.zip"
    done = _grader(ROOT, "gradescope", "--homework", HOMEWORK, "--out", str(zip_path))
    assert done.returncode == 0, done.stderr
    with zipfile.ZipFile(zip_path) as z:
        names = z.namelist()
        assert {"setup.sh", "run_autograder", "config.yaml"} <= set(names)
        assert not [n for n in names if n.endswith("solution.py") or "/wrong/" in n]
        assert "reference/_hidden.py" in names  # it grades the hidden cases (tasks 10 and 13's below have patterns)
        assert (z.getinfo("run_autograder").external_attr >> 16) & 0o111
        root = tmp_path / "autograder"  # laid out as Gradescope does: source/, submission/, results/
        z.extractall(root / "source")
    setup = (root / "source" / "setup.sh").read_text()  # the course's toolchain (config.yaml), CPU builds
    assert f"torch=={CFG.toolchain['torch']}" in setup and f"triton=={CFG.toolchain['triton']}" in setup
    shutil.copyfile(root / "source" / "run_autograder", root / "run_autograder")
    sub = root / "submission"
    (sub / "extra").mkdir(parents=True)
    t10, t13 = TASKS["10_quantize_global_int8"], TASKS["13_quantize_global_transpose_int8"]
    shutil.copyfile(t10.folder / "solution.py", sub / "10_quantize_global_int8.py")
    wrong = next(w for w in t13.wrong.values() if 0 < len(w.expected_failures(t13.test_names) - {"imports",
                                                                                                  "signatures"}))
    shutil.copyfile(t13.folder / "wrong" / wrong.file, sub / "extra" / "13_quantize_global_transpose_int8.py")
    (sub / "quantize_rowwise.py").write_text("# misnamed\n")
    done = subprocess.run(["bash", str(root / "run_autograder")], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "AUTOGRADER_ROOT": str(root), "PYTHON": sys.executable})
    assert done.returncode == 0, done.stdout + done.stderr
    data = json.loads((root / "results" / "results.json").read_text())
    jsonschema.validate(data, gradescope.RESULTS_SCHEMA)
    by_task: dict[str, list[dict]] = {}
    for t in data["tests"]:
        by_task.setdefault(t["name"].split(" / ")[0], []).append(t)
    assert sum(t["score"] for t in by_task[t10.id]) == pytest.approx(t10.points_on("cpu"))
    failing = wrong.expected_failures(t13.test_names)
    partial = sum(p for name, p in t13.test_points("cpu").items() if name not in failing)
    assert sum(t["score"] for t in by_task[t13.id]) == pytest.approx(partial)
    assert 0 < partial < t13.points_on("cpu")
    hidden = {t["name"].split(" / ")[1] for t in data["tests"] if t["visibility"] == "hidden"}
    assert hidden == {c.id for c in t10.cases if c.visibility == "hidden"} | {
        c.id for c in t13.cases if c.visibility == "hidden"}
    for task_id in ("11_quantize_rowwise_int8", "12_matmul_int8_fused_dequant", "14_backward_dx_int8_fused"):
        (missing,) = by_task[task_id]
        assert missing["score"] == 0 and missing["max_score"] == TASKS[task_id].points_on("cpu")
        assert f"no file named `{task_id}.py`" in missing["output"]
    assert "did you mean 11_quantize_rowwise_int8.py" in data["output"].replace("\\", "")  # Markdown-escaped
    assert data["score"] == pytest.approx(t10.points_on("cpu") + partial)
    # graded with other versions than the course's (CI's triton 3.9, the course's 3.6): the output says so
    assert bool(toolchain.note(environment("cpu"), CFG.toolchain)) == ("the course grades with" in data["output"])


def test_gradescope_run_fails_closed(tmp_path):
    """A grader that cannot run (here: an unknown homework) still writes results.json: 0 points, a message, and
    exits 1 (a staff error shows as a failed run, not as a class of zeros)."""
    results = tmp_path / "results" / "results.json"
    code = gradescope.run("no_such_homework", tmp_path / "submission", results)
    data = json.loads(results.read_text())
    jsonschema.validate(data, gradescope.RESULTS_SCHEMA)
    assert code == 1 and data["score"] == 0 and "autograder itself failed" in data["output"]


def test_gradescope_output_has_a_got_expected_table():
    """Feedback that looks like the work: a failing test's got/expected pairs as a Markdown table
    under its message's code block; a message without any gets none."""
    message = ("under config the only configuration:\n  - q: 3 of 64 element(s) differ (rule: rounded); first: "
               "q[2, 0] got 5 expected 4 (exact 4.4000); q[2, 1] got -128 expected -127 (exact -127.0000); "
               "q[] got nan expected 0")
    (entry,) = gradescope.entries_of("t", [{"name": "c", "points": 0.0, "max_points": 1.0, "outcome": "failed",
                                            "message": message}])
    assert entry["output"].startswith(gradescope.fenced(message))
    assert entry["output"].endswith("| `q[2, 0]` | 5 | 4 |\n| `q[2, 1]` | -128 | -127 |\n| `q[]` | nan | 0 |")
    assert gradescope.got_expected_table("raised ValueError: shapes differ") == ""


def test_a_failing_puzzle_case_embeds_its_picture():
    """Where the format allows (Gradescope's HTML output), a failing test's picture is embedded as a data URI,
    beside its message and got/expected table; a passing test's is not."""
    import base64

    png = b"\x89PNG\r\n\x1a\nfake"
    tests = [{"name": "c", "points": 0.0, "max_points": 1.0, "outcome": "failed",
              "message": "z: 1 of 4 element(s) differ; first: z[0, 1] got 3 expected <2>"},
             {"name": "d", "points": 1.0, "max_points": 1.0, "outcome": "passed", "message": "ok"}]
    failed, passed = gradescope.entries_of("p", tests, pictures={"c": png, "d": png})
    assert failed["output_format"] == "html" and passed["output_format"] == "md"
    assert f'src="data:image/png;base64,{base64.b64encode(png).decode()}"' in failed["output"]
    assert "<td><code>z[0, 1]</code></td><td>3</td><td>&lt;2&gt;</td>" in failed["output"]  # escaped
    jsonschema.validate(gradescope.results_json([failed, passed]), gradescope.RESULTS_SCHEMA)
