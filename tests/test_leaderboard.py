"""The speed leaderboard (grader/course/leaderboard.py): counted attempts' speed measurements,
ranked per test, under pseudonyms unless the course opts in; Gradescope's `leaderboard` field."""

from __future__ import annotations

import csv
import json
from dataclasses import replace

import jsonschema

from grader.config import Homework
from grader.course import gradescope, leaderboard
from grader.course.batch import write_gradescope

HW = Homework(id="hw", title="HW", tasks={"12_mm": 4.0, "13_q": 2.0})


def _result(speedups: dict[str, float | None], failed: tuple[str, ...] = ()) -> dict:
    """A counted student JSON as batch writes it: a case test and speed tests with the judge's metric."""
    tests = [{"name": "c1", "outcome": "passed", "points": 1.0, "max_points": 1.0, "message": "ok"}]
    for name, speedup in speedups.items():
        test = {"name": name, "outcome": "failed" if name in failed else "passed", "points": 0.0,
                "max_points": 0.0, "message": f"baseline ... speedup {speedup}x"}
        if speedup is not None:
            test["metric"] = {"speedup": speedup, "vs_reference": speedup / 2, "ms": 1.0 / speedup}
        tests.append(test)
    return {"score": 1.0, "raw_score": 1.0, "tests": tests}


def _class(tmp_path):
    table = {"ann": {"12_mm": {"speed_vs_compile": 1.8, "speed_small": 0.9}, "13_q": {"speed_vs_compile": 1.2}},
             "ben": {"12_mm": {"speed_vs_compile": 2.4, "speed_small": None}},  # speed_small not judged
             "cat": {"12_mm": {"speed_vs_compile": 3.1}},
             "dan": {"12_mm": {"speed_vs_compile": 9.9}}}  # failed: a wrong result never ranks
    for student, tasks in table.items():
        for task_id, speedups in tasks.items():
            (tmp_path / student).mkdir(exist_ok=True)
            failed = ("speed_vs_compile",) if student == "dan" else ()
            (tmp_path / student / f"{task_id}.json").write_text(json.dumps(_result(speedups, failed)))
    return sorted(table)


def test_ranks_per_test_fastest_first_under_stable_pseudonyms(tmp_path):
    students = _class(tmp_path)
    board = leaderboard.collect(tmp_path, HW, students)
    assert {(e.student, e.task, e.test) for e in board} == {
        ("ann", "12_mm", "speed_vs_compile"), ("ann", "12_mm", "speed_small"), ("ann", "13_q", "speed_vs_compile"),
        ("ben", "12_mm", "speed_vs_compile"), ("cat", "12_mm", "speed_vs_compile")}
    written = leaderboard.write(tmp_path, HW, board)
    assert tmp_path / "leaderboard.md" in written and tmp_path / "leaderboard_names.csv" in written
    rows = list(csv.DictReader((tmp_path / "leaderboard.csv").open()))
    names = {r["student"]: r["name"] for r in csv.DictReader((tmp_path / "leaderboard_names.csv").open())}
    mm = [r for r in rows if r["task"] == "12_mm" and r["test"] == "speed_vs_compile"]
    assert [r["name"] for r in mm] == [names["cat"], names["ben"], names["ann"]]  # 3.1x, 2.4x, 1.8x
    assert [r["rank"] for r in mm] == ["1", "2", "3"]
    # pseudonyms only: no cell of either table is a student's name (a substring test failed at random whenever a
    # pseudonym's word contained a short name such as "cat")
    cells = {c.strip() for line in (tmp_path / "leaderboard.md").read_text().splitlines() for c in line.split("|")}
    cells |= {v for r in rows for v in r.values()}
    assert not cells & set(students), cells & set(students)
    assert len(set(names.values())) == len(names)
    secret = leaderboard.secret_of(tmp_path)  # kept: the next run gives every student the same name
    assert all(leaderboard.pseudonym(secret, s) == n for s, n in names.items())
    assert (tmp_path / leaderboard.SECRET).stat().st_mode & 0o077 == 0


def test_the_course_chooses_the_tests_and_may_opt_in_to_names(tmp_path):
    students = _class(tmp_path)
    hw = replace(HW, leaderboard=["12_mm/speed_vs_compile"], leaderboard_names="student")
    board = leaderboard.collect(tmp_path, hw, students)
    assert {(e.task, e.test) for e in board} == {("12_mm", "speed_vs_compile")}
    leaderboard.write(tmp_path, hw, board)
    assert [r["name"] for r in csv.DictReader((tmp_path / "leaderboard.csv").open())] == ["cat", "ben", "ann"]


