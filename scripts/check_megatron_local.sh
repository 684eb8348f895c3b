#!/usr/bin/env bash
# Megatron-core's local CUDA graphs (cuda_graph_impl="local") on one GPU, plain and under
# `graphlint sanitize` (issue 32): losses and weights must be bit-identical, every graph analysed.
#   Usage: bash scripts/check_megatron_local.sh OUTDIR    (megatron-core importable, graphlint too)
set -u -o pipefail
OUT=${1:?usage: check_megatron_local.sh OUTDIR}
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
PROGRAM=scripts/megatron_local_graphs_program.py
timeout 300 "$PY" "$PROGRAM" "$OUT/megatron-plain.pt" 2>&1 | tail -5 | tee "$OUT/megatron.log"
MASTER_PORT=29518 timeout 400 "$PY" -m graphlint sanitize --report "$OUT/megatron-findings.json" \
  -- "$PY" "$PROGRAM" "$OUT/megatron-sanitized.pt" 2>&1 | tail -40 | tee -a "$OUT/megatron.log"
"$PY" -c 'import sys, torch
a, b = torch.load(sys.argv[1]), torch.load(sys.argv[2])
same = torch.equal(a["losses"], b["losses"]) and all(torch.equal(a["weights"][k], b["weights"][k]) for k in a["weights"])
print("bit-identical (losses and weights):", same)' "$OUT/megatron-plain.pt" "$OUT/megatron-sanitized.pt" 2>&1 | tee -a "$OUT/megatron.log"
