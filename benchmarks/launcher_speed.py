"""Eager vs. graph replay with copy-in/clone-out vs. the parameterized launcher (needs CUDA).

One process, side by side (every variant's calls interleaved), for MLPs of several widths and batch sizes, a transformer block
(SDPA) and a torch.compile'd function: per-call GPU latency
(median of CUDA-event timings from an idle device, which counts the host's work before the first
launch too), per-call GPU busy time (the device's own time per call, with the host's out of the
way: `busy`), per-call CPU time (median of perf_counter around the call; and the thread's own
CPU time per call while calls queue behind a spin, `host_us`),
peak memory during the calls, the graph pool's size, and the patch cost against the number of
patched nodes, for the launcher's default (``updates="auto"``) and host-side updates. Writes JSON with the device and versions, prints a Markdown table.

    python benchmarks/launcher_speed.py [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time

import torch

from graphlint.launcher.launcher import ParameterizedLauncher
from graphlint.runtime_sanitizer.capture.two_captures import pool_segments

ITERS = 200
BUSY_CALLS = 10  # calls queued behind one spin kernel per busy sample
BUSY_ROUNDS = 15  # busy samples per variant, interleaved like the latency samples
_cycles_per_us: list[float] = []


def mlp(width: int, depth: int) -> torch.nn.Module:
    layers = []
    for _ in range(depth):
        layers += [torch.nn.Linear(width, width), torch.nn.GELU()]
    return torch.nn.Sequential(*layers).cuda().eval()


def _timed(call, x) -> tuple[float, float]:
    """One call's GPU (CUDA events) and CPU (perf_counter) microseconds, from an idle device."""
    start_event, end_event = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start_event.record()
    t0 = time.perf_counter()
    call(x)
    cpu = (time.perf_counter() - t0) * 1e6
    end_event.record()
    end_event.synchronize()
    return start_event.elapsed_time(end_event) * 1000, cpu


def _spin_cycles_per_us() -> float:
    """The spin kernel's (`torch.cuda._sleep`) clock cycles per microsecond, measured once."""
    if not _cycles_per_us:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        torch.cuda._sleep(10**7)
        end.record()
        end.synchronize()
        _cycles_per_us.append(10**7 / (start.elapsed_time(end) * 1000))
    return _cycles_per_us[0]


