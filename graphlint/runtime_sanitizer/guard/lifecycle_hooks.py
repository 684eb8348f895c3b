"""torch's CUDA-graph lifecycle hooks, where torch has them (needs torch).

Newer torch calls registered functions with each `CUDAGraph` as its capture begins and ends
and as each replay starts and ends (`torch.cuda.graphs.register_graph_capture_start_hook` and
its three siblings), from C++, whichever entry point made the graph. Where all four exist the
guard registers on them instead of patching `torch.cuda.graph`, `CUDAGraph.capture_begin`/
`capture_end` and `CUDAGraph.replay`: a hook is torch's promise across releases, where a patch
follows every new keyword and misses captures that never pass through the Python wrappers.
Where any of the four is missing, the guard patches as before (`ReplayGuard.install`).

The capture-start hook runs with the capture already live, so nothing here launches CUDA
work there. The capture-end hook runs after the stream capture ended, while the captured
`cudaGraph_t` is still alive: the ordering check reads that graph (`raw_cuda_graph()`)
instead of the capturing stream.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

NAMES = (
    "register_graph_capture_start_hook",
    "register_graph_capture_end_hook",
    "register_graph_replay_start_hook",
    "register_graph_replay_end_hook",
)
# Set to 1 to patch torch's entry points even where the hooks exist (to compare the two paths).
FORCE_PATCH = "GRAPHLINT_GUARD_PATCH"

Hook = Callable[[Any], None]


def registrars(torch: Any) -> tuple[Callable[[Hook], Any], ...] | None:
    """The four registration functions, or None when torch lacks any of them (or the patch is
    asked for): half of the lifecycle seen through hooks and half through patches would count
    a graph's replays twice or never."""
    if os.environ.get(FORCE_PATCH, "") not in ("", "0"):
        return None
    graphs = getattr(getattr(torch, "cuda", None), "graphs", None)
    found = tuple(getattr(graphs, name, None) for name in NAMES)
    if not all(callable(register) for register in found):
        return None
    return found  # type: ignore[return-value]


class LifecycleHooks:
    """The guard's four callbacks, registered with torch until `uninstall`."""

    def __init__(self, capture_start: Hook, capture_end: Hook, replay_start: Hook, replay_end: Hook) -> None:
        self._hooks = (capture_start, capture_end, replay_start, replay_end)
        self._handles: list[Any] = []

    def install(self, torch: Any) -> bool:
        """Register every hook; False (nothing registered) where torch has no hooks."""
        found = registrars(torch)
        if found is None:
            return False
        try:
            for register, hook in zip(found, self._hooks, strict=True):
                self._handles.append(register(hook))
        except Exception:
            self.uninstall()  # a half-registered lifecycle is worse than the patch
            return False
        return True

    def uninstall(self) -> None:
        handles, self._handles = self._handles, []
        for handle in handles:
            handle.remove()
