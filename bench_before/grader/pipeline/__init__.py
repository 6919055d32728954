"""A grading run, stage by stage: plan (shards), oracle (inputs and answers), staff (the reference's timing run
and the warmed Triton cache), result (a job, the judging context, the pytest suite's run, the result), and
grading (grade_jobs: the run that puts them together, with the pool)."""
