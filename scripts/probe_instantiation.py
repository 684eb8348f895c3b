"""Probe (needs CUDA): is the launcher's executable graph slower than another instantiation of
the same template, with no update at all?

The same-graph run of the wide zoo (benchmarks/results/launcher_wide_zoo-2026-12-07b-h100-same-graph.md,
issue #34) left two rows unexplained: on tinynet_a and fastvit_t8 in bfloat16 the launcher took
2-3% more GPU busy time than PyTorch's recipe replayed on a clone of the launcher's own graph.
The run could not tell the launcher's separate instantiation from its re-pointing. This times,
interleaved (`launcher_speed.measure`) on the launcher's one template:

- ``exec_launcher``: the launcher's own executable graph launched bare (no update, no copy);
- ``exec_clone_a``, ``exec_clone_b``: two more instantiations of clones of the template, bare
  (how far apart two instantiations of one graph land);
- ``copy_clone_a``: PyTorch's recipe on clone A (what the same-graph run compared against);
- ``launcher``: the launcher on inputs rotating over a pool of four (its nodes move every call);
- ``launcher_same``: the launcher on one input every call (no update after the first).

If ``exec_launcher`` is slower than both clones, the instantiation (or where its nodes point)
costs the time; if it is not but ``launcher`` is, the re-pointing does.

    python scripts/probe_instantiation.py [--json FILE] [--models timm.tinynet_a,...]
"""

from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))
import launcher_speed
import launcher_wide_zoo
import launcher_zoo as zoo

sys.path.insert(0, os.path.dirname(__file__))
from probe_launcher_busy import run_probe

from graphlint.runtime_sanitizer import driver

DEFAULT = "timm.tinynet_a,timm.fastvit_t8,torchvision.resnet18"


def bare_clone(template):
    """A clone of the template, instantiated apart, and a call that launches it bare."""
    drv = driver.bindings()
    clone = driver.ok(drv.cuGraphClone(template))
    executable = driver.ok(drv.cuGraphInstantiate(clone, 0))

    def launch(_):
        driver.ok(drv.cuGraphLaunch(executable, drv.CUstream(torch.cuda.current_stream().cuda_stream)))

    def close() -> None:
        driver.ok(drv.cuGraphExecDestroy(executable))
        driver.ok(drv.cuGraphDestroy(clone))

    return launch, close


def variants(build, make_inputs, dtype) -> dict:
    """Busy and latency medians per variant for one model and dtype."""
    model = build().cuda().eval().to(dtype)
    pool = [zoo.inputs_on_device(make_inputs, dtype, 2) for _ in range(4)]
    closers = []
    try:
        with torch.inference_mode():
            launcher = launcher_wide_zoo.launcher_keeping_inputs(model, pool[0])
            template = driver.bindings().CUgraph(launcher._capture.graph.raw_cuda_graph())
            clone_a, close_a = bare_clone(template)
            clone_b, close_b = bare_clone(template)
            copy_a, close_copy = launcher_wide_zoo.copy_on_launcher_graph(launcher)
            closers += [close_a, close_b, close_copy]
            same = pool[1]
            calls = {
                "exec_launcher": lambda _: launcher._replay(),
                "exec_clone_a": clone_a,
                "exec_clone_b": clone_b,
                "copy_clone_a": copy_a,
                "launcher": lambda x: launcher(*x),
                "launcher_same": lambda _: launcher(*same),
            }
            launcher_speed.ITERS = 40
            timed = launcher_speed.measure(calls, pool)
    finally:
        torch.cuda.synchronize()
        for close in closers:
            close()
    timed["patched_nodes"] = len(launcher._nodes)
    timed["graph_nodes"] = len(launcher._capture.snapshot.nodes)
    timed["updates"] = "device" if launcher._updater is not None else "host"
    timed["copied"] = sorted(launcher.copied)
    return timed


def main() -> int:
    return run_probe(variants, __doc__ or "", DEFAULT, dtypes="bfloat16,float32")


if __name__ == "__main__":
    sys.exit(main())
