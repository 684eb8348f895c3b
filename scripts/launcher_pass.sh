#!/usr/bin/env bash
# One GPU pass for the launcher (issue 19): CUDA tests, new snapshots, zoo, speed, training zoo.
# Usage: scripts/launcher_pass.sh OUTDIR [STAGES]   (STAGES: comma list of tests,snap,zoo,speed,train)
set -u
FINAL=${1:?OUTDIR}
STAGES=${2:-tests,snap,zoo,speed,train}
OUT="$FINAL/r"  # everything goes into one tarball at the end (few files come back)
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/device.txt" 2>&1
python3 -c "import torch, cuda.bindings as b; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cuda-bindings', b.__version__)" >> "$OUT/device.txt" 2>&1
stage() { case ",$STAGES," in *",$1,"*) return 0;; esac; return 1; }
if stage tests; then
  PYTHONUNBUFFERED=1 timeout "${T_TESTS:-200}" python3 -u -m pytest -m cuda -v -rs -p no:cacheprovider ${TESTS:-} > "$OUT/cuda-tests.log" 2>&1
  echo "tests rc $?: $(tail -1 "$OUT/cuda-tests.log")"
fi
if stage snap; then
  mkdir -p "$OUT/snapshots" && cp fixtures/snapshots/SUMMARY.json "$OUT/snapshots/"
  timeout 90 python3 scripts/record_snapshots.py "$OUT/snapshots" gemm_bf16,output_reuse > "$OUT/snapshots/record-launcher.log" 2>&1
  echo "snap rc $?"; grep "^==" "$OUT/snapshots/record-launcher.log"
fi
if stage zoo; then
  timeout "${T_ZOO:-170}" python3 benchmarks/launcher_zoo.py --json "$OUT/launcher_zoo.json" > "$OUT/launcher_zoo.log" 2>&1
  echo "zoo rc $?"; grep -E "FAIL|capturable passed" "$OUT/launcher_zoo.log" | cut -c1-240
fi
if stage speed; then
  timeout "${T_SPEED:-130}" python3 benchmarks/launcher_speed.py ${SPEED_ARGS:-} --json "$OUT/launcher_speed.json" > "$OUT/launcher_speed.log" 2>&1
  echo "speed rc $?"; grep -E "^\| (MLP|fan-out|transformer|compiled)" "$OUT/launcher_speed.log" | cut -c1-260
fi
if stage train; then
  timeout "${T_TRAIN:-150}" python3 benchmarks/launcher_train_zoo.py --json "$OUT/launcher_train_zoo.json" > "$OUT/launcher_train_zoo.log" 2>&1
  echo "train rc $?"; grep -E "PASS|FAIL|bit-identical" "$OUT/launcher_train_zoo.log" | cut -c1-200
fi
if stage diag; then
  timeout 40 python3 scripts/diag_launcher.py --device-variants > "$OUT/diag-device.log" 2>&1
  echo "diag rc $?"; cut -c1-400 "$OUT/diag-device.log" | tail -8
fi
tar -C "$FINAL" -czf "$FINAL/results.tgz" r && rm -rf "$OUT"
