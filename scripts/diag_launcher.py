"""Probe (H200): per-node diagnosis of launcher fallbacks and output clones, and the cost of the
graph-update options. Prints findings; writes JSON to argv[1] when given.

For each named zoo model: the nodes whose recorded operator reads or writes an input or output
(after the output's storage was allocated) but whose arguments hold no slot for it, with every
encoding of the address found in their arguments, and the device memory (allocator segments)
holding the address after a replay. Then: per-node update cost (direct libcuda call, binding
call), whole-graph exec update, device-updatable node attribute, NVRTC/cudadevrt presence.
"""

from __future__ import annotations

import ctypes
import glob
import json
import os
import sys
import time
import traceback

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))

FOUND: dict = {}


def zoo_entry(name):
    import launcher_zoo as zoo

    for source in (zoo.torchvision_models, zoo.timm_models, zoo.transformers_models):
        for entry in source():
            if entry[0] == name:
                return entry
    raise KeyError(name)


def encodings_in(data: bytes, start: int, nbytes: int) -> list[str]:
    hits = []
    for i in range(len(data) - 3):
        v4 = int.from_bytes(data[i : i + 4], "little")
        if i + 8 <= len(data):
            v8 = int.from_bytes(data[i : i + 8], "little")
            if start <= v8 < start + nbytes:
                hits.append(f"raw8@{i}+{v8 - start}")
            if start >> 4 <= v8 < (start + nbytes) >> 4 and v8:
                hits.append(f"shr4@{i}")
        if (v4 - start) % (1 << 32) < nbytes and i % 4 == 0:
            hits.append(f"low4@{i}+{(v4 - start) % (1 << 32)}")
        if ((start >> 4) & 0xFFFFFFFF) <= v4 < (((start + nbytes) >> 4) & 0xFFFFFFFF) and i % 4 == 0:
            hits.append(f"shr4low@{i}")
    return hits


def device_hits(start: int, nbytes: int) -> list[str]:
    from cuda.bindings import driver as drv

    hits = []
    for seg in torch.cuda.memory_snapshot():
        size = seg["total_size"]
        if size > (256 << 20):
            continue
        host = (ctypes.c_uint8 * size)()
        err = drv.cuMemcpyDtoH(ctypes.addressof(host), seg["address"], size)[0]
        if err != drv.CUresult.CUDA_SUCCESS:
            continue
        import numpy as np

        words = np.frombuffer(host, dtype=np.uint64)
        idx = np.nonzero((words >= start) & (words < start + nbytes))[0]
        for k in idx[:8]:
            hits.append(f"seg@{seg['address']:#x}+{int(k) * 8} pool={seg.get('segment_pool_id')}")
    return hits


def diagnose(name: str, dtype) -> dict:
    from graphlint.launcher.launcher import ParameterizedLauncher

    _, build, make_inputs = zoo_entry(name)
    model = build().cuda().eval().to(dtype)
    sample = tuple(t.cuda().to(dtype) if t.is_floating_point() else t.cuda() for t in make_inputs(2))
    out: dict = {}
    with torch.inference_mode():
        model(*sample)
        launcher = ParameterizedLauncher(model, sample)
        out["fallback"] = launcher.fallback_reason
        out["pinned"] = launcher.pinned
        out["patched"] = len(launcher._nodes)
        first = launcher._capture.snapshot
        ordering = launcher._ordering
        out["ordering"] = ordering is not None
        words = launcher.report.words
        slots = {(w.node, w.region) for w in words if w.role in ("input", "output")}
        unseen = []
        regions = ordering.regions if ordering is not None else first.regions
        for region in regions:
            if region.role not in ("input", "output"):
                continue
            first_region = next(r for r in first.regions if r.name == region.name)
            for node in ordering.nodes if ordering is not None else []:
                if node.index < region.born:
                    continue
                touches = any(
                    s < region.start + region.nbytes and region.start < s + n for s, n in node.reads + node.writes
                )
                if touches and (node.index, region.name) not in slots:
                    fnode = first.nodes[node.index]
                    hits = []
                    for pi, p in enumerate(fnode.params):
                        hits += [f"p{pi}:{h}" for h in encodings_in(p.data, first_region.start, first_region.nbytes)]
                    unseen.append(
                        {
                            "node": node.index,
                            "type": fnode.type,
                            "kernel": fnode.name[:160],
                            "op": node.op,
                            "param_sizes": [p.size for p in fnode.params],
                            "note": fnode.note,
                            "pointers": {k: hex(v) for k, v in fnode.pointers.items()},
                            "hits": hits[:12],
                        }
                    )
            out.setdefault("born", {})[region.name] = region.born
        out["unseen"] = unseen[:30]
        out["output_words"] = [
            (w.node, w.param, w.offset, w.width, first.nodes[w.node].name[:60]) for w in words if w.role == "output"
        ][:20]
        launcher._capture.graph.replay()
        torch.cuda.synchronize()
        out["device_hits"] = {r.name: device_hits(r.start, r.nbytes) for r in first.regions if r.role in ("output",)}
        out["tail"] = [
            (n.index, n.type, n.name[:100], n.op if ordering is None else ordering.nodes[n.index].op)
            for n in first.nodes[-4:]
        ]
    return out


