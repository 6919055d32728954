"""Configuration errors say which file and which key; one broken task folder does not stop the others."""

import re
import shutil
from pathlib import Path

import pytest

from grader.config import ROOT, ConfigError, discover_tasks, load_config, load_task


def _copy_task(tmp_path, name="10_quantize_global_int8"):
    dest = tmp_path / "tasks" / name
    shutil.copytree(ROOT / "tasks" / name, dest)
    return dest


def test_missing_key_names_file_and_key(tmp_path):
    folder = _copy_task(tmp_path)
    text = (folder / "task.yaml").read_text().replace("entry: quantize_global\n", "")
    (folder / "task.yaml").write_text(text)
    with pytest.raises(ConfigError, match=r"task\.yaml: missing key 'entry'"):
        load_task(folder)


def test_wrong_files_must_all_be_declared(tmp_path):
    folder = _copy_task(tmp_path)
    (folder / "wrong" / "extra.py").write_text("pass\n")
    with pytest.raises(ConfigError, match=r"undescribed: \['extra.py'\]"):
        load_task(folder)


def test_points_must_agree_with_the_homework(tmp_path):
    tasks, broken = discover_tasks()
    assert not broken
    cfg = (ROOT / "config.yaml").read_text().replace("10_quantize_global_int8: 2.0", "10_quantize_global_int8: 2.5")
    (tmp_path / "config.yaml").write_text(cfg)
    with pytest.raises(ConfigError, match=r"10_quantize_global_int8: 2.5 points here, but .*adds up to 2.0"):
        load_config(tmp_path / "config.yaml", tasks)


def test_a_course_gives_the_speed_tier_points_in_config_yaml(tmp_path):
    """Tasks 10-14's speed tests are worth 0 in task.yaml (informational); a homework's speed_points gives them
    points, and its task total then counts them."""
    tasks, _ = discover_tasks()
    assert tasks["12_matmul_int8_fused_dequant"].perf[0].points == 0
    base = (ROOT / "config.yaml").read_text()
    assert base.count("    speed_points: {}\n") == 1  # hw4_int8's, empty
    given = base.replace("    speed_points: {}\n",
                         "    speed_points:\n      12_matmul_int8_fused_dequant: {speed_vs_compile: 1.0}\n")
    total = ("12_matmul_int8_fused_dequant: 4.0", "12_matmul_int8_fused_dequant: 5.0")
    (tmp_path / "a.yaml").write_text(given.replace(*total))
    cfg = load_config(tmp_path / "a.yaml", tasks)
    task = cfg.course_tasks(tasks)["12_matmul_int8_fused_dequant"]
    assert task.perf[0].points == 1.0 and task.points == 5.0 and task.points_on("cpu") == 4.0
    assert tasks["12_matmul_int8_fused_dequant"].perf[0].points == 0  # the tasks as loaded are left as they were
    tasks, _ = discover_tasks()
    (tmp_path / "b.yaml").write_text(given)  # the total left at 4.0
    with pytest.raises(ConfigError, match=r"12_matmul_int8_fused_dequant: 4.0 points here, but .*adds up to 5.0"):
        load_config(tmp_path / "b.yaml", tasks)
    (tmp_path / "c.yaml").write_text(given.replace("speed_vs_compile: 1.0", "speed_k1: 1.0"))
    with pytest.raises(ConfigError, match=r"hw4_int8.speed_points.12_matmul_int8_fused_dequant: \['speed_k1'\] "
                                          r"not among the task's speed tests \(speed_vs_compile\)"):
        load_config(tmp_path / "c.yaml", discover_tasks()[0])
    (tmp_path / "d.yaml").write_text(given.replace("{speed_vs_compile: 1.0}", "{speed_vs_compile: -1}"))
    with pytest.raises(ConfigError, match=r"speed_points.12_matmul_int8_fused_dequant.speed_vs_compile: Input "
                                          r"should be greater than or equal to 0"):
        load_config(tmp_path / "d.yaml", discover_tasks()[0])


