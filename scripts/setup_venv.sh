#!/usr/bin/env bash
# Create .venv with what the grader needs. A torch that the system Python already has (a GPU box) is reused
# through --system-site-packages; otherwise the CPU build of torch 2.13.0 is installed (an unpinned torch would
# pull a CUDA build of several GB).
set -euo pipefail
PY=${PY:-python3}
VENV=${VENV:-.venv}
if "$PY" -c "import torch, triton" 2>/dev/null; then
  echo "setup: reusing the system's torch $("$PY" -c 'import torch; print(torch.__version__)')"
  "$PY" -m venv --system-site-packages "$VENV"
  "$VENV/bin/python" -m pip install -q pytest-json-report pyyaml numpy ruff matplotlib jsonschema
else
  "$PY" -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q torch==2.13.0
  "$VENV/bin/python" -m pip install -q triton numpy pytest pytest-json-report pyyaml ruff matplotlib ray jsonschema
fi
"$VENV/bin/python" -c "import torch, triton, pytest_jsonreport, yaml; print('setup: torch', torch.__version__, 'triton', triton.__version__)"
touch "$VENV/.ready"