def plain_capture_error(name: str) -> dict:
    _, build, make_inputs = zoo_entry(name)
    model = build().cuda().eval()
    x = tuple(t.cuda() for t in make_inputs(2))
    try:
        with torch.inference_mode():
            model(*x)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                model(*x)
    except Exception as error:
        frames = [f for f in traceback.extract_tb(error.__traceback__) if "transformers" in f.filename]
        return {"error": str(error)[:300], "frames": [f"{f.filename}:{f.lineno} {f.line}" for f in frames[-4:]]}
    return {"error": None}


def update_costs() -> dict:
    from cuda.bindings import driver as drv

    from graphlint.launcher.launcher import ParameterizedLauncher

    res: dict = {}

    def fan(x):
        acc = x * 1.0
        for i in range(79):
            acc = acc + x * float(i + 2)
        return acc

    x = torch.randn(1024, device="cuda")
    with torch.inference_mode():
        launcher = ParameterizedLauncher(fan, (x,))
        res["fan_patched"] = len(launcher._nodes)
        res["fan_nodes"] = len(launcher._capture.snapshot.nodes)
        res["fan_fallback"] = launcher.fallback_reason
        direct, exe = launcher._direct, launcher._exec_handle
        nodes = launcher._nodes
        for _ in range(3):
            for n in nodes:
                direct(exe, n.handle_int, n.raw)
        t0 = time.perf_counter()
        for _ in range(100):
            for n in nodes:
                direct(exe, n.handle_int, n.raw)
        res["direct_us_per_node"] = (time.perf_counter() - t0) / 100 / len(nodes) * 1e6
        t0 = time.perf_counter()
        for _ in range(20):
            for n in nodes:
                drv.cuGraphExecKernelNodeSetParams(launcher._exec, n.handle, n.params)
        res["binding_us_per_node"] = (time.perf_counter() - t0) / 20 / len(nodes) * 1e6
        t0 = time.perf_counter()
        for _ in range(50):
            launcher(x.clone())
        torch.cuda.synchronize()
        res["launcher_call_us"] = (time.perf_counter() - t0) / 50 * 1e6
        graph = drv.CUgraph(launcher._capture.graph.raw_cuda_graph())
        t0 = time.perf_counter()
        r = None
        for _ in range(20):
            r = drv.cuGraphExecUpdate(launcher._exec, graph)
        res["exec_update_us"] = (time.perf_counter() - t0) / 20 * 1e6
        res["exec_update_result"] = str(r[0])
        t0 = time.perf_counter()
        for _ in range(20):
            for n in nodes:
                drv.cuGraphKernelNodeSetParams(n.handle, n.params)
        res["graph_node_set_us_per_node"] = (time.perf_counter() - t0) / 20 / len(nodes) * 1e6
        static = x.clone()
        t0 = time.perf_counter()
        for _ in range(200):
            static.copy_(x)
        res["copy_us"] = (time.perf_counter() - t0) / 200 * 1e6
        t0 = time.perf_counter()
        for _ in range(200):
            x.clone()
        res["clone_us"] = (time.perf_counter() - t0) / 200 * 1e6
        torch.cuda.synchronize()
        # device-updatable attribute on a fresh captured graph, before instantiation
        g = torch.cuda.CUDAGraph(keep_graph=True)
        with torch.cuda.graph(g):
            y = x * 2
        graph2 = drv.CUgraph(g.raw_cuda_graph())
        handles = drv.cuGraphGetNodes(graph2, 8)[1]
        try:
            value = drv.CUlaunchAttributeValue()
            value.deviceUpdatableKernelNode.deviceUpdatable = 1
            attr = drv.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE
            res["device_updatable_set"] = str(drv.cuGraphKernelNodeSetAttribute(handles[0], attr, value)[0])
            got = drv.cuGraphKernelNodeGetAttribute(handles[0], attr)
            res["device_updatable_get"] = str(got[0]) + f" devNode={got[1].deviceUpdatableKernelNode.devNode}"
            g.instantiate()
            g.replay()
            torch.cuda.synchronize()
            res["device_updatable_replay_ok"] = bool(torch.equal(y, x * 2))
        except Exception as error:
            res["device_updatable_error"] = f"{type(error).__name__}: {error}"
        del y
    res["cudadevrt"] = (
        glob.glob("/usr/**/libcudadevrt*", recursive=True)[:3]
        + glob.glob("/usr/local/lib/python3*/dist-packages/nvidia/**/libcudadevrt*", recursive=True)[:3]
    )
    res["nvcc"] = glob.glob("/usr/local/cuda*/bin/nvcc")
    try:
        from cuda.bindings import nvrtc

        res["nvrtc_version"] = str(nvrtc.nvrtcVersion())
    except Exception as error:
        res["nvrtc_version"] = f"{type(error).__name__}: {error}"
    try:
        import nvidia

        res["nvidia_pkgs"] = sorted(os.listdir(os.path.dirname(nvidia.__path__[0]) + "/nvidia"))
    except Exception as error:
        res["nvidia_pkgs"] = str(error)
    return res


