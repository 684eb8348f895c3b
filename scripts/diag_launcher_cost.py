"""Where a launcher call's time goes (needs CUDA): the call, and its parts one by one.

For a fan-out graph (one input read by N kernels, so N patched nodes) it times, per part, the
median GPU (CUDA events) and CPU (perf_counter) microseconds over 200 calls: the whole call,
the refusal checks, the output allocation, the updater launch, the replay, updater + replay,
and plain copy-in/replay/clone-out. Usage: ``python scripts/diag_launcher_cost.py [N ...]``.

``--zoo NAME ...`` does the same for rows of the wide zoo (`benchmarks/launcher_wide_zoo.py`,
float32, batch 2, first output), whose CPU time trails the copy path's in some rows (issue #34):
the whole call, the checks, the node updates (to new addresses, and again to the ones the nodes
hold, each followed by a replay), the replay and the output's clone, each alone, beside the copy
path's whole call, its replay and its copy-in.
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


def zoo_parts(name: str) -> dict:
    """`parts` for one wide-zoo model, float32."""
    from benchmarks import launcher_wide_zoo as wide

    build, make_inputs = next((b, m) for n, b, m in wide.wide_zoo() if n == name)
    model = build().cuda().eval()
    pool = [wide.zoo.inputs_on_device(make_inputs, torch.float32, 2) for _ in range(4)]
    static = tuple(t.clone() for t in pool[0])
    graph, copy_replay = wide.copy_path(model, static)
    launcher = ParameterizedLauncher(model, pool[0])
    turn = iter(range(10**9))
    row = {"model": name, "patched": len(launcher._nodes), "note": launcher.update_note}
    row |= {"pinned_inputs": sorted(launcher._pinned_inputs), "pinned_outputs": sorted(launcher._pinned_outputs)}
    row["call"] = median_us(lambda: launcher(*pool[next(turn) % 4]))
    row["checks"] = median_us(lambda: launcher._why_not(pool[0]))
    rows = [{("input", i): t.data_ptr() for i, t in enumerate(inputs)} for inputs in pool]
    out = launcher.outputs[0]

    def repoint():
        launcher._last = None
        launcher._repoint({**rows[next(turn) % 4], ("output", 0): out.data_ptr()})

    row["repoint"] = median_us(repoint)
    row["replay"] = median_us(launcher._replay)
    row["repoint_and_replay"] = median_us(lambda: (repoint(), launcher._replay()))
    fixed = {**rows[0], ("output", 0): out.data_ptr()}

    def same_repoint():  # the driver call with the addresses the nodes already hold
        launcher._last = None
        launcher._repoint(fixed)

    row["same_repoint_and_replay"] = median_us(lambda: (same_repoint(), launcher._replay()))
    row["clone_output"] = median_us(out.clone)
    row["copy_path"] = median_us(lambda: copy_replay(pool[next(turn) % 4]))
    row["copy_path_replay"] = median_us(graph.replay)
    row["copy_in"] = median_us(lambda: static[0].copy_(pool[next(turn) % 4][0]))
    return row


def main() -> int:
    if sys.argv[1:2] == ["--zoo"]:
        with torch.inference_mode():
            for name in sys.argv[2:]:
                print(json.dumps(zoo_parts(name)), flush=True)
        return 0
    with torch.inference_mode():
        for reads in [int(a) for a in sys.argv[1:]] or [31, 79]:
            for updates in ("auto", "host"):
                print(json.dumps(parts(reads, updates)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
