"""No garbage collection falls inside a capture under the replay guard, raw or not; the young
garbage is collected once the capture ends.

Seen on an H100 (stop 55): a test capturing with `g.capture_begin()` passed alone and failed
after an earlier test had built graphs with `make_graphed_callables` (each is held in a reference
cycle): `capture_end` raised `cudaErrorStreamCaptureInvalidated` after torch warned "operation
not permitted when stream is capturing (function reset)": `CUDAGraph::reset`, a graph destroyed
inside the capture. The guard's dispatch modes allocate on every operation, so the collector ran
inside captures. `torch.cuda.graph` no longer collects on entry (only with
`torch.compiler.config.force_cudagraph_gc`), and tensordict's `test_tdmodule`, which drops two
graphed modules and captures a third under it, failed the same way (2026-12-06). Collecting
before the begin fixed both, and broke PyTorch's
`test_graph_memory_stats_and_use_result_after_destroy_graph` in the whole suite, which reads the
allocator's statistics just before `capture_begin` (`collector_pause` says why). Checked on the
CPU build: the wrappers are plain Python around torch's `capture_begin` and `capture_end`."""

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


@pytest.fixture
def watched(monkeypatch):
    """The guard installed over stand-ins for torch's begin and end, which record whether the
    collector runs and whether a dropped cycle is still alive when each is called."""
    monkeypatch.setenv(lifecycle_hooks.FORCE_PATCH, "1")  # the patched path, whatever torch has
    seen: list[tuple[str, bool, bool]] = []
    probe: list[weakref.ref] = []
    refuse: list[str] = []  # a begin that raises this

    def record(name):
        def stand_in(graph, *args, **kwargs):
            if refuse and name == "begin":
                raise RuntimeError(refuse[0])
            seen.append((name, gc.isenabled(), probe[0]() is not None))

        return stand_in

    monkeypatch.setattr(torch.cuda.CUDAGraph, "capture_begin", record("begin"))
    monkeypatch.setattr(torch.cuda.CUDAGraph, "capture_end", record("end"))
    monkeypatch.setattr(torch.cuda, "current_stream", lambda *a, **k: None)
    assert gc.isenabled()
    guard = ReplayGuard().install()
    guard._internal += 1  # no capture is recorded on the CPU build: only the wrappers run
    try:
        yield guard, seen, probe, refuse
    finally:
        guard._internal -= 1
        guard.uninstall()
        gc.enable()


@pytest.mark.parametrize("managed", [0, 1], ids=["raw capture_begin", "torch.cuda.graph's own begin"])
def test_the_collector_waits_for_the_capture_to_end_and_then_runs(watched, managed: int) -> None:
    guard, seen, probe, _ = watched
    guard._managed += managed  # inside `torch.cuda.graph.__enter__`, as its begin is
    try:
        probe.append(weakref.ref(_Cyclic()))
        torch.cuda.CUDAGraph.capture_begin(object())
        assert not gc.isenabled() and probe[0]() is not None  # no allocation triggers a collection
        torch.cuda.CUDAGraph.capture_end(object())
    finally:
        guard._managed -= managed
    # Not collected before the begin (the program may be measuring), paused during the capture,
    # and collected as soon as it ended.
    assert seen == [("begin", False, True), ("end", False, True)]
    assert gc.isenabled() and probe[0]() is None


def test_the_collection_at_the_end_is_of_the_youngest_generation_only(monkeypatch, watched) -> None:
    """A full collection costs the whole heap (0.3 s with two million objects) on every capture;
    the older generations also hold what earlier code left (PyTorch's memory-stats graph test
    failed under the sanitizer while generation 1 was collected there, passed with 0 alone)."""
    _, _, probe, _ = watched
    from graphlint.runtime_sanitizer.guard import collector_pause

    generations: list[int] = []
    monkeypatch.setattr(collector_pause.gc, "collect", lambda generation=2: generations.append(generation) or 0)
    probe.append(weakref.ref(_Cyclic()))
    torch.cuda.CUDAGraph.capture_begin(object())
    torch.cuda.CUDAGraph.capture_end(object())
    assert generations == [0]


def test_nested_captures_resume_the_collector_only_at_the_outermost_end(watched) -> None:
    _, _, probe, _ = watched
    probe.append(weakref.ref(_Cyclic()))
    torch.cuda.CUDAGraph.capture_begin(object())
    torch.cuda.CUDAGraph.capture_begin(object())
    torch.cuda.CUDAGraph.capture_end(object())
    assert not gc.isenabled() and probe[0]() is not None
    torch.cuda.CUDAGraph.capture_end(object())
    assert gc.isenabled() and probe[0]() is None


def test_a_program_that_turned_the_collector_off_keeps_it_off(watched) -> None:
    _, _, probe, _ = watched
    probe.append(weakref.ref(_Cyclic()))
    gc.disable()
    torch.cuda.CUDAGraph.capture_begin(object())
    torch.cuda.CUDAGraph.capture_end(object())
    assert not gc.isenabled() and probe[0]() is not None  # neither enabled nor collected for it


def test_a_begin_that_fails_gives_the_collector_back(watched) -> None:
    _, _, probe, refuse = watched
    probe.append(weakref.ref(_Cyclic()))
    refuse.append("capture refused")
    with pytest.raises(RuntimeError, match="capture refused"):
        torch.cuda.CUDAGraph.capture_begin(object())
    assert gc.isenabled() and probe[0]() is None


def test_leaving_with_a_capture_never_ended_gives_the_collector_back(watched) -> None:
    guard, _, probe, _ = watched
    probe.append(weakref.ref(_Cyclic()))
    torch.cuda.CUDAGraph.capture_begin(object())
    assert not gc.isenabled()
    guard.uninstall()  # the program raised out of its capture and the sanitizer is leaving
    assert gc.isenabled()