def busy(call, inputs_pool, offset: int = 0) -> tuple[float, float] | None:
    """GPU microseconds per call with the host out of the way, and the host's CPU microseconds
    per call while it queues them. A spin kernel holds the device while the host queues
    BUSY_CALLS calls; the events then time only what the calls themselves put on the device back
    to back (kernels, copies, the re-upload a host-side update costs at the next launch), as in a
    pipeline where the host runs ahead. `_timed`'s latency from an idle device also counts the
    host's work before the first launch. The host's share is the thread's own CPU time
    (`time.thread_time_ns`) over the queued calls: no call waits on the device, and time the
    thread spent descheduled is not counted, so it is the host work a call costs, not the wall
    clock of a shared machine (per-call `perf_counter` medians moved by up to 4x between runs of
    one model, issue #34). None when the spin ended before every call was queued, four times over
    (a call that synchronises with the device, or a host slower than any spin tried)."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    spin_us = 500.0
    for _ in range(4):
        torch.cuda.synchronize()
        torch.cuda._sleep(int(spin_us * _spin_cycles_per_us()))
        start.record()
        t0, cpu0 = time.perf_counter(), time.thread_time_ns()
        for i in range(BUSY_CALLS):
            call(inputs_pool[(offset + i) % len(inputs_pool)])
        queued = not start.query()  # still spinning: no call began before all were queued
        host_us, cpu_ns = (time.perf_counter() - t0) * 1e6, time.thread_time_ns() - cpu0
        end.record()
        end.synchronize()
        if queued:
            return start.elapsed_time(end) * 1000 / BUSY_CALLS, cpu_ns / 1e3 / BUSY_CALLS
        spin_us = max(4 * spin_us, 2 * host_us)
    return None


def measure(calls: dict, inputs_pool) -> dict:
    """Median GPU latency, GPU busy time (`busy`) and CPU microseconds per call of each variant,
    measured interleaved (call i of every variant, in a rotating order, before call i + 1 of
    any): the machine's drift over a run then lands on every variant alike. Peak extra memory
    from a pass of its own."""
    result = {}
    for name, call in calls.items():
        for i in range(20):
            call(inputs_pool[i % len(inputs_pool)])
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        for i in range(20):
            call(inputs_pool[i % len(inputs_pool)])
        torch.cuda.synchronize()
        result[name] = {"peak_extra_mib": round((torch.cuda.max_memory_allocated() - base) / 2**20, 2)}
    samples = {name: ([], []) for name in calls}
    names = list(calls)
    for i in range(ITERS):
        x = inputs_pool[i % len(inputs_pool)]
        for name in names[i % len(names) :] + names[: i % len(names)]:
            gpu, cpu = _timed(calls[name], x)
            samples[name][0].append(gpu)
            samples[name][1].append(cpu)
    for name, (gpu, cpu) in samples.items():
        result[name].update(gpu_us=round(statistics.median(gpu), 1), cpu_us=round(statistics.median(cpu), 1))
    busy_samples: dict[str, list[tuple[float, float]]] = {name: [] for name in calls}
    for i in range(BUSY_ROUNDS):
        for name in names[i % len(names) :] + names[: i % len(names)]:
            sample = busy(calls[name], inputs_pool, offset=i)
            if sample is not None:
                busy_samples[name].append(sample)
    for name, found in busy_samples.items():
        result[name]["busy_us"] = round(statistics.median(g for g, _ in found), 1) if found else None
        result[name]["host_us"] = round(statistics.median(h for _, h in found), 1) if found else None
    return result


def graph_pool_mib(graph) -> float:
    return round(sum(size for _, size in pool_segments(graph)) / 2**20, 2)


def cases():
    """(label, callable, input shape): MLPs over width, depth and batch; a transformer block
    over batch; a torch.compile'd elementwise function over size."""
    from scripts.record_snapshots import Block

    for width, depth in ((256, 2), (256, 8), (1024, 4), (1024, 16)):
        for batch in (1, 64):
            yield f"MLP {width}x{depth}", mlp(width, depth), (batch, width)
    for size in (1 << 12, 1 << 24, 1 << 26):  # 16 KB (cheaper to copy in), 64 and 256 MB (to re-point)
        # The input read by `reads` kernels, the output written by one more. At 16 KB the input
        # is copied in and the output alone re-pointed, host-side, whatever the graph's size: the
        # sweep over sizes prices the re-upload a host-side update costs the next launch (#34).
        for reads in (8, 31, 79, 200) if size == 1 << 12 else (31, 79):
            yield f"fan-out, {reads} reads", FanOut(reads), (size,)
    block = Block().cuda().eval()
    for batch in (1, 16):
        yield "transformer block 256d", block, (batch, 128, 256)
    compiled = torch.compile(lambda t: torch.sin(t) * 3 + t)
    for size in (1 << 12, 1 << 22):
        yield "compiled sin*3+x", compiled, (size,)


class FanOut(torch.nn.Module):
    """``sum(x * (i + 1))`` over ``reads`` terms: one kernel per read of the input, so the
    launcher patches ``reads + 1`` nodes (the last sum writes the output)."""

    def __init__(self, reads: int) -> None:
        super().__init__()
        self.reads = reads

    def forward(self, x):
        acc = x * 1.0
        for i in range(self.reads - 1):
            acc = acc + x * float(i + 2)
        return acc


