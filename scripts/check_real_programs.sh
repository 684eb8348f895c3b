#!/usr/bin/env bash
# The real programs of scripts/real_programs.py under the runtime sanitizer (issue 18), on a GPU.
# For each program: two plain runs (bit-identical: the program is deterministic), one under
# `graphlint sanitize --mode error` (bit-identical to the plain run: the sanitizer changes
# nothing; no findings but informational GL500/GL508), and one under `--poison` (GL511: a clean
# program computes bit-identical results with its refilled inputs poisoned between replays, and
# reports no GL511). One verdict line per program; the
# summary goes to OUTDIR/real-programs.txt.
#   Usage: bash scripts/check_real_programs.sh OUTDIR
# GRAPHLINT_REAL_DEVICE=cpu is only a smoke test of this script without a GPU (the sanitizer
# is then inactive, so --allow-inactive is passed).
set -u -o pipefail
OUTDIR=${1:?usage: check_real_programs.sh OUTDIR}
mkdir -p "$OUTDIR"
OUTDIR=$(cd "$OUTDIR" && pwd)
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
DEVICE=${GRAPHLINT_REAL_DEVICE:-cuda}
STEP_TIMEOUT=${GRAPHLINT_REAL_TIMEOUT:-150}
export CUBLAS_WORKSPACE_CONFIG=:4096:8 PYTHONUNBUFFERED=1
export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}$PWD
SUMMARY="$OUTDIR/real-programs.txt"
: >"$SUMMARY"
say() { echo "$*" | tee -a "$SUMMARY"; }

