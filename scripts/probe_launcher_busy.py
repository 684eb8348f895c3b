"""Probe (needs CUDA): where the launcher's GPU time per call goes, on a few wide-zoo models.

The wide zoo measured the launcher a few microseconds of GPU latency behind copy-in / replay /
clone-out in most rows (issue #34). Latency from an idle device mixes three things: the host's
work before the first launch, the re-upload a host-side node update costs the next launch, and
the kernels themselves. This times each variant's GPU busy time (`launcher_speed.busy`: calls
queued behind a spin kernel, so the host is out of the way) and its latency, interleaved:

- ``replay``: the plain graph alone, no copy (the floor);
- ``copy``: copy the input in, replay, clone the output out (PyTorch's recipe);
- ``launcher``: the launcher on inputs rotating over a pool of four (its nodes move every call);
- ``launcher_same``: the launcher on one input every call (its nodes never move: no update,
  so no re-upload; the output block the allocator hands back is usually the same too).

    python scripts/probe_launcher_busy.py [--json FILE] [--models timm.resnet18d,...]
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))
import launcher_speed
import launcher_wide_zoo
import launcher_zoo as zoo

sys.path.insert(0, os.path.dirname(__file__))
from probe_device_updates import write_rows

from graphlint.launcher.launcher import ParameterizedLauncher

DEFAULT = "torchvision.resnet18,torchvision.mobilenet_v3_small,timm.deit_tiny_patch16_224,transformers.gpt2"


def variants(build, make_inputs, dtype) -> dict:
    """Busy and latency medians per variant for one model and dtype."""
    model = build().cuda().eval().to(dtype)
    pool = [zoo.inputs_on_device(make_inputs, dtype, 2) for _ in range(4)]
    with torch.inference_mode():
        graph, copy = launcher_wide_zoo.copy_path(model, tuple(t.clone() for t in pool[0]))
        launcher = ParameterizedLauncher(model, pool[0])
        same = pool[1]
        calls = {
            "replay": lambda _: graph.replay(),
            "copy": copy,
            "launcher": lambda x: launcher(*x),
            "launcher_same": lambda _: launcher(*same),
        }
        launcher_speed.ITERS = 40
        timed = launcher_speed.measure(calls, pool)
    timed["patched_nodes"] = len(launcher._nodes)
    timed["graph_nodes"] = len(launcher._capture.snapshot.nodes)
    timed["updates"] = "device" if launcher._updater is not None else "host"
    timed["fallback"] = launcher.fallback_reason
    timed["copied"] = launcher.copied  # what the cost model chose to copy instead of re-pointing
    return timed


def run_probe(variants, description: str, models: str, dtypes: str = "float32,bfloat16") -> int:
    """A probe over wide-zoo models: ``variants(build, make_inputs, dtype)`` per model and
    dtype, each row printed and kept (an error says why and the probe goes on), then JSON."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json")
    parser.add_argument("--models", default=models)
    parser.add_argument("--dtypes", default=dtypes)
    args = parser.parse_args()
    wanted = args.models.split(",")
    entries = {name: (build, inputs) for name, build, inputs in launcher_wide_zoo.wide_zoo() if name in wanted}
    rows = {}
    for name in wanted:
        for dtype in [getattr(torch, d) for d in args.dtypes.split(",")]:
            key = f"{name}[{str(dtype).split('.')[-1]}]"
            try:
                rows[key] = variants(*entries[name], dtype)
            except Exception as error:  # a probe: say why and go on
                rows[key] = {"error": f"{type(error).__name__}: {str(error)[:160]}"}
            print(key, json.dumps(rows[key]), flush=True)
            write_rows(args.json, rows)
    return 0


def main() -> int:
    return run_probe(variants, __doc__ or "", DEFAULT)


if __name__ == "__main__":
    sys.exit(main())
