#!/usr/bin/env bash
# Peers' own CUDA-graph tests under graphlint's pytest plugin (issue 18), on a GPU.
# tensordict: `TestCudaGraphs` in test/compile/test_compile.py, test files at the commit of the
# release whose wheel is carried (.peers/tensordict/SOURCE.txt; the files are never committed
# here), run three ways: plain, --graphlint-sanitize, and --graphlint-sanitize=error with a JSON
# report. The same tests must pass all three ways, and every finding must be a real hazard.
# Logs, JUnit XML and findings go to OUTDIR; the summary to OUTDIR/peer-suites.txt.
# torchrl: `TestCompile` in test/compile/test_compile_collectors.py (collectors with a
# `cudagraph_policy`, which graphs the policy with tensordict's CudaGraphModule), with its own
# wheels (torchrl 0.14.0 needs tensordict 0.14.2) installed apart in /tmp/site-torchrl.
#   Usage: bash scripts/peer_suites.sh OUTDIR [tensordict|torchrl]
# Needs: the carried wheels installed (gpu-check.sh puts them in /tmp/site) and graphlint
# importable (editable install, or the repository on PYTHONPATH: then the plugin is loaded
# with -p).
set -u -o pipefail
OUTDIR=${1:?usage: peer_suites.sh OUTDIR [tensordict|torchrl]}
SUITE=${2:-tensordict}
mkdir -p "$OUTDIR"
OUTDIR=$(cd "$OUTDIR" && pwd)
cd "$(dirname "$0")/.."
REPO=$PWD
PY=${PYTHON:-python3}
MODE_TIMEOUT=${GRAPHLINT_PEER_TIMEOUT:-200}
export PYTHONUNBUFFERED=1 CUBLAS_WORKSPACE_CONFIG=:4096:8
export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}$REPO
SUMMARY="$OUTDIR/peer-suites-$SUITE.txt"
: >"$SUMMARY"
say() { echo "$*" | tee -a "$SUMMARY"; }

PEER="$REPO/.peers/$SUITE"
if [ "$SUITE" = torchrl ]; then
  node=test/compile/test_compile_collectors.py::TestCompile
else
  node=test/compile/test_compile.py::TestCudaGraphs
fi
if [ ! -f "$PEER/${node%%::*}" ]; then
  say "$SUITE: SKIPPED: $PEER/${node%%::*} is missing (carry .peers)"
  exit 1
