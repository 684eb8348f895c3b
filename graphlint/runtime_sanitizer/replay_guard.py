"""Sanitized replay for graphs the program captures itself (needs torch; CUDA to be useful).

While installed, every `torch.cuda.graph` capture is watched by a dispatch mode that learns
which tensors the graph reads (static inputs: tensors that existed before the capture) and
which memory it writes (static outputs: tensors made during it). Every `CUDAGraph.replay`
(also the ones `make_graphed_callables` makes) is counted per graph, and outside captures
a dispatch mode gives each new tensor that aliases a graph's output memory (a view, a
`detach()`, a graphed callable's return value) the generation of the replay it came from.

- GL503: such a handle of replay k read after replay k+1 overwrote it (the graph, the
  output, both replays and the reading site are named). The static output tensor itself
  always holds the newest replay and is not a stale handle.
- GL506: a replay whose static inputs were not written (tensor version counters) since the
  previous replay, when the graph has been replayed more than once.
- `make_graphed_callables`: each callable is first put through the two-capture analysis on
  its sample arguments (GL501 unstable capture, GL505 baked host values, GL504 unordered
  accesses, GL508 pool memory), with every parameter, buffer and the RNG state restored
  afterwards, then graphed as usual.
- Findings of the parameterized launcher (GL502, GL507) made while a guard is installed are
  collected with the guard's own (`publish`).

Findings are collected (warn) or raised (`mode="raise"`); `uninstall()` restores torch.
"""

from __future__ import annotations

import contextlib
import traceback
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from graphlint.findings import Finding
from graphlint.runtime_sanitizer.capture import tensors_in
from graphlint.runtime_sanitizer.graph_counts import GraphCounts
from graphlint.runtime_sanitizer.report import rule_finding
from graphlint.runtime_sanitizer.rules import REPLAY_ON_UNCHANGED_INPUTS, STALE_OUTPUT_READ


class StaleOutputRead(RuntimeError):
    """Raised in `mode="raise"` when a stale output handle is read (GL503)."""


@dataclass
class _GraphState:
    label: str
    inputs: list[tuple[Any, int]] = field(default_factory=list)  # (weakref to tensor, version at last replay)
    output_ranges: list[tuple[int, int]] = field(default_factory=list)
    replays: int = 0
    unchanged_reported: bool = False


_INSTALLED: list[ReplayGuard] = []


@contextlib.contextmanager
def sanitizer_internal() -> Iterator[None]:
    """The sanitizer's own captures and replays (the launcher's build, the analysis of graphed
    callables): the installed guard does not take them for the program's graphs."""
    guards = list(_INSTALLED)
    for guard in guards:
        guard._internal += 1
    try:
        yield
    finally:
        for guard in guards:
            guard._internal -= 1


def publish(finding: Finding) -> None:
    """Hand a finding made elsewhere in the sanitizer (the launcher) to the installed guard."""
    if _INSTALLED:
        _INSTALLED[-1].findings.append(finding)


def user_site() -> tuple[str, int]:
    for frame in reversed(traceback.extract_stack()[:-2]):
        name = frame.filename.replace("\\\\", "/")
        if "/torch/" in name or "/graphlint/runtime_sanitizer/" in name or "/_pytest/" in name or "/pluggy/" in name:
            continue
        return frame.filename, frame.lineno or 1
    return "<unknown>", 1


def _ranges(tensors: list[Any]) -> list[tuple[int, int]]:
    result = []
    for tensor in tensors:
        try:
            storage = tensor.untyped_storage()
            result.append((storage.data_ptr(), storage.nbytes()))
        except Exception:
            continue
    return result


