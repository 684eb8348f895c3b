"""Record, on a GPU, the graph torch.compile(mode="reduce-overhead") captures, as the guard
attributes it (issue #32): each Triton launch's nodes carry the kernel's name and the reads and
writes of its signature. The CPU tests (tests/test_triton_launches.py) read it: no node is left
unattributed, and the ordering check runs on it.

    python3 scripts/record_triton_graph.py OUTDIR    # writes OUTDIR/reduce_overhead.json
"""

from __future__ import annotations

import platform
import sys
from pathlib import Path

import torch

from graphlint.runtime_sanitizer.analysis.snapshot import save_captures
from graphlint.runtime_sanitizer.capture import plain_capture
from graphlint.runtime_sanitizer.capture.introspection import provenance
from graphlint.runtime_sanitizer.guard.replay_guard import ReplayGuard


def step(x, w):
    """A matmul (an ATen operator, cuBLAS) between Triton kernels Inductor fuses."""
    return torch.relu(x @ w).sin() * 2 + x


def main() -> int:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    snapshots = []
    finish = plain_capture.CaptureOrdering.finish

    def keep(self, stream):  # the guard's own reading of the graph, kept as it was judged
        snapshot = finish(self, stream)
        snapshots.append(snapshot)
        return snapshot

    plain_capture.CaptureOrdering.finish = keep
    compiled = torch.compile(step, mode="reduce-overhead")
    w = torch.randn(256, 256, device="cuda")
    with ReplayGuard() as guard:
        for _ in range(4):
            compiled(torch.randn(64, 256, device="cuda"), w)
    torch.cuda.synchronize()
    plain_capture.CaptureOrdering.finish = finish
    print(guard.graphs.summary())
    if not snapshots:
        print("no graph was read: nothing recorded")
        return 1
    meta = {
        "program": "step = relu(x @ w).sin() * 2 + x, torch.compile(mode='reduce-overhead'), 4 calls",
        "recorded_by": "scripts/record_triton_graph.py",
        "provenance": provenance(),
        "python": platform.python_version(),
        "refused": guard.graphs.refused,
    }
    print("nodes per graph read:", [len(snapshot.nodes) for snapshot in snapshots])
    largest = max(snapshots, key=lambda snapshot: len(snapshot.nodes))  # the step's graph, not a warm-up's
    save_captures(out / "reduce_overhead.json", {"guarded": largest}, meta)
    for node in largest.nodes:
        print(node.index, node.type, node.name[:50], node.op, len(node.reads), len(node.writes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
