"""A grading run: oracle, shards, the pool, judging, results (grading.py)."""
