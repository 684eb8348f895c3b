"""Stand-ins for torch's CUDA-graph lifecycle hooks (`torch.cuda.graphs.register_graph_*_hook`),
which no released torch here has yet: registrars that keep the functions and return removable
handles, and (on a GPU) torch's own capture and replay methods wrapped to call them where torch
calls its hooks."""

from __future__ import annotations

from typing import Any

import pytest

from graphlint.runtime_sanitizer.guard import lifecycle_hooks, sites
from graphlint.runtime_sanitizer.guard.eager_compare import keeping_raw_graphs

CAPTURE_START, CAPTURE_END, REPLAY_START, REPLAY_END = lifecycle_hooks.NAMES


class Registrar:
    """One of torch's `register_graph_*_hook` functions: keeps the hooks, returns a handle."""

    def __init__(self) -> None:
        self.hooks: list[Any] = []

    def __call__(self, fn: Any) -> Any:
        self.hooks.append(fn)
        registrar = self

        class Handle:
            def remove(self) -> None:
                registrar.hooks.remove(fn)

        return Handle()

    def fire(self, graph: Any) -> None:
        for hook in list(self.hooks):
            hook(graph)


def stand_in_registrars(torch: Any, monkeypatch: pytest.MonkeyPatch) -> dict[str, Registrar]:
    """torch.cuda.graphs given the four registrars, the patch not forced."""
    registrars = {name: Registrar() for name in lifecycle_hooks.NAMES}
    for name, registrar in registrars.items():
        monkeypatch.setattr(torch.cuda.graphs, name, registrar, raising=False)
    monkeypatch.delenv(lifecycle_hooks.FORCE_PATCH, raising=False)
    return registrars


def fire_from_torch(torch: Any, monkeypatch: pytest.MonkeyPatch, hooks: dict[str, Registrar]) -> None:
    """Call the hooks where torch would: capture start once the capture is live, capture end once
    it ended with its graph still alive (graphs keep it: `keep_graph=True`), replay start and end
    around each launch, the end even when the launch raised. The wrappers stand for torch's own
    frames, so findings are placed at the user's line as they would be."""
    library = sites.is_library
    monkeypatch.setattr(sites, "is_library", lambda filename: filename == __file__ or library(filename))
    cls = torch.cuda.CUDAGraph
    begin, end, replay = cls.capture_begin, cls.capture_end, cls.replay
    keeping_new, keeping_init = keeping_raw_graphs(cls)

    def capture_begin(graph: Any, *args: Any, **kwargs: Any) -> Any:
        result = begin(graph, *args, **kwargs)
        hooks[CAPTURE_START].fire(graph)
        return result

    def capture_end(graph: Any, *args: Any, **kwargs: Any) -> Any:
        result = end(graph, *args, **kwargs)
        hooks[CAPTURE_END].fire(graph)
        return result

    def replaying(graph: Any, *args: Any, **kwargs: Any) -> Any:
        hooks[REPLAY_START].fire(graph)
        try:
            return replay(graph, *args, **kwargs)
        finally:
            hooks[REPLAY_END].fire(graph)

    monkeypatch.setattr(cls, "__new__", keeping_new)
    monkeypatch.setattr(cls, "__init__", keeping_init)
    monkeypatch.setattr(cls, "capture_begin", capture_begin)
    monkeypatch.setattr(cls, "capture_end", capture_end)
    monkeypatch.setattr(cls, "replay", replaying)
