#!/usr/bin/env bash
# One whole GPU pass (../shared/gpu/README.md): install the carried wheels, run the `cuda`
# tests, record snapshots. Usage: bash scripts/gpu-check.sh OUTDIR [STEP ...]
# A whole pass no longer fits one ten-minute device call (the `cuda` tests alone took 416 s on an
# H100, 2026-12-06), so its steps can be named and spread over calls; none named runs them all:
#   tests snapshots coverage real peers pytorch-suite gpt-fast megatron
# .whl/ also needs tensordict's wheel for scripts/real_programs.py's cudagraphmodule, here:
#   pip download --no-deps --only-binary=:all: --python-version 3.12 --platform manylinux_2_28_x86_64 \
#     --platform manylinux_2_17_x86_64 -d .whl tensordict==0.14.0 cloudpickle orjson pyvers
# Optional peers in .peers/ (git-ignored, carried with `carry: [".whl", ".peers"]`), each run when
# present: pytorch_suite/test_cuda.py (PyTorch's file for the device's torch), gpt-fast/ (its
# model.py and generate.py), megatron/ (the megatron-core cp312 wheel from PyPI).
set -o pipefail
OUT=${1:?usage: gpu-check.sh OUTDIR [STEP ...]}
shift
ALL_STEPS=(tests snapshots coverage real peers pytorch-suite gpt-fast megatron hf)
STEPS=("$@")
[ ${#STEPS[@]} -eq 0 ] && STEPS=("${ALL_STEPS[@]}")
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1 || echo "editable install failed; using PYTHONPATH"
nvidia-smi --query-gpu=name,driver_version --format=csv | tee "$OUT/device.txt"

step_tests() {  # -rs: each skipped test with its reason
  python3 -m pytest -m cuda -q -p no:cacheprovider -rs 2>&1 | tee "$OUT/gpu-tests.log"
}

step_snapshots() {
  python3 scripts/record_snapshots.py "$OUT/snapshots" 2>&1 | tee "$OUT/record.log"
  tar -C "$OUT" -czf "$OUT/snapshots.tgz" snapshots && rm -rf "$OUT/snapshots"
}

step_coverage() {  # profiler traces the coverage report's CPU tests read (fixtures/snapshots/coverage/)
  python3 scripts/record_coverage_trace.py "$OUT/coverage" 2>&1 | tail -3
}

# Real programs and peers' CUDA-graph suites under the sanitizer (issue 18). A failure here does
# not stop the pass. Each step's logs go into a tarball, its summaries into one text file.
step_real() {
  bash scripts/check_real_programs.sh "$OUT/real" || echo "check_real_programs.sh exited $?"
  cp "$OUT/real/real-programs.txt" "$OUT/real-programs.txt" 2>/dev/null
  tar -C "$OUT" -czf "$OUT/real.tgz" real && rm -rf "$OUT/real"
}

step_peers() {
  bash scripts/peer_suites.sh "$OUT/peers" tensordict || echo "peer_suites.sh tensordict exited $?"
  bash scripts/peer_suites.sh "$OUT/peers" torchrl || echo "peer_suites.sh torchrl exited $?"
  cat "$OUT"/peers/peer-suites-*.txt >"$OUT/peer-suites.txt" 2>/dev/null
  tar -C "$OUT" -czf "$OUT/peers.tgz" peers && rm -rf "$OUT/peers"
}

# PyTorch's own CUDA-graph tests (issues 32, 33), when the file for the device's torch was
# carried (.peers/pytorch_suite/test_cuda.py; PyTorch's file, never committed here).
step_pytorch-suite() {
  [ -f .peers/pytorch_suite/test_cuda.py ] || { echo "pytorch-suite: .peers/pytorch_suite/test_cuda.py not carried"; return; }
  bash scripts/pytorch_graph_suite.sh "$OUT/pytorch-suite" .peers/pytorch_suite/test_cuda.py \
    || echo "pytorch_graph_suite.sh: some test's outcome differs (see summary.txt)"
  rm -f "$OUT"/pytorch-suite/*.json  # the reports are large; the logs name every finding
}

# gpt-fast's own compiled decode (issue 32), when its model.py and generate.py were carried
# (.peers/gpt-fast; pytorch-labs/gpt-fast's files, never committed here).
step_gpt-fast() {
  [ -f .peers/gpt-fast/generate.py ] || { echo "gpt-fast: .peers/gpt-fast not carried"; return; }
  bash scripts/check_gpt_fast.sh "$OUT/gpt-fast" .peers/gpt-fast || echo "check_gpt_fast.sh exited $?"
  rm -f "$OUT"/gpt-fast/*.pt
}

# Megatron-core's local CUDA graphs (issue 32), when its wheel was carried (.peers/megatron/).
step_megatron() {
  compgen -G ".peers/megatron/megatron_core-*.whl" >/dev/null || { echo "megatron: no wheel in .peers/megatron"; return; }
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .peers/megatron/megatron_core-*.whl
  bash scripts/check_megatron_local.sh "$OUT/megatron" || echo "check_megatron_local.sh exited $?"
  rm -f "$OUT"/megatron/*.pt
}

# Hugging Face generate() with a static cache and reduce-overhead (issue 32): transformers is
# installed on the GPU machine; the model is built from a config with random weights.
step_hf() {
  bash scripts/check_hf_generate.sh "$OUT/hf" || echo "check_hf_generate.sh exited $?"
  rm -f "$OUT"/hf/*.pt
}

for step in "${STEPS[@]}"; do
  if declare -F "step_$step" >/dev/null; then
    echo "== $step"
    "step_$step"
  else
    echo "gpu-check.sh: no step '$step' (${ALL_STEPS[*]})" >&2
    exit 2
  fi
done