def test_each_students_results_json_has_their_entries_and_pseudonym(tmp_path):
    students = _class(tmp_path)
    board = leaderboard.collect(tmp_path, HW, students)
    write_gradescope(tmp_path, "ann", HW, [e for e in board if e.student == "ann"])
    data = json.loads((tmp_path / "ann" / "results.json").read_text())
    jsonschema.validate(data, gradescope.RESULTS_SCHEMA)
    assert data["leaderboard"] == [
        {"name": "12_mm speed_vs_compile (speedup)", "value": 1.8, "order": "desc"},
        {"name": "12_mm speed_small (speedup)", "value": 0.9, "order": "desc"},
        {"name": "13_q speed_vs_compile (speedup)", "value": 1.2, "order": "desc"}]
    assert leaderboard.pseudonym(leaderboard.secret_of(tmp_path), "ann") in data["output"]
    write_gradescope(tmp_path, "dan", HW, [e for e in board if e.student == "dan"])
    assert "leaderboard" not in json.loads((tmp_path / "dan" / "results.json").read_text())


def test_the_ranked_tests_must_exist(tmp_path):
    import pytest
    import yaml

    from grader.config import ROOT, ConfigError, discover_tasks, load_config

    tasks, _ = discover_tasks()
    raw = yaml.safe_load((ROOT / "config.yaml").read_text())
    for entry, ok in (("12_matmul_int8_fused_dequant/speed_vs_compile", True),
                      ("12_matmul_int8_fused_dequant/speed_nope", False), ("puzzle01_constant_add/speed", False),
                      ("no_slash", False)):
        raw["homeworks"]["hw4_int8"]["leaderboard"] = [entry]
        (tmp_path / "config.yaml").write_text(yaml.safe_dump(raw))
        if ok:
            assert load_config(tmp_path / "config.yaml", tasks).homeworks["hw4_int8"].leaderboard == [entry]
        else:
            with pytest.raises(ConfigError, match="leaderboard"):
                load_config(tmp_path / "config.yaml", tasks)


def test_an_empty_leaderboard_says_why(tmp_path):
    """On 1824752 no message said why a batch on a CPU machine wrote no leaderboard, and there was no
    `leaderboard` command. Now batch says why (here: no result yet, the speed tests not run on the CPU, none
    passed, none ranked), and `python -m grader leaderboard` writes the board again or says the same."""
    import subprocess
    import sys

    from grader.config import ROOT, discover_tasks, load_config

    tasks = discover_tasks()[0]
    task = tasks["10_quantize_global_int8"]
    hw = Homework(id="hw4_int8", title="HW", tasks={task.id: task.points})
    speed = task.perf[0].id
    assert "holds no result" in leaderboard.why_empty(tmp_path, hw, ["ann"], tasks)
    (tmp_path / "ann").mkdir()
    data = {"environment": {"device": "cpu"}, "tests": [{"name": speed, "outcome": "not_run"}]}
    (tmp_path / "ann" / f"{task.id}.json").write_text(json.dumps(data))
    why = leaderboard.why_empty(tmp_path, hw, ["ann"], tasks)
    assert "its speed tests run on cuda only, and this class was graded on cpu" in why
    done = subprocess.run([sys.executable, "-m", "grader", "leaderboard", "--homework", "hw4_int8", "--out",
                           str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and why in done.stdout, done.stdout + done.stderr
    data["tests"][0]["outcome"] = "failed"
    (tmp_path / "ann" / f"{task.id}.json").write_text(json.dumps(data))
    assert "no submission passed a ranked speed test" in leaderboard.why_empty(tmp_path, hw, ["ann"], tasks)
    assert "has a ranked speed test" in leaderboard.why_empty(tmp_path, replace(hw, leaderboard=[]), ["ann"], tasks)
    assert load_config().homeworks["hw4_int8"].tasks[task.id] == task.points  # the command graded that homework
    data["tests"][0].update(outcome="passed", metric={"speedup": 1.5, "vs_reference": 0.9, "ms": 1.0})
    (tmp_path / "ann" / f"{task.id}.json").write_text(json.dumps(data))
    done = subprocess.run([sys.executable, "-m", "grader", "leaderboard", "--homework", "hw4_int8", "--out",
                           str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "leaderboard.csv" in done.stdout and (tmp_path / "leaderboard.csv").is_file()