def run_case(label: str, model, shape: tuple[int, ...]) -> dict:
    pool = [torch.randn(shape, device="cuda") for _ in range(8)]
    row: dict = {"model": label, "shape": list(shape)}
    with torch.inference_mode():
        static_in = pool[0].clone()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                model(static_in)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_out = model(static_in)

        def replay(x):
            static_in.copy_(x)
            graph.replay()
            return static_out.clone()

        calls = {"eager": model, "replay_copy_clone": replay}
        row["replay_pool_mib"] = graph_pool_mib(graph)
        for key, updates in (("launcher_host", "host"), ("launcher_device", "device")):
            # every tensor re-pointed, one driver call per node (host) or one updater launch (device)
            forced = ParameterizedLauncher(model, (pool[0],), updates=updates, copy_when_cheaper=False)
            row["repointable_nodes"] = len(forced._nodes)
            if updates == "host" or forced._updater is not None:
                calls[key] = forced
        launcher = ParameterizedLauncher(model, (pool[0],))  # the default, updates="auto"
        calls["launcher"] = launcher
        row.update(measure(calls, pool))
        row.setdefault("launcher_device", {"not_built": "device-side updates unavailable"})
        row["launcher_updates"] = "device" if launcher._updater is not None else "host"
        row["update_note"] = launcher.update_note
        row["launcher_fallback"] = launcher.fallback_reason
        row["copied"] = sorted(launcher.copied)
        row["patched_nodes"] = len(launcher._nodes)
        row["graph_nodes"] = len(launcher._capture.snapshot.nodes)
        row["launcher_pool_mib"] = launcher._capture.pool_bytes / 2**20
        row["outputs_mib"] = round(launcher._capture.output_bytes / 2**20, 3)
    return row


def _driver_version() -> str:
    from graphlint.runtime_sanitizer.capture.introspection import provenance

    return provenance().get("driver", "unknown")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json")
    parser.add_argument("--only", help="run only the cases whose label contains this text")
    args = parser.parse_args()
    rows = []
    for label, model, shape in cases():
        if args.only and args.only not in label:
            continue
        row = run_case(label, model, shape)
        rows.append(row)
        print(json.dumps(row), flush=True)
    print(
        "\n| model | input | nodes (patched of re-pointable) | eager GPU/CPU us | replay+copy+clone GPU/CPU us "
        "| launcher GPU/CPU us | updates | copied | all re-pointed, host-side GPU/CPU us "
        "| all re-pointed, device-side GPU/CPU us | GPU busy us (copy / launcher) | pool MiB | outputs MiB | fallback |"
    )
    print("|---|---|---:|---:|---:|---:|---|---|---:|---:|---:|---:|---:|---|")
    for r in rows:
        e, c, lch, h, d = r["eager"], r["replay_copy_clone"], r["launcher"], r["launcher_host"], r["launcher_device"]
        device = f"{d['gpu_us']}/{d['cpu_us']}" if "gpu_us" in d else "-"
        print(
            f"| {r['model']} | {'x'.join(map(str, r['shape']))} | {r['graph_nodes']} ({r['patched_nodes']} of {r['repointable_nodes']}) | "
            f"{e['gpu_us']}/{e['cpu_us']} | {c['gpu_us']}/{c['cpu_us']} | {lch['gpu_us']}/{lch['cpu_us']} | "
            f"{r['launcher_updates']} | {', '.join(r['copied']) or '-'} | {h['gpu_us']}/{h['cpu_us']} | {device} | {c['busy_us']} / {lch['busy_us']} | {r['replay_pool_mib']} | {r['outputs_mib']} | "
            f"{r['launcher_fallback'] or '-'} |"
        )
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(
                {
                    "device": torch.cuda.get_device_name(0),
                    "torch": torch.__version__,
                    "cuda": torch.version.cuda,
                    "python": platform.python_version(),
                    "driver": _driver_version(),
                    "iterations": ITERS,
                    "rows": rows,
                },
                handle,
                indent=1,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
