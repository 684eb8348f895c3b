#!/usr/bin/env bash
# Hugging Face generate() with a static cache, plain and under `graphlint sanitize`, on a GPU
# (issue 32): the tokens must be bit-identical, and every graph analysed.
#   Usage: bash scripts/check_hf_generate.sh OUTDIR    (transformers installed, graphlint importable)
set -u -o pipefail
OUT=${1:?usage: check_hf_generate.sh OUTDIR}
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
timeout 300 "$PY" scripts/hf_generate_program.py "$OUT/hf-plain.pt" 2>&1 | tail -5 | tee "$OUT/hf.log"
timeout 300 "$PY" -m graphlint sanitize --report "$OUT/hf-findings.json" \
  -- "$PY" scripts/hf_generate_program.py "$OUT/hf-sanitized.pt" 2>&1 | tail -30 | tee -a "$OUT/hf.log"
"$PY" -c 'import sys, torch
a, b = torch.load(sys.argv[1]), torch.load(sys.argv[2])
print("bit-identical:", torch.equal(a, b))' "$OUT/hf-plain.pt" "$OUT/hf-sanitized.pt" 2>&1 | tee -a "$OUT/hf.log"
