# make test   the grader's own tests, lint, and the selftest of every task on the CPU interpreter
# make grade  grade the demo class in submissions/ into results/
PYTHON := .venv/bin/python
DEVICE ?= auto

.PHONY: test grade lint selftest clean

.venv/.ready: scripts/setup_venv.sh pyproject.toml
	./scripts/setup_venv.sh

lint: .venv/.ready
	$(PYTHON) -m ruff check grader reference tests scripts

test: .venv/.ready lint
	$(PYTHON) -m pytest tests -q
	$(PYTHON) -m grader selftest --device cpu

selftest: .venv/.ready
	$(PYTHON) -m grader selftest --device $(DEVICE)

grade: .venv/.ready
	$(PYTHON) -m grader grade-dir submissions/*/ --device $(DEVICE)

clean:
	rm -rf results .pytest_cache
