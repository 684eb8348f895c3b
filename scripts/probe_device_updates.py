"""Probe (needs CUDA, nvcc): when does a device-side kernel-node update reach a replay?

It takes the launcher out of the picture: it captures small graphs (a chain of elementwise
kernels that all read one input, a GEMM), opts the nodes that read the input in to
device-side updates, re-points them at another tensor with the updater kernel of
`graphlint/launcher/device_update.py` launched on the replay's stream just before
each replay, and says whether each replay read what it was pointed at.

Placements: ``upload`` (the executable graph uploaded once before the first update, what the
launcher does) and ``no-upload`` (not uploaded: its first launch uploads it). The first
version of this script also tried an updater node inside the graph; its results are in
`benchmarks/results/probe_device_updates-2026-11-30-placements.json`.

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
    ("chain", 8, "no-upload"),
    ("chain", 8, "upload"),
    ("chain", 32, "upload"),
    ("chain", 80, "upload"),
    ("gemm-bf16", 1, "upload"),
    ("gemm-fp32", 1, "upload"),
    ("timing", 32, "upload"),
    ("timing", 80, "upload"),
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


def run_case(kind: str, reads: int, placement: str) -> dict:
    import torch

    from graphlint.launcher import device_update as du
    from graphlint.runtime_sanitizer import driver
    from graphlint.runtime_sanitizer.capture.introspection import snapshot_graph

    drv = driver.bindings()
    graph, x, fn, out = _graph(kind, reads)
    snap = snapshot_graph(graph.raw_cuda_graph())
    raw = drv.CUgraph(graph.raw_cuda_graph())
    handles = driver.ok(drv.cuGraphGetNodes(raw, len(snap.nodes)))[0]
    offsets: dict[int, list[int]] = {}  # node index -> byte offsets of x's address in its parameters
    for node in snap.nodes:
        for param in node.params:
            for offset, value in param.words():
                if value == x.data_ptr():
                    offsets.setdefault(node.index, []).append(param.offset + offset)
    result = {"kind": kind, "reads": reads, "placement": placement, "nodes": len(offsets)}
    if kind == "chain" and len(offsets) != reads:
        return {**result, "error": "not one reading node per term"}
    chosen = sorted(offsets)
    device_nodes = du.make_device_updatable([handles[index] for index in chosen])
    if any(handle is None for handle in device_nodes):
        return {**result, "error": "the driver refused the device-updatable attribute"}
    slots = [du.DeviceSlot(i, offset, 0, 0, 8) for i, index in enumerate(chosen) for offset in offsets[index]]
    updater = du.DeviceUpdater(du.updater_function(1), device_nodes, slots, 1)
    graph.instantiate()
    if placement == "upload":
        du.upload(graph)
    y = torch.randn_like(x)
    picks = []
    for source in (y, x, y, y):
        updater.launch([source.data_ptr()])
        graph.replay()
        torch.cuda.synchronize()
        picks.append(bool(torch.equal(out, fn([source] * reads))))
    names = sorted({snap.nodes[i].name[:60] for i in chosen})
    return {**result, "slots": len(slots), "replays_right": picks, "names": names}


# One thread builds the update list, one call applies it (`cudaGraphKernelNodeUpdatesApply`):
# measured against the updater's one `cudaGraphKernelNodeSetParam` per slot.
BATCHED = r"""
struct Slot { unsigned long long node; unsigned long long offset; long long delta; unsigned int key; unsigned int width; };
extern "C" __global__ void graphlint_repoint_batched(const Slot* slots, int count, unsigned long long base,
    cudaGraphKernelNodeUpdate* updates, unsigned long long* values) {
  for (int k = threadIdx.x; k < count; k += blockDim.x) {
    Slot s = slots[k];
    values[k] = base + (unsigned long long)s.delta;
    updates[k].node = (cudaGraphDeviceNode_t)s.node;
    updates[k].field = cudaGraphKernelNodeFieldParam;
    updates[k].updateData.param.pValue = &values[k];
    updates[k].updateData.param.offset = s.offset;
    updates[k].updateData.param.size = s.width;
  }
  __syncthreads();
  if (threadIdx.x == 0) cudaGraphKernelNodeUpdatesApply(updates, count);
}
"""


def _batched_updater(device_nodes, slots, address: int):
    """A launch of the batched variant for these slots, all pointed at ``address``."""
    import ctypes

    import torch

    from graphlint.launcher import device_update as du

    function = du._compile(torch.cuda.get_device_capability(), BATCHED, "graphlint_repoint_batched")
    rows, _ = du.pack_slots(device_nodes, slots)
    table = torch.tensor(rows, dtype=torch.int64, device="cuda")
    updates = torch.zeros(len(rows) * 64, dtype=torch.uint8, device="cuda")  # >= sizeof(update) each
    values = torch.zeros(len(rows), dtype=torch.int64, device="cuda")
    args = [ctypes.c_uint64(table.data_ptr()), ctypes.c_int(len(rows)), ctypes.c_uint64(address)]
    args += [ctypes.c_uint64(updates.data_ptr()), ctypes.c_uint64(values.data_ptr())]
    pointers = (ctypes.c_void_p * len(args))(*[ctypes.addressof(a) for a in args])
    launch, stream = du._direct_launch(), du._current_stream()
    keep = (table, updates, values, args, pointers)

    def call():
        assert keep
        launch(int(function), 1, 1, 1, 128, 1, 1, 0, stream(), pointers, None)

    return call


def write_rows(path: str | None, rows) -> None:
    """A probe's rows as JSON, with the device and torch that measured them (nothing if no path)."""
    import torch

    if path:
        with open(path, "w") as handle:
            json.dump(
                {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "rows": rows}, handle, indent=1
            )


