"""Writing a homework and proving it, what a task author and CI run before a class exists: selftest (every reference
earns full marks, every skeleton nothing, every known-wrong and known-cheat file what it should), taskcheck (each
task's cases, reference and oracle checked against each other) and release (the trees a course ships: the student
kit without the answer key, and the full tree a Gradescope bundle carries).

It imports nothing of a class's operations (grader/course) or of the submission service (pyproject.toml's
import-linter contracts)."""
