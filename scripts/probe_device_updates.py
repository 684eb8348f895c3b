"""Probe (needs CUDA, nvcc): when does a device-side kernel-node update reach a replay?

Issue 19's device-side updater (`graphlint/runtime_sanitizer/device_update.py`) passed its
one-node trial but missed nodes in real graphs on the H200. This probe takes the launcher out
of the picture: it captures small graphs (a chain of elementwise kernels that all read one
input, a GEMM), opts the nodes that read the input in to device-side updates, re-points them
at another tensor from an updater kernel placed in different ways, replays once and says,
per node, whether the replay read the new tensor.

Placements: ``inside`` (an updater node with an edge to each re-pointed node, what the
launcher does), ``root`` (an updater node that every root of the graph waits for),
``before`` (the updater as its own one-node graph launched just before, same stream) and
``before-sync`` (the same, with a device synchronisation before the replay).

Each case runs in its own process with a time limit (a bad update can hang or lose the
context). Usage: ``python scripts/probe_device_updates.py [--json FILE]``; one JSON line per
case on stdout.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

CASES = [
    ("chain", 8, "inside", None),
    ("chain", 8, "root", None),
    ("chain", 8, "before", None),
    ("chain", 8, "before-sync", None),
    ("chain", 32, "inside", None),
    ("chain", 32, "root", None),
    ("chain", 32, "before-sync", None),
    *[("chain", 8, "inside", k) for k in range(8)],
    ("gemm-bf16", 1, "inside", None),
    ("gemm-bf16", 1, "root", None),
    ("gemm-bf16", 1, "before-sync", None),
    ("gemm-fp32", 1, "inside", None),
    ("gemm-fp32", 1, "root", None),
    ("gemm-fp32", 1, "before-sync", None),
]


def _graph(kind: str, reads: int):
    """The captured graph, its input, a function computing the output eagerly from a list of
    sources (one per reading node, in node order), and the output tensor."""
    import torch

    if kind == "chain":
        x = torch.randn(4096, device="cuda")

        def fn(sources):
            acc = sources[0] * 1.0
            for i in range(1, reads):
                acc = acc + sources[i] * float(i + 1)
            return acc

    else:
        dtype = torch.bfloat16 if kind == "gemm-bf16" else torch.float32
        x = torch.randn(64, 1024, device="cuda", dtype=dtype)
        w = torch.randn(1024, 1024, device="cuda", dtype=dtype)

        def fn(sources):
            return sources[0] @ w

    for _ in range(2):
        fn([x] * reads)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph(keep_graph=True)
    with torch.cuda.graph(graph):
        out = fn([x] * reads)
    return graph, x, fn, out


def run_case(kind: str, reads: int, placement: str, only: int | None) -> dict:
    import torch

    from graphlint.runtime_sanitizer import device_update as du
    from graphlint.runtime_sanitizer.introspection import _driver, _ok, snapshot_graph

    drv = _driver()
    graph, x, fn, out = _graph(kind, reads)
    snap = snapshot_graph(graph.raw_cuda_graph())
    raw = drv.CUgraph(graph.raw_cuda_graph())
    handles = _ok(drv.cuGraphGetNodes(raw, len(snap.nodes)))[0]
    readers = []  # (node index, byte offset of x's address in its device-side parameters)
    for node in snap.nodes:
        for param in node.params:
            for offset, value in param.words():
                if value == x.data_ptr():
                    readers.append((node.index, param.offset + offset, node.name[:60]))
    result = {"kind": kind, "reads": reads, "placement": placement, "only": only, "readers": len(readers)}
    if kind == "chain" and len(readers) != reads:
        return {**result, "error": "not one reading node per term"}
    chosen = [r for i, r in enumerate(readers) if only is None or i == only]
    function = du.updater_function(1)
    device_nodes = du.make_device_updatable([handles[index] for index, _, _ in chosen])
    if any(handle is None for handle in device_nodes):
        return {**result, "error": "the driver refused the device-updatable attribute"}
    slots = [du.DeviceSlot(i, offset, 0, 0, 8) for i, (_, offset, _) in enumerate(chosen)]
    updater = du.DeviceUpdater(function, device_nodes, slots, 1)
    if placement == "inside":
        updater.add_to(raw, [handles[index] for index, _, _ in chosen])
    elif placement == "root":
        targets = {b for _, b in snap.edges}
        updater.add_to(raw, [h for i, h in enumerate(handles) if i not in targets])
    else:
        separate = _ok(drv.cuGraphCreate(0))
        updater.add_to(separate, [])
        separate_exec = _ok(drv.cuGraphInstantiate(separate, 0))
    graph.instantiate()
    y = torch.randn_like(x)
    picks = []
    for source in (y, x, y):
        updater.write([source.data_ptr()])
        if placement.startswith("before"):
            stream = drv.CUstream(torch.cuda.current_stream().cuda_stream)
            _ok(drv.cuGraphLaunch(separate_exec, stream))
            if placement == "before-sync":
                torch.cuda.synchronize()
        graph.replay()
        updater.launched()
        torch.cuda.synchronize()
        chosen_index = {index for index, _, _ in chosen}
        sources = [source if r[0] in chosen_index else x for r in readers] or [source]
        expected = fn(sources)
        picks.append(bool(torch.equal(out, expected)))
    return {**result, "updated": len(chosen), "replays_right": picks, "names": sorted({n for *_, n in chosen})}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", help="write the results here too")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        kind, reads, placement, only = json.loads(args.one)
        try:
            print(json.dumps(run_case(kind, reads, placement, only)))
        except Exception as error:
            print(json.dumps({"case": json.loads(args.one), "error": f"{type(error).__name__}: {error}"[:300]}))
        return 0
    rows = []
    for case in CASES:
        try:
            done = subprocess.run(
                [sys.executable, __file__, "--one", json.dumps(case)], capture_output=True, text=True, timeout=25
            )
            lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
            row = json.loads(lines[-1]) if lines else {"case": case, "error": done.stderr.strip()[-300:]}
        except subprocess.TimeoutExpired:
            row = {"case": case, "error": "timed out after 25 s (hang)"}
        rows.append(row)
        print(json.dumps(row), flush=True)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(rows, handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
