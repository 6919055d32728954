#!/usr/bin/env bash
# The GPU box's measurements, one step per device call (each within its 10-minute limit), from the repository's
# root on the box. Before the first call, here (a machine with pip):
#     scripts/gpu_session.sh wheels      # the cp312 wheels the box's image lacks, into .whl/ (git-ignored)
# then, through the device tool, with carry [".whl"] (and ".before" for `compare`):
#     bash scripts/gpu_session.sh selftest             # selftest --device cuda (~6 min on the H200 box)
#     bash scripts/gpu_session.sh compare [N]          # the cost table (bench_class --compare), N students;
#                                                      # ROWS=latency (or full,latency...) for fewer rows,
#                                                      # BEFORE_ROWS for the older tree's (default: ROWS)
#     PAIRS=2 ROWS=full bash scripts/gpu_session.sh compare [N]
#                                                      # before/after alternating (ABAB), each row in a fresh
#                                                      # process, and each pair's ratio: the box's drift between
#                                                      # runs (up to 20%) falls on both trees alike
#     bash scripts/gpu_session.sh pytest TESTS...      # pytest on the box (the CUDA-only tests)
#     bash scripts/gpu_session.sh server [TASK IDLE BURST GRADE_RUNS]   # the server (bench_server.py): idle
#                                                      # and burst in separate calls fit the 10-minute limit
# `compare` also measures the tree in .before/ (an older commit: `git archive REV | tar -x -C .before`, and
# /.before/ in .git/info/exclude), with this tree's benchmark scripts, when that folder exists.
# Logs go to $OUT (what the device tool brings back).
set -o pipefail
WHEELS="annotated_doc==0.0.7 annotated_types==0.8.0 fastapi==0.165.0 fastjsonschema==2.22.3 jsonschema==4.26.0
jinja2==3.1.6 jsonschema_specifications==2025.9.1 jupyter_core==5.9.1 nbformat==5.11.1 opentelemetry_api==1.45.2
platformdirs==4.14.9 pydantic==2.14.4 pydantic_core==2.50.5 pytest_json_report==1.5.0 pytest_metadata==3.1.1
referencing==0.37.0 rpds_py==2026.9.1 starlette==1.10.0 traitlets==5.16.1 typing_extensions==4.16.0
typing_inspection==0.4.5 uvicorn==0.54.0"
OUT=${OUT:-/tmp/gpu-session}
mkdir -p "$OUT"
step=${1:?a step: wheels, selftest, compare, server or pytest}
shift
if [ "$step" = wheels ]; then
    # fastapi 0.165 imports opentelemetry; the box has httpx, anyio, h11, tqdm, markupsafe and hypothesis already
    # shellcheck disable=SC2086
    exec python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        -d .whl $WHEELS
fi
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
start=$(date +%s)
case "$step" in
selftest)
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
    python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'
    python3 -m grader selftest --device cuda > "$OUT/selftest.log" 2>&1
    echo "selftest rc=$? in $(( $(date +%s) - start )) s"
    grep -v '^ok \|^     \|^\[' "$OUT/selftest.log" | tail -40 ;;
compare)
    n=${1:-10}
    if [ -n "${PAIRS:-}" ] && [ -d .before ]; then
        cp scripts/bench_class.py scripts/bench_floor.py .before/scripts/
        rows=${ROWS:-full}
        for k in $(seq 1 "$PAIRS"); do
            for tree in before after; do
                dir=.; [ $tree = before ] && dir=.before
                t0=$(date +%s)
                (cd $dir && python3 scripts/bench_class.py --students "$n" --serial-students 0 --compare \
                    --rows "$rows" --device cuda) > "$OUT/$tree-$k.log" 2>&1
                echo "$tree $k rc=$? in $(( $(date +%s) - t0 )) s"
                grep -E "^  ($(echo "$rows" | tr , '|')) " "$OUT/$tree-$k.log" | sed "s/^/  $tree $k:/"
            done
        done
        # each pair's core-seconds, after over before, row by row (the rows' second number)
        for row in $(echo "$rows" | tr , ' '); do
            for k in $(seq 1 "$PAIRS"); do
                b=$(awk -v r="$row" '$1 == r && $2 ~ /^[0-9.]+$/ {print $3}' "$OUT/before-$k.log" | tail -1)
                a=$(awk -v r="$row" '$1 == r && $2 ~ /^[0-9.]+$/ {print $3}' "$OUT/after-$k.log" | tail -1)
                [ -n "$a" ] && [ -n "$b" ] && awk -v r="$row" -v k="$k" -v a="$a" -v b="$b" \
                    'BEGIN {printf "pair %s %s: core-s %s -> %s (%.3fx)\n", k, r, b, a, a / b}'
            done
        done
        exit 0
    fi
    if [ -d .before ]; then
        cp scripts/bench_class.py scripts/bench_floor.py .before/scripts/
        (cd .before && python3 scripts/bench_class.py --students "$n" --serial-students 0 --compare \
            --rows "${BEFORE_ROWS:-${ROWS:-full,latency}}" --device cuda) > "$OUT/before.log" 2>&1
        echo "before rc=$? in $(( $(date +%s) - start )) s"
        grep -v '^trace\|^student\|^\[' "$OUT/before.log" | tail -45
        start=$(date +%s)
    fi
    python3 scripts/bench_class.py --students "$n" --serial-students 0 --compare --rows "${ROWS:-floor,bare,full,latency}" \
        --device cuda > "$OUT/after.log" 2>&1
    echo "compare rc=$? in $(( $(date +%s) - start )) s"
    grep -v '^trace\|^student\|^\[' "$OUT/after.log" | tail -70 ;;
server)
    python3 scripts/bench_server.py --device cuda --homework hw4_int8 --task "${1:-10_quantize_global_int8}" \
        --idle "${2:-10}" --burst "${3:-100}" --students 20 --grade-runs "${4:-3}" --keep /tmp/bench-server \
        > "$OUT/server_bench.log" 2>&1
    echo "bench_server rc=$? in $(( $(date +%s) - start )) s"
    tail -40 "$OUT/server_bench.log"
    cp /tmp/bench-server/server.log "$OUT/server.log" 2>/dev/null ;;
pytest)
    python3 -m pytest -q -p no:cacheprovider "$@" > "$OUT/pytest.log" 2>&1
    echo "pytest rc=$? in $(( $(date +%s) - start )) s"
    tail -30 "$OUT/pytest.log" ;;
*)
    echo "unknown step $step"; exit 2 ;;
esac
