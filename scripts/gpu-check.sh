#!/usr/bin/env bash
# One whole GPU pass (../shared/gpu/README.md): install the carried wheels, run the `cuda`
# tests, record snapshots. Usage: bash scripts/gpu-check.sh OUTDIR
# .whl/ also needs tensordict's wheel for scripts/real_programs.py's cudagraphmodule, here:
#   pip download --no-deps --only-binary=:all: --python-version 3.12 --platform manylinux_2_28_x86_64 \
#     --platform manylinux_2_17_x86_64 -d .whl tensordict==0.14.0 cloudpickle orjson pyvers
# Optional peers in .peers/ (git-ignored, carried with `carry: [".whl", ".peers"]`), each run when
# present: pytorch_suite/test_cuda.py (PyTorch's file for the device's torch), gpt-fast/ (its
# model.py and generate.py), megatron/ (the megatron-core cp312 wheel from PyPI).
set -o pipefail
OUT=${1:?usage: gpu-check.sh OUTDIR}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1 || echo "editable install failed; using PYTHONPATH"
nvidia-smi --query-gpu=name,driver_version --format=csv | tee "$OUT/device.txt"
python3 -m pytest -m cuda -q -p no:cacheprovider 2>&1 | tee "$OUT/gpu-tests.log"
python3 scripts/record_snapshots.py "$OUT/snapshots" 2>&1 | tee "$OUT/record.log"
tar -C "$OUT" -czf "$OUT/snapshots.tgz" snapshots && rm -rf "$OUT/snapshots"
# Profiler traces the coverage report's CPU tests read (fixtures/snapshots/coverage/)
python3 scripts/record_coverage_trace.py "$OUT/coverage" 2>&1 | tail -3
# Real programs and a peer's CUDA-graph suite under the sanitizer (issue 18). A failure here
# does not stop the pass. Their logs go into one tarball, their summaries into one text file.
bash scripts/check_real_programs.sh "$OUT/real" || echo "check_real_programs.sh exited $?"
bash scripts/peer_suites.sh "$OUT/peers" tensordict || echo "peer_suites.sh tensordict exited $?"
bash scripts/peer_suites.sh "$OUT/peers" torchrl || echo "peer_suites.sh torchrl exited $?"
cat "$OUT/real/real-programs.txt" "$OUT"/peers/peer-suites-*.txt >"$OUT/real-and-peers.txt" 2>/dev/null
tar -C "$OUT" -czf "$OUT/real-and-peers.tgz" real peers && rm -rf "$OUT/real" "$OUT/peers"
# PyTorch's own CUDA-graph tests (issues 32, 33), when the file for the device's torch was
# carried (.peers/pytorch_suite/test_cuda.py; PyTorch's file, never committed here).
if [ -f .peers/pytorch_suite/test_cuda.py ]; then
  bash scripts/pytorch_graph_suite.sh "$OUT/pytorch-suite" .peers/pytorch_suite/test_cuda.py \
    || echo "pytorch_graph_suite.sh: some test's outcome differs (see summary.txt)"
  rm -f "$OUT"/pytorch-suite/*.json  # the reports are large; the logs name every finding
fi
# gpt-fast's own compiled decode (issue 32), when its model.py and generate.py were carried
# (.peers/gpt-fast; pytorch-labs/gpt-fast's files, never committed here).
if [ -f .peers/gpt-fast/generate.py ]; then
  bash scripts/check_gpt_fast.sh "$OUT/gpt-fast" .peers/gpt-fast || echo "check_gpt_fast.sh exited $?"
  rm -f "$OUT"/gpt-fast/*.pt
fi
# Megatron-core's local CUDA graphs (issue 32), when its wheel was carried (.peers/megatron/).
if compgen -G ".peers/megatron/megatron_core-*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .peers/megatron/megatron_core-*.whl
  bash scripts/check_megatron_local.sh "$OUT/megatron" || echo "check_megatron_local.sh exited $?"
  rm -f "$OUT"/megatron/*.pt
fi