def test_informational_speed_tests_can_be_left_out(tmp_path):
    """grading.informational_speed: false drops the 0-point speed tests (a class's batch need not pay a timing
    worker per file for them); a speed test a course gave points keeps running."""
    base = (ROOT / "config.yaml").read_text()
    assert base.count("  informational_speed: true") == 1
    off = base.replace("  informational_speed: true", "  informational_speed: false")
    (tmp_path / "a.yaml").write_text(off)
    cfg = load_config(tmp_path / "a.yaml", discover_tasks()[0])
    tasks = cfg.course_tasks(discover_tasks()[0])
    assert not cfg.informational_speed
    assert not tasks["10_quantize_global_int8"].perf and tasks["10_quantize_global_int8"].points == 2.0
    assert [p.id for p in tasks["23_lowbit_dw_fused"].perf] == ["speed_k8192", "speed_k100864"]  # 0.75 points each
    task12 = "12_matmul_int8_fused_dequant"
    given = off.replace("    speed_points: {}\n", f"    speed_points: {{{task12}: {{speed_vs_compile: 1.0}}}}\n")
    (tmp_path / "b.yaml").write_text(given.replace(f"{task12}: 4.0", f"{task12}: 5.0"))
    tasks, _ = discover_tasks()
    tasks = load_config(tmp_path / "b.yaml", tasks).course_tasks(tasks)
    assert [p.id for p in tasks["12_matmul_int8_fused_dequant"].perf] == ["speed_vs_compile"]
    assert not tasks["11_quantize_rowwise_int8"].perf
    (tmp_path / "c.yaml").write_text(base.replace("  informational_speed: true", "  informational_speed: 0"))
    with pytest.raises(ConfigError, match=r"grading.informational_speed: Input should be a valid boolean \(got 0\)"):
        load_config(tmp_path / "c.yaml")


def test_a_broken_folder_is_reported_and_the_rest_load(tmp_path):
    _copy_task(tmp_path)
    broken_folder = _copy_task(tmp_path, "11_quantize_rowwise_int8")
    (broken_folder / "task.yaml").write_text("id: [unclosed\n")
    tasks, broken = discover_tasks(tmp_path)
    assert list(tasks) == ["10_quantize_global_int8"]
    assert "not valid YAML" in broken["11_quantize_rowwise_int8"]


def test_bad_deadline_and_counts(tmp_path):
    base = (ROOT / "config.yaml").read_text()
    (tmp_path / "a.yaml").write_text(base.replace('deadline: "2025-11-10T23:59:00+03:00"', 'deadline: "2025-11-10"'))
    with pytest.raises(ConfigError, match="deadline: give a UTC offset"):
        load_config(tmp_path / "a.yaml")
    (tmp_path / "b.yaml").write_text(base.replace("counts: best", "counts: first"))
    with pytest.raises(ConfigError, match=r"homeworks.hw4_int8.counts: Input should be 'best' or 'last' "
                                          r"\(got 'first'\)"):
        load_config(tmp_path / "b.yaml")


def test_time_limits_take_a_device_and_seconds(tmp_path):
    base = (ROOT / "config.yaml").read_text()
    assert load_config(ROOT / "config.yaml").stall_s == {"cuda": 30.0, "cpu": 120.0}
    (tmp_path / "a.yaml").write_text(base.replace("    cuda: 30 ", "    cuda: -1 "))
    with pytest.raises(ConfigError, match=r"a.yaml: grading.stall_s.cuda: Input should be greater than or equal to 0 "
                                          r"\(got -1\)"):
        load_config(tmp_path / "a.yaml")
    (tmp_path / "b.yaml").write_text(base.replace("    cpu: 120 ", "    gpu: 120 "))
    with pytest.raises(ConfigError, match=r"b.yaml: grading.stall_s.gpu: this key: Input should be 'cuda' or 'cpu'"):
        load_config(tmp_path / "b.yaml")


def test_judges_are_auto_or_a_count(tmp_path):
    base = (ROOT / "config.yaml").read_text()
    assert load_config(ROOT / "config.yaml").judges == -1  # auto
    (tmp_path / "a.yaml").write_text(base.replace("  judges: auto ", "  judges: 3 "))
    assert load_config(tmp_path / "a.yaml").judges == 3
    (tmp_path / "b.yaml").write_text(base.replace("  judges: auto ", "  judges: many "))
    with pytest.raises(ConfigError, match=r"b.yaml: grading.judges: Input should be 'auto'; or Input should be a valid "
                                          r"integer, unable to parse string as an integer \(got 'many'\)"):
        load_config(tmp_path / "b.yaml")


def test_sandbox_setting_true_false_or_limits(tmp_path):
    base = (ROOT / "config.yaml").read_text()
    assert load_config(ROOT / "config.yaml").sandbox.job() == {"limits": {}}  # on by default
    for text, job in (("sandbox: false", None), ("sandbox: {memory_mb: 4096, processes: 64}",
                                                 {"limits": {"memory_mb": 4096, "processes": 64}})):
        (tmp_path / "config.yaml").write_text(base.replace("  sandbox: true", f"  {text}"))
        assert load_config(tmp_path / "config.yaml").sandbox.job() == job
    for text, error in (("sandbox: {memory: 1}", r"grading\.sandbox\.memory: unknown key; known: enabled, memory_mb"),
                        ("sandbox: {processes: -1}", r"grading\.sandbox\.processes: Input should be greater than or "
                                                     r"equal to 0"),
                        ("sandbox: maybe", r"grading\.sandbox: Input should be a valid boolean; or Input should be a "
                                           r"valid dictionary \(got 'maybe'\)")):
        (tmp_path / "config.yaml").write_text(base.replace("  sandbox: true", f"  {text}"))
        with pytest.raises(ConfigError, match=error):
            load_config(tmp_path / "config.yaml")


