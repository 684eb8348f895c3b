#!/usr/bin/env bash
# PyTorch's own CUDA-graph tests (`test/test_cuda.py -k graph`) plain and under graphlint's
# pytest plugin (issues 32 and 33), on a GPU. The file is PyTorch's, fetched for the device's
# torch and never committed here: pass its path. It runs twice, plain and with
# --graphlint-sanitize (and a third time with --graphlint-compare-eager when asked), each with
# JUnit XML, and the outcome of every test is compared: a sanitized run must give the same.
#   Usage: bash scripts/pytorch_graph_suite.sh OUTDIR PATH/TO/test_cuda.py [compare]
# Needs graphlint importable (installed, or the repository on PYTHONPATH: then the plugin is
# loaded with -p) and
# psutil and expecttest, which test_cuda.py and torch's test helpers import.
set -u -o pipefail
OUTDIR=${1:?usage: pytorch_graph_suite.sh OUTDIR test_cuda.py [compare]}
SUITE_FILE=$(cd "$(dirname "${2:?path to test_cuda.py}")" && pwd)/$(basename "$2")
mkdir -p "$OUTDIR"
OUTDIR=$(cd "$OUTDIR" && pwd)
cd "$(dirname "$0")/.."
REPO=$PWD
PY=${PYTHON:-python3}
export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}$REPO GRAPHLINT_SUITE_FILE=$SUITE_FILE
WORK=$(mktemp -d)
cp "$SUITE_FILE" "$WORK/test_cuda.py"
cp "$REPO/scripts/pytorch_suite_compat.py" "$WORK/conftest.py"
cd "$WORK"
COMMON=(-p no:cacheprovider -q -rA -k graph)
PLUGIN=(--graphlint-sanitize)
# An installed graphlint registers its plugin itself; from a checkout on PYTHONPATH, load it.
if ! "$PY" -c "import importlib.metadata as m, sys; sys.exit(not any(e.name == 'graphlint' for e in m.entry_points(group='pytest11')))"; then
  PLUGIN=(-p graphlint.runtime_sanitizer.pytest_plugin "${PLUGIN[@]}")
fi
run() {  # name, extra pytest arguments...
  local name=$1; shift
  local start=$SECONDS
  timeout "${GRAPHLINT_SUITE_TIMEOUT:-500}" "$PY" -m pytest "${COMMON[@]}" "$@" --junitxml "$OUTDIR/$name.xml" test_cuda.py >"$OUTDIR/$name.log" 2>&1
  local result
  result=$(grep -E "(passed|failed|skipped|error|deselected).* in [0-9.]+s" "$OUTDIR/$name.log" | tail -1)
  echo "$name: ${result:-no result, see $name.log} ($((SECONDS - start)) s); $(grep -h '\[compat\]' "$OUTDIR/$name.log")" | tee -a "$OUTDIR/summary.txt"
}
run plain
run sanitize "${PLUGIN[@]}" --graphlint-report "$OUTDIR/sanitize.json"
[ "${3:-}" = compare ] && run compare "${PLUGIN[@]}" --graphlint-compare-eager --graphlint-report "$OUTDIR/compare.json"
"$PY" "$REPO/scripts/junit_outcomes.py" "$OUTDIR/plain.xml" "$OUTDIR"/sanitize.xml ${3:+"$OUTDIR/compare.xml"} | tee -a "$OUTDIR/summary.txt"
