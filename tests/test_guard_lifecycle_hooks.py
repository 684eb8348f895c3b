"""Where torch has its CUDA-graph lifecycle hooks (`torch.cuda.graphs.register_graph_*_hook`,
newer than any released torch here), the guard registers on them instead of patching torch's
entry points; where any of the four is missing it patches as before. The hooks are stood in for
on the CPU build: a registrar that keeps the function and returns a removable handle, called by
the test as torch would call it."""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")

from hook_stand_ins import (  # noqa: E402
    CAPTURE_END,
    CAPTURE_START,
    REPLAY_END,
    REPLAY_START,
    stand_in_registrars,
)
from hook_stand_ins import Registrar as _Registrar  # noqa: E402
from torch.utils._python_dispatch import _get_current_dispatch_mode_stack  # noqa: E402

from graphlint.runtime_sanitizer.guard import lifecycle_hooks  # noqa: E402
from graphlint.runtime_sanitizer.guard.installed import sanitizer_internal  # noqa: E402
from graphlint.runtime_sanitizer.guard.replay_guard import ReplayGuard  # noqa: E402


class _Graph:
    """A graph the hooks are called with (torch passes its CUDAGraph)."""

    def pool(self) -> tuple[int, int]:
        return (0, id(self))

    def raw_cuda_graph(self) -> int:
        raise RuntimeError("no driver on the CPU")


@pytest.fixture
def hooks(monkeypatch: pytest.MonkeyPatch) -> dict[str, _Registrar]:
    registrars = stand_in_registrars(torch, monkeypatch)
    stream = type("Stream", (), {"cuda_stream": 7})()  # the CPU build has no current stream
    monkeypatch.setattr(torch.cuda, "current_stream", lambda *a, **k: stream)
    return registrars


def _entry_points() -> tuple[Any, ...]:
    graph = torch.cuda.CUDAGraph
    return (torch.cuda.graph.__enter__, torch.cuda.graph.__exit__, graph.replay, graph.capture_begin, graph.capture_end)


def test_where_torch_has_the_hooks_the_guard_registers_and_patches_nothing(hooks: dict[str, _Registrar]) -> None:
    before = _entry_points()
    guard = ReplayGuard().install()
    try:
        assert guard.hooked
        assert _entry_points() == before, "an entry point was patched although torch has hooks"
        assert all(len(r.hooks) == 1 for r in hooks.values())
    finally:
        guard.uninstall()
    assert all(r.hooks == [] for r in hooks.values()), "a hook stayed registered after uninstall"


@pytest.mark.parametrize("missing", lifecycle_hooks.NAMES)
def test_a_torch_lacking_any_hook_is_patched_as_before(
    hooks: dict[str, _Registrar], monkeypatch: pytest.MonkeyPatch, missing: str
) -> None:
    monkeypatch.delattr(torch.cuda.graphs, missing)
    before = _entry_points()
    guard = ReplayGuard().install()
    try:
        assert not guard.hooked
        assert all(r.hooks == [] for r in hooks.values()), "half the lifecycle hooked, half patched"
        assert torch.cuda.CUDAGraph.replay is not before[2] and torch.cuda.graph.__enter__ is not before[0]
    finally:
        guard.uninstall()
    assert _entry_points() == before


