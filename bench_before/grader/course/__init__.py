"""A course: batch (a class: attempts, deadlines, gradebook), ledger, release (the student kit), gradescope (the bundle
and what runs in it), selftest (the answer key proven)."""
