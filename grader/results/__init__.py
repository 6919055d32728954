"""What grading produces for one (submission, task): a result per test and the task's result, with the two
views of it, the student's and the staff's (otter-grader keeps the same split)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from grader.results.outcome import Outcome


@dataclass
class TestResult:
    name: str
    outcome: str
    points: float
    max_points: float
    message: str
    staff: str = ""
    picture: str = ""
    """Where the picture of this failing test was saved (report.save_pictures), if it has one."""
    visibility: str = "public"
    """public | hidden | after_due_date (the case's, config.VISIBILITIES)."""
    metric: dict[str, float] = field(default_factory=dict)
    """A speed test's measurement for the leaderboard (judge.Verdict.metric); empty for every other test."""
    note: str = ""
    """What the student should know even when the test passes (grader/judge Verdict.note)."""
    printed: str = ""
    """A failing test: what the student's code printed during the failing call (theirs, bounded; shown under the
    test, marked as theirs and escaped, never read by the grader)."""


NOT_PUBLIC = {
    "hidden": "a hidden test: graded, but its case and message are not shown",
    "after_due_date": "a test whose case and message are shown after the due date",
}


def _student_test(test: dict) -> dict:
    shown = {k: v for k, v in test.items() if k != "staff" and (k not in ("picture", "metric", "printed", "note") or v)}
    if test.get("visibility", "public") != "public":
        shown["message"] = NOT_PUBLIC.get(test["visibility"], NOT_PUBLIC["hidden"])
        shown.pop("picture", None)
        shown.pop("metric", None)
        shown.pop("printed", None)  # what a hidden case's inputs made the code print would tell the case
    return shown


@dataclass
class TaskResult:
    task: str
    student: str
    submission: str
    score: float
    max_score: float
    tests: list[TestResult]
    checks: dict
    environment: dict
    submission_sha256: str
    graded_at: str
    staff: dict = field(default_factory=dict)
    pictures: dict[str, bytes] = field(default_factory=dict)
    """PNG per failing test, for tasks with `pictures: true`; report.save_pictures writes them."""
    withheld: dict = field(default_factory=dict)
    """In the student kit: the tests it leaves out ({cases, speed_tests, points, message}); empty elsewhere."""
    diagnosis: str = ""
    """One line naming the case parameter that separates the failing public cases from the passing ones
    (grader/judge/diagnosis.py), or "" when none does."""
    submitted_as: str = ""
    """The name the student handed the file in under (the submission server's upload keeps it under another
    path); what the student's view names instead of `submission`, a path of the grading machine's disk."""
    caught: dict = field(default_factory=dict)
    """{case, why} when a case caught the file doing the task's work outside its kernels (grader/judge/data.py
    `Caught`): every case then earns 0, and the staff's summary lists it for a person to read. Empty otherwise."""
    pending: list[str] = field(default_factory=list)
    """The speed tests not timed yet: a first result, given as soon as the cases are judged, that the full one
    replaces once they are timed (grader/pipeline/grading.py). Empty in every result that is recorded."""

    def student_json(self) -> dict:
        """What the student may see: no staff detail, and of a test that is not public only its outcome, points
        and a neutral name, `hidden_1`, `hidden_2`... in the task's order (a case id tells its shape); the CPU
        sizes of such cases are left out of `environment`. The staff JSON and Gradescope's results, which gate by
        visibility themselves, keep names and messages."""
        data = self.staff_json()
        data.pop("staff")
        # No path of the grading machine: the file's own name, and each picture's name (beside the JSON)
        data["submission"] = data.pop("submitted_as") or Path(self.submission).name
        for test in data["tests"]:
            if test.get("picture"):
                test["picture"] = Path(test["picture"]).name
        secret = set()
        for k, test in enumerate((t for t in data["tests"] if t.get("visibility", "public") != "public"), 1):
            secret.add(test["name"])
            test["name"] = f"hidden_{k}"
        data["tests"] = [_student_test(t) for t in data["tests"]]
        if data.get("caught") and data["caught"].get("case") in secret:  # a hidden case's words tell its shape
            data["caught"] = {"case": "hidden", "why": NOT_PUBLIC["hidden"]}
        smaller = data.get("environment", {}).get("smaller_on_cpu")
        if isinstance(smaller, dict):
            data["environment"]["smaller_on_cpu"] = {k: v for k, v in smaller.items() if k not in secret}
        return data

    def student_view(self) -> TaskResult:
        """This result as `student_json` shows it, as a TaskResult (what report.summary prints for a student: the
        submission server's report, where hidden cases are graded)."""
        data = self.student_json()
        names = {f.name for f in fields(TestResult)}
        tests = [TestResult(**{k: v for k, v in t.items() if k in names}) for t in data.pop("tests")]
        keep = {f.name for f in fields(TaskResult)} - {"tests", "pictures"}
        return TaskResult(tests=tests, **{k: v for k, v in data.items() if k in keep})

    def staff_json(self) -> dict:
        data = asdict(self)
        data.pop("pictures")
        return data

    @property
    def failed(self) -> list[str]:
        return [t.name for t in self.tests if t.outcome not in (Outcome.PASSED.label, Outcome.NOT_RUN.label)]

    @property
    def not_run(self) -> list[str]:
        return [t.name for t in self.tests if t.outcome == Outcome.NOT_RUN.label]
