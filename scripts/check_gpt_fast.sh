#!/usr/bin/env bash
# gpt-fast's own compiled decode (its model.py and generate.py, carried in .peers/gpt-fast, never
# committed) on a GPU (issue 32): run twice plainly (deterministic), under `graphlint sanitize`
# and under `graphlint sanitize --poison`; every run must give bit-identical sequences, and
# every graph must be analysed.
#   Usage: bash scripts/check_gpt_fast.sh OUTDIR [GPT_FAST_DIR]   (graphlint importable)
set -u -o pipefail
OUT=${1:?usage: check_gpt_fast.sh OUTDIR [GPT_FAST_DIR]}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
cd "$(dirname "$0")/.."
GPT_FAST=${2:-.peers/gpt-fast}
PY=${PYTHON:-python3}
PROGRAM=(scripts/gpt_fast_decode_program.py "$GPT_FAST")
LIMIT=${GRAPHLINT_GPT_FAST_TIMEOUT:-200}
for run in plain1 plain2; do
  timeout "$LIMIT" "$PY" "${PROGRAM[@]}" "$OUT/$run.pt" >"$OUT/$run.log" 2>&1
done
timeout "$LIMIT" "$PY" -m graphlint sanitize --report "$OUT/findings.json" \
  -- "$PY" "${PROGRAM[@]}" "$OUT/sanitized.pt" >"$OUT/sanitized.log" 2>&1
timeout "$LIMIT" "$PY" -m graphlint sanitize --poison --report "$OUT/poisoned-findings.json" \
  -- "$PY" "${PROGRAM[@]}" "$OUT/poisoned.pt" >"$OUT/poisoned.log" 2>&1
{
  grep -h "^sequences:" "$OUT/plain1.log" | head -1
  for run in sanitized poisoned; do
    echo "$run: $(grep -h -E 'graphlint sanitize:|--poison:|refused:' "$OUT/$run.log" | tr '\n' ' ')"
  done
  "$PY" -c 'import sys, torch
runs = {name: torch.load(sys.argv[1] + "/" + name + ".pt")["sequences"] for name in ("plain1", "plain2", "sanitized", "poisoned")}
for name in ("plain2", "sanitized", "poisoned"):
    print("plain1 vs", name + ":", "bit-identical" if torch.equal(runs["plain1"], runs[name]) else "DIFFERENT")' "$OUT"
} 2>&1 | tee "$OUT/gpt-fast.txt"