def test_torch_ops_must_be_a_list_of_names(tmp_path):
    folder = _copy_task(tmp_path)
    text = (folder / "task.yaml").read_text()
    (folder / "task.yaml").write_text(text.replace("torch_ops: [", "torch_ops: [not a name, ", 1))
    with pytest.raises(ConfigError, match=r"torch_ops must be a list of op groups"):
        load_task(folder)


CASES_LINE = re.compile(r"Cases \((\d+) of them(?:, ([\d.]+) points each|; points in brackets)\): (.*)")


def spec_case_lists() -> list[tuple[Path, int, list[float], list[str]]]:
    """Every statement's 'Cases (N of them, P points each): `id` (...); ...' line (or 'Cases (N of them; points
    in brackets): `id` [P] (...); ...'), read back: the count, each case's points and its id."""
    found = []
    for spec in sorted((ROOT / "tasks").glob("*/spec.md")):
        for line in spec.read_text().splitlines():
            m = CASES_LINE.match(line)
            if m:
                listed = re.findall(r"`([\w.]+)` (?:\[([\d.]+)\] )?\(", m[3])
                points = [float(m[2]) if m[2] else float(p or "nan") for _, p in listed]
                found.append((spec, int(m[1]), points, [i for i, _ in listed]))
    return found


def test_statements_list_the_public_cases_that_task_yaml_grades():
    """A statement that names its cases says how many, their points and their ids as task.yaml has them (the
    puzzles' statements once listed 4 cases at 0.25 where task.yaml grades 5 at 0.2)."""
    lists = spec_case_lists()
    assert len(lists) >= 12  # the 12 puzzles say it
    for spec, count, points, ids in lists:
        public = [c for c in load_task(spec.parent).cases if c.visibility == "public"]
        assert (count, ids) == (len(public), [c.id for c in public]), spec
        assert all(abs(c.points - p) < 1e-9 for c, p in zip(public, points)), spec


def test_every_key_is_declared_and_typed(tmp_path):
    """config.yaml and task.yaml are validated against grader/config/files.py's models: a typo'd key, a word where
    a number goes, a wrong type in a task's output fail with the file and the key's path."""
    base = (ROOT / "config.yaml").read_text()
    (tmp_path / "a.yaml").write_text(base.replace("grading:\n", "grading:\n  timeout: 30\n  workers: many\n", 1)
                                     .replace("  workers: 0 ", "  # workers: 0 "))
    with pytest.raises(ConfigError) as err:
        load_config(tmp_path / "a.yaml")
    lines = str(err.value).splitlines()
    assert any(line.endswith("a.yaml: grading.timeout: unknown key; known: device, timeout_s, stall_s, workers, "
                             "judges, fork_server, specialize, results_dir, gpu_compile, compile_processes, bounds, "
                             "writes, provenance, informational_speed, sandbox") for line in lines), lines
    assert any("a.yaml: grading.workers: Input should be a valid integer" in line and "(got 'many')" in line
               for line in lines), lines
    folder = _copy_task(tmp_path)
    text = (folder / "task.yaml").read_text()
    assert "    compare: rounded\n" in text
    (folder / "task.yaml").write_text(text.replace("    compare: rounded\n", "    comapre: rounded\n", 1)
                                      .replace("python_reads: 1", "python_reads: some"))
    with pytest.raises(ConfigError) as err:
        load_task(folder)
    assert "task.yaml: outputs[0].comapre: unknown key; known: name, dtype, compare" in str(err.value), err.value
    assert "task.yaml: python_reads: Input should be a valid integer" in str(err.value), err.value


def test_loading_the_course_leaves_the_tasks_as_they_were():
    tasks, _ = discover_tasks()
    before = {k: (t.perf, t.points) for k, t in tasks.items()}
    cfg = load_config(ROOT / "config.yaml", tasks)
    assert {k: (t.perf, t.points) for k, t in tasks.items()} == before
    assert cfg.course_tasks(tasks) is not tasks
    timeout, stall, audit_stall = cfg.limits(tasks["12_matmul_int8_fused_dequant"], "cuda")
    # the address check's re-run runs the CPU's inputs: the CPU's time limit added, its stall limit only while the
    # re-run runs (a hang of a graded call costs the CUDA stall limit)
    assert (timeout, stall, audit_stall) == (cfg.timeout_s["cuda"] + cfg.timeout_s["cpu"], cfg.stall_s["cuda"],
                                             cfg.stall_s["cpu"])
    assert cfg.limits(tasks["12_matmul_int8_fused_dequant"], "cpu") == (cfg.timeout_s["cpu"], cfg.stall_s["cpu"], 0.0)
    # a timing worker has no re-run, and keeps the longer limit throughout (torch.compile of a staff baseline)
    assert cfg.limits(tasks["12_matmul_int8_fused_dequant"], "cuda", timing=True) == (timeout, cfg.stall_s["cpu"], 0.0)


