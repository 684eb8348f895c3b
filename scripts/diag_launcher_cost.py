"""Where a launcher call's time goes (needs CUDA): the call, and its parts one by one.

For a fan-out graph (one input read by N kernels, so N patched nodes) it times, per part, the
median GPU (CUDA events) and CPU (perf_counter) microseconds over 200 calls: the whole call,
the refusal checks, the output allocation, the updater launch, the replay, updater + replay,
and plain copy-in/replay/clone-out. Usage: ``python scripts/diag_launcher_cost.py [N ...]``.
"""

from __future__ import annotations

import json
import sys

import torch

from benchmarks.launcher_speed import FanOut
from graphlint.launcher.launcher import ParameterizedLauncher
from scripts.probe_device_updates import median_us


def parts(reads: int, updates: str) -> dict:
    model = FanOut(reads)
    pool = [torch.randn(4096, device="cuda") for _ in range(8)]
    launcher = ParameterizedLauncher(model, (pool[0],), updates=updates)
    turn = iter(range(10**9))
    out_meta = launcher._out_meta[0]
    row = {"reads": reads, "updates": updates, "patched": len(launcher._nodes), "note": launcher.update_note}
    row["call"] = median_us(lambda: launcher(pool[next(turn) % 8]))
    row["checks"] = median_us(lambda: launcher._why_not([pool[0]]))
    row["alloc"] = median_us(lambda: torch.empty_strided(out_meta[0], out_meta[1], dtype=out_meta[2], device="cuda"))
    out = torch.empty_strided(out_meta[0], out_meta[1], dtype=out_meta[2], device="cuda")
    rows = [{("input", 0): p.data_ptr(), ("output", 0): out.data_ptr()} for p in pool]

    def repoint():
        launcher._last = None
        launcher._repoint(rows[next(turn) % 8])

    row["repoint"] = median_us(repoint)
    row["replay"] = median_us(launcher._replay)
    row["repoint_and_replay"] = median_us(lambda: (repoint(), launcher._replay()))
    static_in, static_out = launcher._static_inputs()[0], launcher.outputs[0]  # freed at build: allocated again

    def copy_clone():
        static_in.copy_(pool[next(turn) % 8])
        launcher._restore()
        launcher._replay()
        return static_out.clone()

    row["copy_replay_clone_same_graph"] = median_us(copy_clone)
    return row


def main() -> int:
    with torch.inference_mode():
        for reads in [int(a) for a in sys.argv[1:]] or [31, 79]:
            for updates in ("auto", "host"):
                print(json.dumps(parts(reads, updates)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