def median_us(call, iterations: int = 200) -> tuple[float, float]:
    """Median GPU (CUDA events) and CPU (perf_counter) microseconds of one call."""
    import statistics
    import time

    import torch

    gpu, cpu = [], []
    for _ in range(iterations):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        t0 = time.perf_counter()
        call()
        cpu.append((time.perf_counter() - t0) * 1e6)
        end.record()
        end.synchronize()
        gpu.append(start.elapsed_time(end) * 1000)
    return round(statistics.median(gpu), 1), round(statistics.median(cpu), 1)


def time_case(reads: int) -> dict:
    """Where the time goes: the chain's replay plain and with its nodes opted in, and the
    updater alone and before the replay, for each launch shape."""
    from graphlint.launcher import device_update as du
    from graphlint.runtime_sanitizer import driver
    from graphlint.runtime_sanitizer.capture.introspection import snapshot_graph

    drv = driver.bindings()
    plain, *_ = _graph("chain", reads)
    plain.instantiate()
    row = {"kind": "timing", "reads": reads, "plain_replay": median_us(plain.replay)}
    graph, x, fn, out = _graph("chain", reads)
    snap = snapshot_graph(graph.raw_cuda_graph())
    handles = driver.ok(drv.cuGraphGetNodes(drv.CUgraph(graph.raw_cuda_graph()), len(snap.nodes)))[0]
    found = [
        (node.index, param.offset + offset)
        for node in snap.nodes
        for param in node.params
        for offset, value in param.words()
        if value == x.data_ptr()
    ]
    device_nodes = du.make_device_updatable([handles[index] for index, _ in found])
    slots = [du.DeviceSlot(i, offset, 0, 0, 8) for i, (_, offset) in enumerate(found)]
    graph.instantiate()
    du.upload(graph)
    row["opted_in_replay"] = median_us(graph.replay)
    address = [x.data_ptr()]
    for shape in du.SHAPES:
        updater = du.DeviceUpdater(du.updater_function(1), device_nodes, slots, 1, shape)
        row[f"updater_{shape}"] = median_us(lambda u=updater: u.launch(address))
        row[f"updater_{shape}_and_replay"] = median_us(lambda u=updater: (u.launch(address), graph.replay()))
    try:
        batched = _batched_updater(device_nodes, slots, x.data_ptr())
        row["batched"] = median_us(batched)
        row["batched_and_replay"] = median_us(lambda: (batched(), graph.replay()))
        row["batched_right"] = _batched_right(device_nodes, slots, graph, (x, fn, out), reads)
    except Exception as error:
        row["batched"] = f"{type(error).__name__}: {error}"[:300]
    return row


def _batched_right(device_nodes, slots, graph, io, reads) -> bool:
    """Whether the batched variant re-points the chain at another tensor and back."""
    import torch

    x, fn, out = io
    results = []
    for source in (torch.randn_like(x), x):
        _batched_updater(device_nodes, slots, source.data_ptr())()
        graph.replay()
        torch.cuda.synchronize()
        results.append(bool(torch.equal(out, fn([source] * reads))))
    return all(results)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", help="write the results here too")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        kind, reads, placement = json.loads(args.one)
        try:
            row = time_case(reads) if kind == "timing" else run_case(kind, reads, placement)
            print(json.dumps(row))
        except Exception as error:
            print(json.dumps({"case": json.loads(args.one), "error": f"{type(error).__name__}: {error}"[:300]}))
        return 0
    rows = []
    for case in CASES:
        try:
            done = subprocess.run(
                [sys.executable, __file__, "--one", json.dumps(case)], capture_output=True, text=True, timeout=60
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
