#!/usr/bin/env bash
# `make setup`: create .venv with what the grader needs, and the grader itself as a package (`triton-grader`, an
# editable install: it grades from any folder).
#   - A torch that the system Python already has (a GPU box) is reused through --system-site-packages.
#   - Otherwise torch 2.13.0's CPU build comes from TORCH_INDEX (default: PyTorch's CPU index; a plain
#     `pip install torch` would pull a CUDA build of several GB). Where that index cannot be reached, pip's own
#     index and local wheels are asked for torch==2.13.0 instead, and the script says so.
#   - EXTRAS: optional parts, from pyproject.toml's optional-dependencies (default "plots": results/summary.png
#     and the puzzles' pictures; "ray" adds the Ray backend, about 2 GB; "server" the submission server (FastAPI,
#     uvicorn) and Selenium for its browser test; `make test` installs all three).
set -euo pipefail
PY=${PY:-python3}
VENV=${VENV:-.venv}
TORCH=${TORCH:-torch==2.13.0}
TORCH_INDEX=${TORCH_INDEX-https://download.pytorch.org/whl/cpu}
EXTRAS=${EXTRAS-plots}
reachable() {  # an index answers within 10 s
  "$PY" - "$1" <<'PYEOF' 2>/dev/null
import sys, urllib.request
urllib.request.urlopen(sys.argv[1].rstrip("/") + "/torch/", timeout=10)
PYEOF
}
extras=()
for extra in $EXTRAS; do
  case $extra in
    plots) extras+=(matplotlib) ;;
    ray) extras+=(ray) ;;
    server) extras+=(fastapi uvicorn jinja2 selenium) ;;
    *) echo "setup: unknown extra '$extra' (plots, ray, server)" >&2; exit 2 ;;
  esac
done
if "$PY" -c "import torch, triton" 2>/dev/null; then
  echo "setup: reusing the system's torch $("$PY" -c 'import torch; print(torch.__version__)')"
  "$PY" -m venv --system-site-packages "$VENV"
else
  "$PY" -m venv "$VENV"
  if [ -n "$TORCH_INDEX" ] && reachable "$TORCH_INDEX"; then
    "$VENV/bin/python" -m pip install -q "$TORCH" --index-url "$TORCH_INDEX"
  else
    echo "setup: ${TORCH_INDEX:-TORCH_INDEX (empty)} cannot be reached: $TORCH from pip's own index and wheels" \
         "(a CPU build where the machine keeps one; on PyPI that is a CUDA build of several GB)"
    "$VENV/bin/python" -m pip install -q "$TORCH"
  fi
  "$VENV/bin/python" -m pip install -q triton
fi
"$VENV/bin/python" -m pip install -q numpy pytest pytest-xdist pytest-json-report pyyaml tqdm pydantic nbformat markupsafe httpx ruff jsonschema import-linter hypothesis mkdocs ${extras[@]+"${extras[@]}"}
# The grader as a package: `triton-grader ...` from any folder (the tasks stay where they are: an editable install).
if ! "$VENV/bin/python" -m pip install -q --no-deps --no-build-isolation -e . 2>/dev/null; then
  echo "setup: the triton-grader command was not installed (setuptools >= 64 missing); \`python -m grader\` from" \
       "this folder works all the same"
fi
"$VENV/bin/python" -c "import torch, triton, pytest_jsonreport, yaml; print('setup: torch', torch.__version__, 'triton', triton.__version__)"
# What this venv has of the extras, for `make setup` to tell when one asked for is missing
{ for extra in $EXTRAS; do echo "$extra"; done; cat "$VENV/.extras" 2>/dev/null || true; } | sort -u \
  > "$VENV/.extras.new"
mv "$VENV/.extras.new" "$VENV/.extras"
touch "$VENV/.ready"
