# make setup  .venv with torch (CPU build where none is installed), triton, the test tools, and the grader as the
#             `triton-grader` command (EXTRAS="plots ray" for the Ray backend; TORCH_INDEX: see scripts/setup_venv.sh)
# make test   lint, the docs' strict build (mkdocs), every task checked (tasks --check), the grader's own tests,
#             and the selftest of every task on the CPU interpreter
# make grade  grade the demo class in submissions/ into results/
PYTHON := .venv/bin/python
DEVICE ?= auto

.PHONY: setup test grade lint selftest clean

.venv/.ready: scripts/setup_venv.sh pyproject.toml
	./scripts/setup_venv.sh

setup: .venv/.ready

lint: .venv/.ready
	$(PYTHON) -m ruff check grader reference tests scripts conformance
	.venv/bin/lint-imports  # the layer contracts in pyproject.toml

test: export EXTRAS = plots ray server
test: export GRADER_TESTS_NEED_RAY = 1
test: export GRADER_TESTS_NEED_BROWSER = 1
test: .venv/.ready lint
	@# a venv made by `make grade` or `make setup` lacks the extras the tests use: install them, never skip in silence
	@$(PYTHON) -c "import ray, matplotlib, fastapi, uvicorn, selenium, mkdocs, xdist" 2>/dev/null || { echo "make test: \
		installing the extras (plots ray server, the test tools) into the venv"; \
		$(PYTHON) -m pip install -q matplotlib ray fastapi uvicorn selenium mkdocs pytest-xdist; }
	$(PYTHON) -m mkdocs build --strict --site-dir site -q  # the docs: no broken link, no page missing from the nav
	$(PYTHON) -m grader tasks --check
	@# four test processes on CI's two cores: most tests wait (on workers, time limits, a subprocess), and one
	@# process per file keeps each module's fixtures (the kits, the similarity class) built once
	$(PYTHON) -m pytest tests -q -n 4 --dist loadfile --durations=15
	$(PYTHON) -m grader selftest --device cpu

selftest: .venv/.ready
	$(PYTHON) -m grader selftest --device $(DEVICE)

grade: .venv/.ready
	$(PYTHON) -m grader batch submissions --homework hw4_int8 --manifest submissions/manifest.csv --device $(DEVICE)

clean:
	rm -rf results .pytest_cache site