class ReplayGuard:
    def __init__(self, mode: str = "warn") -> None:
        if mode not in ("warn", "raise"):
            raise ValueError("mode must be 'warn' or 'raise'")
        self.mode = mode
        self.findings: list[Finding] = []
        self._graphs: dict[int, _GraphState] = {}
        self._handles: dict[int, tuple[Any, int, int]] = {}  # id(tensor) -> (weakref, graph id, generation)
        self._saved: dict[str, Any] = {}
        self._outer = None
        self._capturing: list[Any] = []
        self._internal = 0  # >0 while the sanitizer runs its own captures
        self.graphs = GraphCounts()

    # -- install / uninstall -------------------------------------------------------------
    def install(self) -> ReplayGuard:
        import torch

        guard = self
        graph_cls = torch.cuda.graph
        original_enter, original_exit = graph_cls.__enter__, graph_cls.__exit__
        original_replay = torch.cuda.CUDAGraph.replay
        self._saved = {"enter": original_enter, "exit": original_exit, "replay": original_replay}

        def enter(ctx):
            result = original_enter(ctx)
            guard._begin_capture(ctx)
            return result

        def exit_(ctx, *exc):
            guard._end_capture(ctx)
            return original_exit(ctx, *exc)

        def replay(graph):
            guard._before_replay(graph)
            return original_replay(graph)

        graph_cls.__enter__, graph_cls.__exit__ = enter, exit_
        torch.cuda.CUDAGraph.replay = replay
        self._saved["graphed"] = (torch.cuda.make_graphed_callables, torch.cuda.graphs.make_graphed_callables)
        original_graphed = torch.cuda.graphs.make_graphed_callables

        def make_graphed_callables(callables, sample_args, *args, **kwargs):
            guard._analyse_graphed(callables, sample_args)
            return original_graphed(callables, sample_args, *args, **kwargs)

        torch.cuda.make_graphed_callables = torch.cuda.graphs.make_graphed_callables = make_graphed_callables
        self._outer = _HandleMode(self)
        self._outer.__enter__()
        _INSTALLED.append(self)
        return self

    def uninstall(self) -> None:
        import torch

        if self in _INSTALLED:
            _INSTALLED.remove(self)
        if self._outer is not None:
            self._outer.__exit__(None, None, None)
            self._outer = None
        if self._saved:
            torch.cuda.make_graphed_callables, torch.cuda.graphs.make_graphed_callables = self._saved["graphed"]
            torch.cuda.graph.__enter__ = self._saved["enter"]
            torch.cuda.graph.__exit__ = self._saved["exit"]
            torch.cuda.CUDAGraph.replay = self._saved["replay"]
            self._saved = {}

    def __enter__(self) -> ReplayGuard:
        return self.install()

    def __exit__(self, *exc: Any) -> None:
        self.uninstall()

    # -- graphed callables ----------------------------------------------------------------
    def _analyse_graphed(self, callables: Any, sample_args: Any) -> None:
        """The two-capture analysis of each callable before it is graphed. The analysis runs the
        callable several times; `sanitize_callable` undoes that. When it cannot run (the
        callable needs something the analysis cannot give it) it says so and graphs as usual."""
        import warnings

        import torch

        from graphlint.runtime_sanitizer.api import sanitize_callable

        pairs = (
            [(callables, sample_args)]
            if not isinstance(callables, tuple)
            else list(zip(callables, sample_args, strict=True))
        )
        self._outer.__exit__(None, None, None)  # its own captures are not the program's
        try:
            for fn, args in pairs:
                try:
                    with torch.no_grad(), sanitizer_internal():  # forward graph; no autograd state left
                        report = sanitize_callable(fn, *args)
                except Exception as error:  # never break the program: say why, then graph as usual
                    warnings.warn(f"graphlint: could not analyse a graphed callable: {error}", stacklevel=4)
                    continue
                self.findings.extend(report.findings)
        finally:
            self._outer.__enter__()

    # -- capture -------------------------------------------------------------------------
    def _begin_capture(self, ctx: Any) -> None:
        if self._internal:
            return
        recorder = _CaptureMode()
        recorder.__enter__()
        self._capturing.append((ctx, recorder))

    def _end_capture(self, ctx: Any) -> None:
        if self._internal or not self._capturing:
            return
        _, recorder = self._capturing.pop()
        recorder.__exit__(None, None, None)
        graph = getattr(ctx, "cuda_graph", None)
        if graph is None:
            return
        made = {id(t) for t in recorder.made}
        made_ranges = _ranges(recorder.made)
        inputs = []
        for tensor in recorder.read:
            if id(tensor) in made:
                continue
            ptr = tensor.untyped_storage().data_ptr()
            if any(start <= ptr < start + size for start, size in made_ranges):
                continue
            inputs.append((weakref.ref(tensor), tensor._version))
        site = user_site()
        self._graphs[id(graph)] = _GraphState(f"graph captured at {site[0]}:{site[1]}", inputs, made_ranges)

    # -- replay --------------------------------------------------------------------------
    def _before_replay(self, graph: Any) -> None:
        state = self._graphs.get(id(graph))
        if state is None:
            return
        state.replays += 1
        live = [(ref(), version) for ref, version in state.inputs]
        live = [(t, v) for t, v in live if t is not None]
        if state.replays > 2 and live and not state.unchanged_reported:
            if all(t._version == v for t, v in live):
                state.unchanged_reported = True
                path, line = user_site()
                self._report(
                    REPLAY_ON_UNCHANGED_INPUTS,
                    f"replay {state.replays} of the {state.label} runs on static inputs that were not written since "
                    "replay {0}: it recomputes the same result".format(state.replays - 1),
                    path,
                    line,
                )
        state.inputs = [(weakref.ref(t), t._version) for t, _ in live]

    # -- handles -------------------------------------------------------------------------
    def _note_new(self, tensor: Any) -> None:
        if self._capturing:
            return
        try:
            ptr = tensor.untyped_storage().data_ptr()
        except Exception:
            return
        for graph_id, state in self._graphs.items():
            if state.replays and any(start <= ptr < start + size for start, size in state.output_ranges):
                key = id(tensor)
                self._handles[key] = (
                    weakref.ref(tensor, lambda _, k=key: self._handles.pop(k, None)),
                    graph_id,
                    state.replays,
                )
                return

    def _check_read(self, tensor: Any) -> None:
        entry = self._handles.get(id(tensor))
        if entry is None or entry[0]() is not tensor:
            return
        _, graph_id, generation = entry
        state = self._graphs.get(graph_id)
        if state is None or state.replays <= generation:
            return
        path, line = user_site()
        self._handles.pop(id(tensor), None)  # one report per handle
        self._report(
            STALE_OUTPUT_READ,
            f"an output of replay {generation} of the {state.label} is read after replay {state.replays} overwrote it",
            path,
            line,
        )

    def _report(self, rule: Any, message: str, path: str, line: int) -> None:
        finding = rule_finding(rule, message, (path, line))
        self.findings.append(finding)
        if self.mode == "raise" and rule.code == "GL503":
            raise StaleOutputRead(message)


