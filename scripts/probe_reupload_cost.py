"""Probe (needs CUDA): what a host-side kernel-node update costs the next replay, by graph size.

The wide zoo (benchmarks/results/launcher_wide_zoo-2026-12-05-h100-first48.md) found the
launcher 4 to 20 us of GPU time slower per call than copy-in / replay / clone-out, growing with
the graph, in rows that re-point two nodes with host-side `cuGraphExecKernelNodeSetParams`.
`graphlint/launcher/update_cost.py` counts such an update as free on the GPU. This measures,
for chains of N elementwise kernels whose first node reads a small input (issue #34):

- ``replay``: the graph alone;
- ``set_same``: one host-side update of that node with the parameters it already holds, then
  the replay (does the driver re-upload even when nothing changed?);
- ``set_upload``: the update, an explicit ``cuGraphUpload`` on the stream, then the replay;
- ``copy``: copy the input in, replay, clone the output out (what the launcher competes with);
- ``device``: the device-side updater re-pointing the node, then the replay.

Each as latency (CUDA events around one synchronised call, median) and as throughput (100
calls queued back to back, wall time per call). Then, as the wide zoo measures it
(`launcher_speed.measure`, interleaved, inputs rotating over a pool of four): the launcher
(host-side updates of its two nodes, changed addresses on every call) against copy-in /
replay / clone-out, on the same chain. Usage:
``python scripts/probe_reupload_cost.py [--json FILE] [--sizes 8,32,128,512,1536]``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from probe_device_updates import median_us, write_rows


def _chain(nodes: int):
    """A graph of ``nodes`` kernels, the first reading ``static``; its output tensor."""
    import torch

    static = torch.randn(4096, device="cuda")

    def fn(x):
        h = x + 1.0
        for _ in range(nodes - 1):
            h = h * 1.0001
        return h

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn(static)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph(keep_graph=True)
    with torch.cuda.graph(graph):
        out = fn(static)
    return graph, static, out


def _throughput_us(call, calls: int = 100) -> float:
    import torch

    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        call()
    torch.cuda.synchronize()
    return round((time.perf_counter() - start) * 1e6 / calls, 1)


def _reading_node(graph, static) -> tuple[object, int]:
    """The graph node that reads ``static``, and the byte offset of its address in the arguments."""
    from graphlint.runtime_sanitizer import driver
    from graphlint.runtime_sanitizer.capture.introspection import snapshot_graph

    drv = driver.bindings()
    snap = snapshot_graph(graph.raw_cuda_graph())
    handles = driver.ok(drv.cuGraphGetNodes(drv.CUgraph(graph.raw_cuda_graph()), len(snap.nodes)))[0]
    index, offset = next(
        (node.index, param.offset + offset)
        for node in snap.nodes
        for param in node.params
        for offset, value in param.words()
        if value == static.data_ptr()
    )
    return handles[index], offset


def _host_setter(graph, handle):
    """Functions that set the reading node's parameters unchanged, and that upload the graph."""
    import torch

    from graphlint.runtime_sanitizer import driver

    drv = driver.bindings()
    params = driver.ok(drv.cuGraphKernelNodeGetParams(handle))
    exec_ = drv.CUgraphExec(graph.raw_cuda_graph_exec())
    stream = drv.CUstream(torch.cuda.current_stream().cuda_stream)

    def same():
        driver.ok(drv.cuGraphExecKernelNodeSetParams(exec_, handle, params))

    def upload():
        driver.ok(drv.cuGraphUpload(exec_, stream))

    return same, upload


def measure(nodes: int) -> dict:
    import torch

    from graphlint.launcher import device_update as du

    graph, static, out = _chain(nodes)
    handle, _ = _reading_node(graph, static)
    graph.instantiate()
    same, upload = _host_setter(graph, handle)
    source = torch.randn_like(static)
    row: dict = {"nodes": nodes}
    calls = {
        "replay": graph.replay,
        "set_same": lambda: (same(), graph.replay()),
        "set_upload": lambda: (same(), upload(), graph.replay()),
        "copy": lambda: (static.copy_(source), graph.replay(), out.clone()),
    }
    for name, call in calls.items():
        row[name] = {"latency": median_us(call, 100), "throughput_us": _throughput_us(call)}
    # A real re-point, alternating between two buffers, through the device-side updater, on a
    # second graph of the same size opted in before instantiation.
    try:
        graph2, static2, _ = _chain(nodes)
        handle2, offset2 = _reading_node(graph2, static2)
        (device_node,) = du.make_device_updatable([handle2])
        updater = du.DeviceUpdater(du.updater_function(1), [device_node], [du.DeviceSlot(0, offset2, 0, 0, 8)], 1)
        graph2.instantiate()
        du.upload(graph2)
        flip = [static2.data_ptr(), source.data_ptr()]
        state = {"i": 0}

        def device():
            state["i"] ^= 1
            updater.launch([flip[state["i"]]])
            graph2.replay()

        row["device"] = {"latency": median_us(device, 100), "throughput_us": _throughput_us(device)}
    except Exception as error:  # a driver without device-side updates
        row["device"] = f"{type(error).__name__}: {error}"[:200]
    return row


def launcher_rows(nodes: int, iters: int = 60) -> dict:
    """The launcher against the copy path on one chain, measured as the zoo measures them."""
    import torch

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks"))
    import launcher_speed

    from graphlint.launcher.launcher import ParameterizedLauncher

    def fn(x):
        h = x + 1.0
        for _ in range(nodes - 1):
            h = h * 1.0001
        return h

    pool = [(torch.randn(4096, device="cuda"),) for _ in range(4)]
    graph, static, out = _chain(nodes)
    graph.instantiate()

    def copy(inputs):
        static.copy_(inputs[0])
        graph.replay()
        return out.clone()

    row: dict = {}
    launcher_speed.ITERS = iters
    timed = launcher_speed.measure({"copy": copy, "replay": lambda x: graph.replay()}, pool)
    row["replay_only"] = [timed["replay"]["gpu_us"], timed["replay"]["cpu_us"]]
    for updates in ("host", "device"):
        try:
            launcher = ParameterizedLauncher(fn, pool[0], updates=updates, copy_when_cheaper=False)
        except Exception as error:
            row[updates] = f"{type(error).__name__}: {error}"[:160]
            continue
        timed = launcher_speed.measure({"copy": copy, "launcher": lambda x, la=launcher: la(*x)}, pool)
        row[updates] = {name: [t["gpu_us"], t["cpu_us"]] for name, t in timed.items()}
        row[updates]["note"] = launcher.update_note
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json")
    parser.add_argument("--sizes", default="8,32,128,512,1536")
    parser.add_argument("--zoo-style-only", action="store_true", help="only the launcher against the copy path")
    parser.add_argument("--iters", type=int, default=60, help="interleaved calls per variant (zoo style)")
    args = parser.parse_args()

    rows = []
    for size in (int(s) for s in args.sizes.split(",")):
        try:
            row = {"nodes": size} if args.zoo_style_only else measure(size)
            row["zoo_style"] = launcher_rows(size, args.iters)
        except Exception as error:
            row = {"nodes": size, "error": f"{type(error).__name__}: {error}"[:300]}
        rows.append(row)
        print(json.dumps(row), flush=True)
    write_rows(args.json, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