def structure(name: str, dtype=torch.bfloat16) -> None:
    """Why the attributed capture (the dispatch mode's) differs from the plain one, if it does."""
    from graphlint.runtime_sanitizer.analysis.two_capture import compare_structure
    from graphlint.runtime_sanitizer.capture.two_captures import capture_once

    _, build, make_inputs = zoo_entry(name)
    model = build().cuda().eval().to(dtype)
    sample = [t.cuda().to(dtype) if t.is_floating_point() else t.cuda() for t in make_inputs(2)]
    with torch.inference_mode():
        first = capture_once(model, sample, seed=1234)
        again = capture_once(model, sample, seed=1234)
        attributed = capture_once(model, sample, seed=1234, attribute=True)
    print(name, "plain vs plain:", [vars(d) for d in compare_structure(first.snapshot, again.snapshot)[:3]])
    print(name, "plain vs attributed:", [vars(d) for d in compare_structure(first.snapshot, attributed.snapshot)[:3]])


def device_variants() -> None:
    """The experimental device-side updates on graphs where they missed nodes, one thread per
    node vs one thread for all (whether concurrent updates are the cause)."""
    from graphlint.launcher import device_update
    from graphlint.launcher.launcher import LauncherRefused, ParameterizedLauncher

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))
    from launcher_speed import FanOut, mlp

    cases = {"fan-out x32": (FanOut(31), (4096,)), "MLP 1024x4 batch 64": (mlp(1024, 4), (64, 1024))}
    for threads in (128, 1):
        device_update._THREADS = threads
        for label, (model, shape) in cases.items():
            x = torch.randn(shape, device="cuda")
            with torch.inference_mode():
                try:
                    launcher = ParameterizedLauncher(model, (x,), updates="device")
                    fresh = torch.randn_like(x)
                    ok = torch.equal(launcher(fresh)[0], model(fresh))
                    print(threads, label, "ok" if ok else "WRONG", launcher.update_note, flush=True)
                except LauncherRefused as error:
                    print(threads, label, "refused:", str(error)[:160], flush=True)


def main() -> None:
    if sys.argv[1] == "--device-variants":
        device_variants()
        return
    if sys.argv[1] == "--structure":
        structure(sys.argv[2])
        return
    names = sys.argv[2].split(",") if len(sys.argv) > 2 else []
    for name in names:
        try:
            FOUND[name] = diagnose(name, torch.bfloat16)
        except Exception as error:
            FOUND[name] = {"error": f"{type(error).__name__}: {error}", "tb": traceback.format_exc()[-800:]}
        print(name, json.dumps(FOUND[name], default=str)[:3000], flush=True)
        torch.cuda.empty_cache()
    try:
        FOUND["plain_capture_mistral"] = plain_capture_error("transformers.mistral")
    except Exception as error:
        FOUND["plain_capture_mistral"] = {"probe_error": str(error)}
    print("mistral", FOUND["plain_capture_mistral"], flush=True)
    try:
        FOUND["update_costs"] = update_costs()
    except Exception:
        FOUND["update_costs"] = {"error": traceback.format_exc()[-1500:]}
    print("costs", json.dumps(FOUND["update_costs"], default=str), flush=True)
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as handle:
            json.dump(FOUND, handle, indent=1, default=str)


if __name__ == "__main__":
    main()
