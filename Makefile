# make setup  .venv with torch (CPU build where none is installed), triton, the test tools, and the grader as the
#             `triton-grader` command (EXTRAS="plots ray" for the Ray backend, "plots server" for the submission
#             server; run again with more extras to add them; TORCH_INDEX: see scripts/setup_venv.sh)
# make test   lint, the docs' strict build (mkdocs), every task checked (tasks --check), the grader's own tests,
#             and the selftest of every task on the CPU interpreter
# make grade  grade the demo class in submissions/ into results/
PYTHON := .venv/bin/python
DEVICE ?= auto

.PHONY: setup test grade lint selftest clean

EXTRAS ?= plots
export EXTRAS

.venv/.ready: scripts/setup_venv.sh pyproject.toml
	./scripts/setup_venv.sh

# Set up again when an extra asked for is not in the venv yet (`EXTRAS="plots server" make setup` on a venv made
# with "plots"): setup_venv.sh records what it installed in .venv/.extras.
setup: .venv/.ready
	@missing=$$(for e in $(EXTRAS); do grep -qx "$$e" .venv/.extras 2>/dev/null || echo "$$e"; done); \
	if [ -n "$$missing" ]; then echo "setup: adding the extras" $$missing; ./scripts/setup_venv.sh; \
	else echo "setup: .venv is ready, with the extras" $$(cat .venv/.extras 2>/dev/null); fi

lint: .venv/.ready
	$(PYTHON) -m ruff check grader reference tests scripts conformance
	.venv/bin/lint-imports  # the layer contracts in pyproject.toml

test: export EXTRAS = plots ray server
test: export GRADER_TESTS_NEED_RAY = 1
test: export GRADER_TESTS_NEED_BROWSER = 1
test: .venv/.ready lint
	@# a venv made by `make grade` or `make setup` lacks the extras the tests use: install them, never skip in silence
	@$(PYTHON) -c "import ray, matplotlib, fastapi, uvicorn, jinja2, selenium, mkdocs, xdist" 2>/dev/null || { echo "make test: \
		installing the extras (plots ray server, the test tools) into the venv"; \
		$(PYTHON) -m pip install -q matplotlib ray fastapi uvicorn jinja2 selenium mkdocs pytest-xdist; }
	$(PYTHON) -m mkdocs build --strict --site-dir site  # the docs: no broken link, no page missing from the nav (not -q: it hides the warnings strict counts)
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
