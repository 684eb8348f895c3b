"""The replay guard patches torch's capture and replay entry points; a newer torch adds keywords
to them release by release (`enable_annotations` 2.12, `check_input_liveness` 2.13/2.14, ...).
A wrapper that drops or refuses an argument breaks the user's program only under the sanitizer,
so each wrapper must keep the installed torch's signature and forward every argument, named or
not, including ones this torch does not have yet. Checked on the CPU build: the wrappers are
plain Python around torch's own functions."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from graphlint.runtime_sanitizer.guard.replay_guard import ReplayGuard  # noqa: E402


class _Spy:
    """Stands in for a torch entry point: records what it was called with."""

    def __init__(self, result: Any = None) -> None:
        self.calls: list[tuple[tuple, dict]] = []
        self.result = result

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.calls.append((args, kwargs))
        return self.result


def _keywords(function: Any) -> dict[str, object]:
    """Every keyword parameter of the installed torch's function, with a stand-in value."""
    return {
        name: object()
        for name, parameter in inspect.signature(function).parameters.items()
        if parameter.kind in (parameter.POSITIONAL_OR_KEYWORD, parameter.KEYWORD_ONLY)
        and parameter.default is not parameter.empty
    }


def test_the_patched_entry_points_keep_the_installed_signatures() -> None:
    originals = {
        "replay": torch.cuda.CUDAGraph.replay,
        "enter": torch.cuda.graph.__enter__,
        "exit": torch.cuda.graph.__exit__,
        "graphed": torch.cuda.make_graphed_callables,
    }
    installed = ReplayGuard().install()
    try:
        patched = {
            "replay": torch.cuda.CUDAGraph.replay,
            "enter": torch.cuda.graph.__enter__,
            "exit": torch.cuda.graph.__exit__,
            "graphed": torch.cuda.make_graphed_callables,
        }
        for name, original in originals.items():
            assert patched[name] is not original, f"{name} is not patched"
            assert patched[name].__wrapped__ is original, f"{name} hides the function it wraps"
        assert inspect.signature(patched["graphed"]) == inspect.signature(originals["graphed"])
    finally:
        installed.uninstall()
    assert (
        torch.cuda.CUDAGraph.replay is originals["replay"] and torch.cuda.make_graphed_callables is originals["graphed"]
    )


def test_replay_forwards_arguments_a_newer_torch_may_add(monkeypatch: pytest.MonkeyPatch) -> None:
    spy = _Spy(result="replayed")
    monkeypatch.setattr(torch.cuda.CUDAGraph, "replay", spy)
    installed = ReplayGuard().install()
    try:
        graph = object()  # a graph the guard never saw captured: it only forwards
        assert torch.cuda.CUDAGraph.replay(graph, 7, stream="s", future_option=True) == "replayed"
    finally:
        installed.uninstall()
    assert spy.calls == [((graph, 7), {"stream": "s", "future_option": True})]


def test_make_graphed_callables_forwards_every_keyword_of_the_installed_torch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    keywords = {**_keywords(torch.cuda.graphs.make_graphed_callables), "future_option": 1}
    spy = _Spy(result="graphed")
    monkeypatch.setattr(torch.cuda.graphs, "make_graphed_callables", spy)
    installed = ReplayGuard().install()
    try:
        module = torch.nn.Linear(2, 2)
        sample = (torch.ones(1, 2),)
        # Without a GPU the guard's own analysis refuses (GL500) and the call goes through.
        assert torch.cuda.make_graphed_callables(module, sample, **keywords) == "graphed"
    finally:
        installed.uninstall()
    assert spy.calls == [((module, sample), keywords)]
    assert {"num_warmup_iters", "allow_unused_input", "pool"} <= set(keywords)


def test_a_torch_accelerator_graph_capture_is_refused_not_passed_as_clean(monkeypatch: pytest.MonkeyPatch) -> None:
    """torch 2.13's `torch.accelerator.Graph` records past the patched CUDA entry points: each of its
    captures is counted and refused (GL500 at the user's line), and its capture_end still runs
    with every argument."""
    graph_cls = getattr(getattr(torch, "accelerator", None), "Graph", None)
    if graph_cls is None:
        pytest.skip("this torch has no torch.accelerator.Graph")
    spy = _Spy(result="ended")
    monkeypatch.setattr(graph_cls, "capture_end", spy)
    guard = ReplayGuard().install()
    try:
        graph = object()
        assert graph_cls.capture_end(graph, future_option=True) == "ended"  # line of the refusal
    finally:
        guard.uninstall()
    assert graph_cls.capture_end is spy  # put back
    assert spy.calls == [((graph,), {"future_option": True})]
    assert guard.graphs.seen == 1 and len(guard.graphs.refused) == 1
    (finding,) = [f for f in guard.findings if f.code == "GL500"]
    assert "torch.accelerator.Graph" in finding.message and finding.path.endswith("test_guard_forward_compat.py")