fi
if [ "$SUITE" = torchrl ]; then  # its own wheels, apart: installed only once its tests are here
  "$PY" -m pip install -q --no-index --no-deps --no-compile --target /tmp/site-torchrl "$REPO"/.peers/torchrl-wheels/*.whl
  export PYTHONPATH=/tmp/site-torchrl:$PYTHONPATH
fi
say "$SUITE tests: $(cat "$PEER/SOURCE.txt" 2>/dev/null)"
say "versions: $("$PY" -c 'import sys, torch, tensordict, pytest
print(f"python {sys.version.split()[0]}, torch {torch.__version__} (CUDA {torch.version.cuda}, device {torch.cuda.is_available()}), tensordict {tensordict.__version__} at {tensordict.__file__}, pytest {pytest.__version__}")' 2>&1 | tail -1)"

# The plugin: from its entry point when graphlint is installed, else named with -p.
plugin=()
if ! "$PY" -c 'import sys
from importlib.metadata import entry_points
sys.exit(0 if any(ep.value.startswith("graphlint.") for ep in entry_points(group="pytest11")) else 1)'; then
  plugin=(-p graphlint.runtime_sanitizer.pytest_plugin)
  say "graphlint's pytest11 entry point is not installed: loading the plugin with ${plugin[*]}"
fi

cd "$PEER"
run_mode() {  # name, extra pytest options...
  local name=$1
  shift
  local start=$SECONDS
  timeout "$MODE_TIMEOUT" "$PY" -m pytest -c pytest.ini --rootdir . -p no:cacheprovider "${plugin[@]}" -v \
    --junitxml "$OUTDIR/$SUITE-$name.xml" "$@" "$node" >"$OUTDIR/$SUITE-$name.log" 2>&1
  local status=$?
  local line
  line=$(grep -E '^=+ .*(passed|failed|error|skipped|no tests ran).* =+$' "$OUTDIR/$SUITE-$name.log" | tail -1)
  [ -n "$line" ] || line="no pytest summary; last line: $(grep -v '^[[:space:]]*$' "$OUTDIR/$SUITE-$name.log" | tail -1)"
  say "$SUITE $name: exit $status ($((SECONDS - start)) s): $line"
}
rm -f "$OUTDIR/$SUITE"-*
run_mode plain
run_mode sanitize --graphlint-sanitize
run_mode sanitize-error "--graphlint-sanitize=error" --graphlint-report "$OUTDIR/$SUITE-findings.json"

"$PY" - "$OUTDIR" "$SUITE" <<'EOF' 2>&1 | tee -a "$SUMMARY"
import json, sys
import xml.etree.ElementTree as ET
from pathlib import Path

out, suite = Path(sys.argv[1]), sys.argv[2]
modes = ("plain", "sanitize", "sanitize-error")
outcomes = {}  # mode -> {test: outcome}
for mode in modes:
    path = out / f"{suite}-{mode}.xml"
    if not path.exists():
        print(f"{mode}: no JUnit XML (the run did not finish)")
        outcomes[mode] = {}
        continue
    tests = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        name = f"{case.get('classname', '').rsplit('.', 1)[-1]}::{case.get('name')}"
        kinds = [child.tag for child in case]
        tests[name] = next((k for k in ("failure", "error", "skipped") if k in kinds), "passed")
    outcomes[mode] = tests
    counts = {k: sum(1 for v in tests.values() if v == k) for k in ("passed", "failure", "error", "skipped")}
    print(f"{mode}: {len(tests)} tests: " + ", ".join(f"{v} {k}" for k, v in counts.items()))
names = sorted(set().union(*outcomes.values()))
differ = [n for n in names if len({outcomes[m].get(n, "missing") for m in modes}) > 1]
print("per-test outcomes identical in all three modes" if not differ else "tests whose outcome differs by mode:")
for n in differ:
    print(f"  {n}: " + ", ".join(f"{m} {outcomes[m].get(n, 'missing')}" for m in modes))
for mode in ("sanitize", "sanitize-error"):
    log = (out / f"{suite}-{mode}.log")
    lines = log.read_text(errors="replace").splitlines() if log.exists() else []
    for i, line in enumerate(lines):
        if "graphlint sanitizer" in line and (line.startswith("=") or line.startswith("graphlint sanitizer:")):
            if line.startswith("graphlint sanitizer:"):
                print(f"{mode} header: {line}")
            else:
                section = []
                for follow in lines[i + 1:]:
                    if follow.startswith("="):
                        break
                    section.append(follow)
                print(f"{mode} sanitizer summary ({len(section)} lines):")
                for follow in section[:60]:
                    print(f"  {follow}")
report = out / f"{suite}-findings.json"
if report.exists():
    rows = json.loads(report.read_text())
    print(f"findings (--graphlint-sanitize=error report): {len(rows)}")
    for r in rows:
        print(f"  {r.get('test', '')}: {r['code']} [{r['name']}] ({r['severity']}) {r['path']}:{r['line']}: {r['message']}")
    real = [r for r in rows if r["severity"] != "info"]
    print(f"non-informational findings: {len(real)} {sorted({r['code'] for r in real})}")
else:
    print("findings: no report written")
plain = outcomes.get("plain", {})
ok = bool(plain) and not differ and all(v in ("passed", "skipped") for m in modes for v in outcomes[m].values())
print(f"VERDICT {suite}: {'PASS (same outcomes in all modes, all passed or skipped)' if ok else 'CHECK (see above)'}")
EOF
grep -q '^VERDICT .*: PASS' "$SUMMARY"