def test_the_patch_can_be_asked_for_where_the_hooks_exist(
    hooks: dict[str, _Registrar], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(lifecycle_hooks.FORCE_PATCH, "1")
    guard = ReplayGuard().install()
    try:
        assert not guard.hooked and all(r.hooks == [] for r in hooks.values())
    finally:
        guard.uninstall()


def _fire(registrar: _Registrar, graph: Any) -> None:
    """As torch calls its hooks, from C++: the innermost Python frame is the caller's (this file)."""
    for hook in list(registrar.hooks):
        hook(graph)


def _capture(hooks: dict[str, _Registrar], graph: Any) -> None:
    _fire(hooks[CAPTURE_START], graph)
    _fire(hooks[CAPTURE_END], graph)


def _replay(hooks: dict[str, _Registrar], graph: Any) -> None:
    _fire(hooks[REPLAY_START], graph)
    _fire(hooks[REPLAY_END], graph)


def test_hooked_captures_and_replays_reach_the_guard(hooks: dict[str, _Registrar]) -> None:
    """A capture seen through the hooks is counted and its replays numbered, as a patched one; on
    the CPU its ordering cannot be read, which is said (GL500), never passed as clean."""
    graph = _Graph()
    guard = ReplayGuard().install()
    try:
        _capture(hooks, graph)
        _replay(hooks, graph)
        _replay(hooks, graph)
        assert guard._graphs[id(graph)].replays == 2
    finally:
        guard.uninstall()
    assert guard.graphs.seen == 1 and len(guard.graphs.refused) == 1
    (refusal,) = [f for f in guard.findings if f.code == "GL500"]
    assert "could not be recorded" in refusal.message
    assert refusal.path.endswith("test_guard_lifecycle_hooks.py")


def test_a_capture_whose_end_never_came_is_closed_and_leaves_no_mode_behind(hooks: dict[str, _Registrar]) -> None:
    """A capture block that raised before capture_end gives a start hook and no end hook: the next
    capture on the stream, or uninstall, closes it unread, and the program's dispatch modes are
    as they were."""
    modes = list(_get_current_dispatch_mode_stack())
    guard = ReplayGuard().install()
    try:
        _fire(hooks[CAPTURE_START], _Graph())  # its block raised
        second = _Graph()
        _capture(hooks, second)
        assert list(guard._graphs) == [id(second)] and not guard._capturing
        _fire(hooks[CAPTURE_START], _Graph())  # raised again
        with sanitizer_internal():  # the sanitizer's own capture on that stream (a graphed callable's analysis)
            _capture(hooks, _Graph())
        assert not guard._capturing
        _fire(hooks[CAPTURE_START], _Graph())  # raised once more, then uninstall
    finally:
        guard.uninstall()
    assert guard.graphs.seen == 1, "a capture that never ended was counted as analysed or refused"
    assert list(_get_current_dispatch_mode_stack()) == modes


def test_an_accelerator_graph_the_hooks_showed_is_not_refused(
    hooks: dict[str, _Registrar], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where `torch.accelerator.Graph` captures through CUDAGraph, the hooks show its capture: it
    is judged like any other, not refused as unseen (without hooks it is: test_guard_forward_compat)."""
    graph_cls = getattr(getattr(torch, "accelerator", None), "Graph", None)
    if graph_cls is None:
        pytest.skip("this torch has no torch.accelerator.Graph")
    inner = _Graph()

    def capture_end(graph: Any) -> None:
        _fire(hooks[CAPTURE_END], inner)

    monkeypatch.setattr(graph_cls, "capture_end", capture_end)
    guard = ReplayGuard().install()
    try:
        _fire(hooks[CAPTURE_START], inner)
        graph_cls.capture_end(object())
    finally:
        guard.uninstall()
    assert not any("torch.accelerator.Graph" in reason for _, reason in guard.graphs.refused)
    assert id(inner) in guard._graphs


def test_the_collector_is_paused_from_a_hooked_start_to_its_end_even_when_the_end_never_comes(
    hooks: dict[str, _Registrar],
) -> None:
    """As on the patched path (`collector_pause`): no collection inside a capture, where it could
    destroy a graph left in a cycle and invalidate the capture; a block that raised before its
    end (no end hook) leaves one pause for its stream, given back by the next end or uninstall."""
    import gc

    assert gc.isenabled()
    guard = ReplayGuard().install()
    try:
        _fire(hooks[CAPTURE_START], _Graph())
        assert not gc.isenabled()
        _fire(hooks[CAPTURE_END], _Graph())
        assert gc.isenabled()
        _fire(hooks[CAPTURE_START], _Graph())  # its block raised: no end hook
        _capture(hooks, _Graph())  # the next capture on that stream ends
        assert gc.isenabled()
        _fire(hooks[CAPTURE_START], _Graph())  # raised, then the sanitizer leaves
        assert not gc.isenabled()
    finally:
        guard.uninstall()
        enabled = gc.isenabled()
        gc.enable()
    assert enabled
