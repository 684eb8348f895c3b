"""A capture under the replay guard starts with no garbage left to collect, raw or not.

Seen on an H100 (stop 55): a test capturing with `g.capture_begin()` passed alone and failed
after an earlier test had built graphs with `make_graphed_callables` (each is held in a reference
cycle): `capture_end` raised `cudaErrorStreamCaptureInvalidated` after torch warned "operation
not permitted when stream is capturing (function reset)": `CUDAGraph::reset`, a graph destroyed
inside the capture.
The guard's dispatch modes allocate on every operation, so the collector runs inside a capture;
the guard collects before a capture begins. `torch.cuda.graph` no longer collects on entry
(only with `torch.compiler.config.force_cudagraph_gc`), and tensordict's `test_tdmodule`, which
drops two graphed modules and captures a third under it, failed the same way under the
sanitizer on an H100 (2026-12-06): its begin, which the guard sees as managed, collects too.
Checked on the CPU build: the wrapper is plain Python around torch's `capture_begin`."""

from __future__ import annotations

import gc
import weakref

import pytest

torch = pytest.importorskip("torch")

from graphlint.runtime_sanitizer.guard import lifecycle_hooks  # noqa: E402
from graphlint.runtime_sanitizer.guard.replay_guard import ReplayGuard  # noqa: E402


class _Cyclic:
    """Garbage only a collection frees, as a graph `make_graphed_callables` built and dropped."""

    def __init__(self) -> None:
        self.me = self


@pytest.mark.parametrize("managed", [0, 1], ids=["raw capture_begin", "torch.cuda.graph's own begin"])
def test_a_capture_begins_after_the_cycles_the_program_dropped_are_freed(monkeypatch, managed: int) -> None:
    monkeypatch.setenv(lifecycle_hooks.FORCE_PATCH, "1")  # the patched path, whatever torch has
    alive_at_begin: list[bool] = []
    monkeypatch.setattr(
        torch.cuda.CUDAGraph, "capture_begin", lambda graph, *a, **k: alive_at_begin.append(probe() is not None)
    )
    monkeypatch.setattr(torch.cuda, "current_stream", lambda *a, **k: None)
    was_enabled = gc.isenabled()
    gc.disable()  # the cycle stays until something collects it
    try:
        probe = weakref.ref(_Cyclic())
        assert probe() is not None
        guard = ReplayGuard().install()
        guard._internal += 1  # no capture is recorded on the CPU build: only the wrapper runs
        guard._managed += managed  # inside `torch.cuda.graph.__enter__`, as its begin is
        try:
            torch.cuda.CUDAGraph.capture_begin(object())
        finally:
            guard._managed -= managed
            guard._internal -= 1
            guard.uninstall()
    finally:
        if was_enabled:
            gc.enable()
    assert alive_at_begin == [False]