def test_a_wrong_file_may_fail_more_tests_on_one_device():
    """`fails_on` adds patterns on one device only: task 12's bias_after_round.py fails large_pc_bias (and the speed
    test timed on it) at its CUDA size, where 9 of 4.2 million elements show the mistake, and not at its CPU size."""
    task = load_task(ROOT / "tasks" / "12_matmul_int8_fused_dequant")
    wrong = task.wrong["bias_after_round.py"]
    common = {"b1_in256_out256_pt_cancel_bias", "b200_in1000_out300_pc_bias"}
    assert wrong.expected_failures(task.test_names) == common
    assert wrong.expected_failures(task.test_names, "cpu") == common
    assert wrong.expected_failures(task.test_names, "cuda") == common | {"large_pc_bias", "speed_vs_compile"}


def _with_a_broken_task(monkeypatch):
    """The CLI's task discovery with one more task folder whose task.yaml does not load."""
    import grader.cli as cli

    real = cli.discover_tasks

    def discover(*args, **kwargs):
        tasks, broken = real(*args, **kwargs)
        return tasks, {**broken, "99_broken": "tasks/99_broken/task.yaml: case 'n1': unknown key 'sizez'"}

    monkeypatch.setattr(cli, "discover_tasks", discover)
    return cli


def test_selftest_and_tasks_fail_on_a_broken_task_or_an_unknown_id(monkeypatch, capsys):
    """A task that drops out must fail CI: before, `selftest --task` of a broken or unknown task printed `0 passed,
    0 failed` and exited 0, and `tasks` exited 0 with a broken task."""
    cli = _with_a_broken_task(monkeypatch)
    assert cli.main(["tasks"]) == 1
    assert "99_broken" in capsys.readouterr().out
    assert cli.main(["selftest", "--device", "cpu", "--task", "no_such_task"]) == 2
    assert "no task 'no_such_task'" in capsys.readouterr().err
    assert cli.main(["selftest", "--device", "cpu", "--task", "99_broken"]) == 1
    captured = capsys.readouterr()
    assert "nothing was tested" in captured.out and "broken and not tested: 99_broken" in captured.err


def test_tasks_check_finds_what_an_author_got_wrong(task10, capsys):
    """`tasks --check`: a reference that does not import, a dtype torch lacks, a `fails:` pattern that matches no
    test (before, each surfaced only while grading, or never: a pattern with a typo declares nothing)."""
    import dataclasses

    from grader.authoring.taskcheck import check_tasks, task_problems
    from grader.config import WrongSpec

    assert task_problems(task10) == []
    typo = dataclasses.replace(task10, id="10_typo", reference="no_such_reference",
                               outputs=[dataclasses.replace(task10.outputs[0], dtype="int9")],
                               wrong={**task10.wrong, "extra.py": WrongSpec(file="extra.py", why="a typo",
                                                                            fails=["n1_fp99*", "!n127_fp16"])})
    problems = "\n".join(task_problems(typo))
    assert "reference 'no_such_reference' does not import: ModuleNotFoundError" in problems
    assert "dtype 'int9' is not a torch dtype" in problems
    assert "wrong/extra.py: pattern 'n1_fp99*' matches none of the task's tests" in problems
    assert "'!n127_fp16'" not in problems  # an exclusion of a real test is fine
    assert check_tasks({"10_typo": typo}, {}) == 1 and check_tasks({task10.id: task10}, {}) == 0
    assert "FAIL 10_typo" in capsys.readouterr().out


def test_a_mistyped_task_id_in_config_yaml_gets_a_did_you_mean(tmp_path):
    """On 1824752 a homework naming `10_quantize_global_int` said only "no folder tasks/...". """
    text = (ROOT / "config.yaml").read_text().replace("10_quantize_global_int8:", "10_quantize_global_int:", 1)
    assert "10_quantize_global_int:" in text
    (tmp_path / "config.yaml").write_text(text)
    with pytest.raises(ConfigError, match="no folder tasks/10_quantize_global_int; did you mean "
                                          "10_quantize_global_int8"):
        load_config(tmp_path / "config.yaml", discover_tasks()[0])