# The sanitizer refuses versions outside its tested matrix; accept them only if they differ.
untested=$("$PY" -c 'from graphlint.runtime_sanitizer.availability import installed_versions, untested_versions
print(", ".join(untested_versions(installed_versions())))' 2>&1)
versions=$("$PY" -c 'from graphlint.runtime_sanitizer.availability import installed_versions; print(installed_versions())' 2>&1)
say "versions: $versions"
if [ -n "$untested" ] && [ "$DEVICE" != cpu ]; then
  export GRAPHLINT_SANITIZE_UNTESTED=1
  say "untested versions ($untested): GRAPHLINT_SANITIZE_UNTESTED=1 is set"
fi
extra=()
[ "$DEVICE" = cpu ] && extra=(--allow-inactive)

for prog in decode cudagraphmodule graphed_training; do
  base="$OUTDIR/$prog"
  rm -f "$base"-*.pt "$base"-findings.json "$base"-poisoned-findings.json
  start=$SECONDS
  for run in plain1 plain2; do
    timeout "$STEP_TIMEOUT" "$PY" scripts/real_programs.py --program "$prog" --device "$DEVICE" \
      --out "$base-$run.pt" >"$base-$run.log" 2>&1
    echo "exit $?" >>"$base-$run.log"
  done
  timeout "$STEP_TIMEOUT" "$PY" -m graphlint sanitize --mode error "${extra[@]}" --report "$base-findings.json" \
    -- "$PY" scripts/real_programs.py --program "$prog" --device "$DEVICE" --out "$base-sanitized.pt" \
    >"$base-sanitized.log" 2>&1
  echo "exit $?" >>"$base-sanitized.log"
  timeout "$STEP_TIMEOUT" "$PY" -m graphlint sanitize --poison --mode error "${extra[@]}" \
    --report "$base-poisoned-findings.json" \
    -- "$PY" scripts/real_programs.py --program "$prog" --device "$DEVICE" --out "$base-poisoned.pt" \
    >"$base-poisoned.log" 2>&1
  echo "exit $?" >>"$base-poisoned.log"
  say "== $prog ($((SECONDS - start)) s)"
  "$PY" - "$OUTDIR" "$prog" <<'EOF' 2>&1 | tee -a "$SUMMARY"
import json, re, sys
from pathlib import Path

import torch

out, prog = Path(sys.argv[1]), sys.argv[2]
base = out / prog


def exit_status(run):
    lines = (out / f"{prog}-{run}.log").read_text(errors="replace").splitlines()
    last = [line for line in lines if line.startswith("exit ")]
    return int(last[-1].split()[1]) if last else None


def load(run):
    path = out / f"{prog}-{run}.pt"
    return torch.load(path, map_location="cpu") if path.exists() else None


def bits(t):
    return t.detach().contiguous().view(torch.uint8) if t.dtype != torch.bool else t.to(torch.uint8)


def compare(a, b):
    """'' when bit-identical, else what differs."""
    if a is None or b is None:
        return "missing output"
    if a.keys() != b.keys():
        return f"keys differ: {sorted(a)} vs {sorted(b)}"
    differ = []
    for key in a:
        x, y = a[key], b[key]
        if x.dtype != y.dtype or x.shape != y.shape:
            differ.append(f"{key}: {x.dtype}{tuple(x.shape)} vs {y.dtype}{tuple(y.shape)}")
        elif not torch.equal(bits(x), bits(y)):
            if x.is_floating_point():
                worst = (x.double() - y.double()).abs().nan_to_num(float("inf")).max().item()
                differ.append(f"{key}: max |diff| {worst:.3g}")
            else:
                differ.append(f"{key}: {int((x != y).sum())} elements differ")
    return "; ".join(differ)


status = {run: exit_status(run) for run in ("plain1", "plain2", "sanitized", "poisoned")}
plain1, plain2, sanitized = load("plain1"), load("plain2"), load("sanitized")
determinism = compare(plain1, plain2)
unchanged = compare(plain1, sanitized)
poison_unchanged = compare(plain1, load("poisoned"))
print(f"exit status: {status}")
print(f"plain1 vs plain2 (determinism): {determinism or 'bit-identical'}")
print(f"plain1 vs sanitized (sanitizer changes nothing): {unchanged or 'bit-identical'}")
print(f"plain1 vs --poison (a clean program computes the same): {poison_unchanged or 'bit-identical'}")
for line in (out / f"{prog}-poisoned.log").read_text(errors="replace").splitlines():
    if line.startswith(("  --poison:", "  stale, restored", "  refused: --poison")):
        print(f"poison: {line.strip()}")
log = (out / f"{prog}-sanitized.log").read_text(errors="replace").splitlines()
for line in log:
    if line.startswith("graphlint sanitize") or line.startswith("  refused:"):
        print(f"sanitizer: {line}")
report = out / f"{prog}-findings.json"
findings = json.loads(report.read_text()) if report.exists() else None
real = []
if findings is None:
    print("findings: no report written")
else:
    print(f"findings: {len(findings)}")
    for f in findings:
        print(f"  {f['path']}:{f['line']}: {f['code']} [{f['name']}] ({f['severity']}) {f['message']}")
    real = [f for f in findings if f["severity"] != "info"]
poisoned_report = out / f"{prog}-poisoned-findings.json"
poisoned_findings = json.loads(poisoned_report.read_text()) if poisoned_report.exists() else None
for f in poisoned_findings or []:
    if f["severity"] != "info":
        print(f"  --poison: {f['path']}:{f['line']}: {f['code']} {f['message']}")
problems = []
if any(s != 0 for s in status.values()):
    problems.append("a run failed")
if determinism:
    problems.append("not deterministic")
if unchanged:
    problems.append("sanitized output differs")
if poison_unchanged:
    problems.append("--poison output differs")
if poisoned_findings is None:
    problems.append("no --poison findings report")
elif any(f["severity"] != "info" for f in poisoned_findings):
    problems.append("--poison reported non-informational findings")
elif any("--poison" in f["message"] and f["code"] == "GL500" for f in poisoned_findings):
    problems.append("--poison stopped")
if findings is None:
    problems.append("no findings report")
elif real:
    problems.append(f"{len(real)} non-informational finding(s): {sorted({f['code'] for f in real})}")
verdict = "PASS" if not problems else "FAIL (" + "; ".join(problems) + ")"
if any(line.startswith("graphlint sanitize: inactive") for line in log):
    verdict += ", but the sanitizer was inactive: nothing was checked"
elif any(re.search(r"; 0 graphs seen", line) for line in log):
    verdict += ", but the sanitizer saw no graph"
print(f"VERDICT {prog}: {verdict}")
EOF
done
say "== verdicts"
grep '^VERDICT' "$SUMMARY" | sed 's/^VERDICT /  /'
! grep -q '^VERDICT .*: FAIL' "$SUMMARY"