def _dispatch_mode_base():
    from torch.utils._python_dispatch import TorchDispatchMode

    return TorchDispatchMode


class _CaptureMode(_dispatch_mode_base()):
    """During a capture: what the graph reads, and what it makes."""

    def __init__(self) -> None:
        super().__init__()
        self.read: list[Any] = []
        self.made: list[Any] = []
        self._seen: set[int] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        inputs = tensors_in(args) + tensors_in(kwargs)
        input_storages = set()
        for tensor in inputs:
            if tensor.is_cuda:
                input_storages.add(tensor.untyped_storage().data_ptr())
                if id(tensor) not in self._seen:
                    self._seen.add(id(tensor))
                    self.read.append(tensor)
        for tensor in tensors_in(out):
            # A view (weight.t(), x[0]) shares its input's memory: it is not graph output memory.
            if tensor.is_cuda and tensor.untyped_storage().data_ptr() not in input_storages:
                self._seen.add(id(tensor))
                self.made.append(tensor)
        return out


class _HandleMode(_dispatch_mode_base()):
    """Outside captures: reads of stale handles, and new aliases of graph outputs."""

    def __init__(self, guard: ReplayGuard) -> None:
        super().__init__()
        self.guard = guard

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        for tensor in tensors_in(args) + tensors_in(kwargs):
            self.guard._check_read(tensor)
        out = func(*args, **kwargs)
        for tensor in tensors_in(out):
            self.guard._note_new(tensor)
        return out
