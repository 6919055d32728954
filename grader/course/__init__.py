"""A class's operations, what a TA runs over the students' files: batch (a class graded: attempts, deadlines, late
days, the gradebook and summary), ledger (the attempts, in SQLite), canvas (the LMS's gradebook file), gradescope
(the autograder bundle and what runs in it), leaderboard (the speed tier's ranking) and similarity (files too alike
to be independent work).

Writing and proving the homework itself (the answer key, the task checks, the kit) is grader/authoring's."""
