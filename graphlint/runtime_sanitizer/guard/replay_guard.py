"""Sanitized replay for graphs the program captures itself (needs torch; CUDA to be useful).

While installed, every `torch.cuda.graph` capture is watched by a dispatch mode that learns
which tensors the graph reads (static inputs: tensors that existed before the capture) and
which memory it writes (static outputs: tensors made during it). Every `CUDAGraph.replay`
(also the ones `make_graphed_callables` makes) is counted per graph, and outside captures
a dispatch mode gives each new tensor that aliases a graph's output memory (a view, a
`detach()`, a graphed callable's return value) the generation of the replay it came from.

- GL503: such a handle of replay k read after replay k+1 overwrote it (the graph, the
  output, both replays and the reading site are named). The static output tensor itself
  always holds the newest replay and is not a stale handle; but keeping that very object
  across replays (`kept.append(static_out)`) is seen (`kept_outputs`): before each replay, a
  static output whose reference count reached a new high is looked for in lists, dicts and
  deques, and one whose count of it grew to two or more since an earlier replay is GL503.
- GL506: a replay whose static inputs were not written (tensor version counters) since the
  previous replay, when the graph has been replayed more than once.
- GL504 for plain captures (`plain_capture`): the graph's edges against each operator's
  recorded accesses, read just before the capture ends; refused (GL500) when unsure.
- GL509 (`grad_alias`): a `make_graphed_callables` backward replayed while a parameter's
  `.grad` still aliases its static gradient buffer.
- `make_graphed_callables`: each callable is first put through the two-capture analysis on
  its sample arguments (GL501 unstable capture, GL505 baked host values, GL504 unordered
  accesses, GL508 pool memory), with every parameter, buffer and the RNG state restored
  afterwards, then graphed as usual.
- Findings of the parameterized launcher (GL502, GL507) made while a guard is installed are
  collected with the guard's own (`publish`).

Findings are placed at the user's line (`user_site`: on autograd's engine thread, the line
that called backward()), collected (warn) or raised (`mode="raise"`); `graphs` counts the
graphs seen, analysed and refused; `uninstall()` restores torch.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import sys
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from graphlint.findings import Finding
from graphlint.runtime_sanitizer.analysis.grad_alias import GradAliasTracker, GradRecord, grad_alias_message
from graphlint.runtime_sanitizer.analysis.graph_counts import GraphCounts
from graphlint.runtime_sanitizer.analysis.kept_outputs import KeptWatch, kept_output_message
from graphlint.runtime_sanitizer.analysis.report import ordering_findings, refused_finding, rule_finding
from graphlint.runtime_sanitizer.capture.plain_capture import CaptureOrdering, Refused
from graphlint.runtime_sanitizer.capture.two_captures import tensors_in
from graphlint.runtime_sanitizer.rules import GRAPHED_GRAD_ALIAS, REPLAY_ON_UNCHANGED_INPUTS, STALE_OUTPUT_READ


class StaleOutputRead(RuntimeError):
    """Raised in `mode="raise"` when a stale output handle is read (GL503)."""


@dataclass
class _GraphState:
    label: str
    inputs: list[tuple[Any, int]] = field(default_factory=list)  # (weakref to tensor, version at last replay)
    output_ranges: list[tuple[int, int]] = field(default_factory=list)
    replays: int = 0
    unchanged_reported: bool = False
    site: tuple[str, int] = ("<unknown>", 1)  # the user line that captured it
    params: list[tuple[str, Any]] = field(default_factory=list)  # make_graphed_callables: (name, weakref)
    grad_aliased: set[str] = field(default_factory=set)  # parameters reported as GL509
    updates_inputs: bool = False  # the graph writes its own inputs (a captured optimizer step)
    baseline: list[tuple[Any, Any]] | None = None  # (input, copy) taken when versions first stood still
    outputs: list[tuple[Any, KeptWatch]] = field(default_factory=list)  # (weakref, watch) per static output
    kept_reported: set[int] = field(default_factory=set)  # ids of containers reported as keeping an output


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


_UNKNOWN = ("<unknown>", 1)


@functools.cache
def _library_dirs() -> tuple[str, ...]:
    """Where frames are never the user's: torch, graphlint, and Python's standard library (the
    threading code under every thread's frames, `copy`, `contextlib`, ...)."""
    import sysconfig

    import torch

    import graphlint

    dirs = [os.path.dirname(os.path.abspath(m.__file__)) for m in (torch, graphlint)]
    dirs += [sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platstdlib"]]
    return tuple(os.path.abspath(d) + os.sep for d in dirs)


def _is_library(filename: str) -> bool:
    """A frame of torch, graphlint or the standard library (not of packages installed under it)."""
    if filename.startswith("<frozen "):
        return True
    path = os.path.abspath(filename)
    torch_dir, graphlint_dir, *stdlib = _library_dirs()
    if path.startswith((torch_dir, graphlint_dir)):
        return True
    installed = f"{os.sep}site-packages{os.sep}" in path or f"{os.sep}dist-packages{os.sep}" in path
    return path.startswith(tuple(stdlib)) and not installed


def innermost_user_frame() -> tuple[str, int] | None:
    """The innermost frame of this thread outside torch and graphlint (None if there is none,
    as on autograd's engine threads)."""
    frame = sys._getframe(1)
    while frame is not None:
        if not _is_library(frame.f_code.co_filename):
            return frame.f_code.co_filename, frame.f_lineno or 1
        frame = frame.f_back
    return None


def user_site() -> tuple[str, int]:
    """Where a finding happened in the user's code: the innermost frame outside torch and
    graphlint; on autograd's engine thread (no user frame), the line that called backward()."""
    frame = innermost_user_frame()
    if frame is not None:
        return frame
    for guard in reversed(_INSTALLED):
        if guard._backward_sites:
            return guard._backward_sites[-1]
    return _UNKNOWN


def _located(finding: Finding, site: tuple[str, int]) -> Finding:
    """The finding at the user's line (the analysis places it at the callable's source)."""
    path, line = site
    return dataclasses.replace(finding, path=path, line=line, end_line=line)


def _static_inputs(recorder: Any, made_ranges: list[tuple[int, int]]) -> list[tuple[Any, int]]:
    """(weakref, version) of each tensor the capture read that it did not make: its static inputs."""
    made = {id(t) for t in recorder.made}
    inputs = []
    for tensor in recorder.read:
        if id(tensor) in made:
            continue
        ptr = tensor.untyped_storage().data_ptr()
        if any(start <= ptr < start + size for start, size in made_ranges):
            continue
        inputs.append((weakref.ref(tensor), tensor._version))
    return inputs


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
    def __init__(self, mode: str = "warn", graph_dir: str | None = None) -> None:
        if mode not in ("warn", "raise"):
            raise ValueError("mode must be 'warn' or 'raise'")
        self.mode = mode
        self.graph_dir = graph_dir  # where to draw each analysed graph (SVG + HTML), if anywhere
        self.findings: list[Finding] = []
        self._graphs: dict[int, _GraphState] = {}
        self._handles: dict[int, tuple[Any, int, int]] = {}  # id(tensor) -> (weakref, graph id, generation)
        self._saved: dict[str, Any] = {}
        self._outer = None
        self._capturing: list[Any] = []
        self._internal = 0  # >0 while the sanitizer runs its own captures
        self._graphing = 0  # >0 inside make_graphed_callables
        self.graphs = GraphCounts()
        self._grad_alias = GradAliasTracker()
        self._backward_sites: list[tuple[str, int]] = []  # the user lines of the backward() calls running

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
            guard._end_capture(ctx, failed=exc[0] is not None)
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
            before = set(guard._graphs)
            guard._graphing += 1  # its captures are judged by the analysis above, not again
            try:
                result = original_graphed(callables, sample_args, *args, **kwargs)
            finally:
                guard._graphing -= 1
            guard._watch_grads(callables, [g for g in guard._graphs if g not in before])
            return result

        torch.cuda.make_graphed_callables = torch.cuda.graphs.make_graphed_callables = make_graphed_callables
        self._wrap_backward(torch)
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
            torch.Tensor.backward, torch.autograd.backward, torch.autograd.grad = self._saved["backward"]
            self._saved = {}

    def _wrap_backward(self, torch: Any) -> None:
        """Record the user line of each backward()/grad() call while it runs: the graphed
        backward replays on autograd's engine thread, where no user frame is on the stack."""
        self._saved["backward"] = (torch.Tensor.backward, torch.autograd.backward, torch.autograd.grad)
        sites = self._backward_sites

        def recording(original):
            @functools.wraps(original)
            def wrapper(*args, **kwargs):
                sites.append(innermost_user_frame() or (sites[-1] if sites else _UNKNOWN))
                try:
                    return original(*args, **kwargs)
                finally:
                    sites.pop()

            return wrapper

        torch.Tensor.backward = recording(torch.Tensor.backward)
        torch.autograd.backward = recording(torch.autograd.backward)
        torch.autograd.grad = recording(torch.autograd.grad)

    def __enter__(self) -> ReplayGuard:
        return self.install()

    def __exit__(self, *exc: Any) -> None:
        self.uninstall()

    # -- graphed callables ----------------------------------------------------------------
    def _analyse_graphed(self, callables: Any, sample_args: Any) -> None:
        """The two-capture analysis of each callable before it is graphed. The analysis runs the
        callable several times; `sanitize_callable` undoes that. When it cannot run (the
        callable needs something the analysis cannot give it) it refuses (GL500, counted) and
        graphs as usual. Findings are placed at the user's make_graphed_callables call."""
        import torch

        from graphlint.runtime_sanitizer.api import sanitize_callable

        pairs = (
            [(callables, sample_args)]
            if not isinstance(callables, tuple)
            else list(zip(callables, sample_args, strict=True))
        )
        site = user_site()
        self._outer.__exit__(None, None, None)  # its own captures are not the program's
        try:
            for fn, args in pairs:
                label = f"callable `{getattr(fn, '__qualname__', type(fn).__name__)}` graphed at {site[0]}:{site[1]}"
                self.graphs.seen += 1
                try:
                    with torch.no_grad(), sanitizer_internal():  # forward graph; no autograd state left
                        report = sanitize_callable(fn, *args, graph_dir=self.graph_dir)
                except Exception as error:  # never break the program: refuse, say why, graph as usual
                    self._refuse(label, f"{type(error).__name__}: {error}", site)
                    continue
                self.graphs.analysed += 1
                self.findings.extend(_located(f, site) for f in report.findings)
        finally:
            self._outer.__enter__()

    def _refuse(self, graph: str, reason: str, site: tuple[str, int]) -> None:
        """A graph seen but not analysed: counted, and a GL500 finding so no report reads as clean."""
        self.graphs.refused.append((graph, reason))
        self.findings.append(refused_finding(graph, reason, site))

    # -- capture -------------------------------------------------------------------------
    def _begin_capture(self, ctx: Any) -> None:
        if self._internal:
            return
        recorder = _CaptureMode()
        recorder.__enter__()
        ordering = None
        if not self._graphing:
            ordering = CaptureOrdering()
            ordering.start()
        self._capturing.append((ctx, recorder, ordering, user_site()))

    def _end_capture(self, ctx: Any, failed: bool = False) -> None:
        """Before the capture ends: what the graph reads and writes (GL503, GL506), and for a
        plain capture the ordering of its nodes (GL504), read from the graph being captured."""
        if self._internal or not self._capturing:
            return
        _, recorder, ordering, site = self._capturing.pop()
        if ordering is not None:
            ordering.stop()  # entered after the recorder: left first
        recorder.__exit__(None, None, None)
        graph = getattr(ctx, "cuda_graph", None)
        if graph is None or failed:
            return
        made_ranges = _ranges(recorder.made)
        label = f"graph captured at {site[0]}:{site[1]}"
        inputs = _static_inputs(recorder, made_ranges)
        state = _GraphState(label, inputs, made_ranges, site=site)
        # A graph that writes what it reads (parameters updated in place by a captured optimizer
        # step) computes something new on every replay, whatever the version counters say.
        state.updates_inputs = any(_storage_address(ref()) in recorder.written for ref, _ in inputs)
        # The tensors it made: those the program still holds after the capture are its static
        # outputs (the others die with the recorder, and their weak references with them).
        made = {id(t): t for t in recorder.made}
        state.outputs = [(weakref.ref(t), KeptWatch()) for t in made.values()]
        self._graphs[id(graph)] = state
        if ordering is not None:
            self.graphs.seen += 1
            self._check_ordering(ctx, ordering, label, site)

    def _check_ordering(self, ctx: Any, ordering: CaptureOrdering, label: str, site: tuple[str, int]) -> None:
        import torch

        stream = getattr(ctx, "capture_stream", None) or torch.cuda.current_stream()
        try:
            snapshot = ordering.finish(stream.cuda_stream)
        except Refused as refusal:
            self._refuse(label, str(refusal), site)
            return
        except Exception as error:  # never break the program: refuse, and say why
            self._refuse(label, f"{type(error).__name__}: {error}", site)
            return
        self.graphs.analysed += 1
        self.findings.extend(ordering_findings(snapshot, label, site))

    # -- replay --------------------------------------------------------------------------
    def _before_replay(self, graph: Any) -> None:
        state = self._graphs.get(id(graph))
        if state is None:
            return
        state.replays += 1
        if state.params:
            self._check_grad_alias(id(graph), state)
        if state.outputs:
            self._check_kept(state)
        live = [(ref(), version) for ref, version in state.inputs]
        live = [(t, v) for t, v in live if t is not None]
        if live and not state.unchanged_reported and not state.updates_inputs:
            self._check_unchanged(state, live)
        state.inputs = [(weakref.ref(t), t._version) for t, _ in live]

    def _check_unchanged(self, state: _GraphState, live: list[tuple[Any, int]]) -> None:
        """GL506 when the inputs' version counters stood still since the last replay and their
        contents did too. Version counters miss writes that bypass autograd's bookkeeping (a
        buffer refilled through another tensor on the same storage, data written by an
        extension), so the first standstill only takes a copy of the inputs and the next one
        compares: a finding needs both."""
        if state.replays < 2 or any(t._version != v for t, v in live):
            state.baseline = None
            return
        self._outer.__exit__(None, None, None)  # the guard's own copies and comparisons are not reads
        try:
            if state.baseline is None:
                state.baseline = _content_baseline([t for t, _ in live])
                return
            same = all(_torch_equal(copy, tensor) for tensor, copy in state.baseline)
        finally:
            self._outer.__enter__()
        state.baseline = None
        state.unchanged_reported = True  # written behind the counters, or reported: judged once either way
        if same:
            self._report(
                REPLAY_ON_UNCHANGED_INPUTS,
                f"replay {state.replays} of the {state.label} runs on static inputs that were not written since "
                f"replay {state.replays - 2} (same version counters, same contents): it recomputes the same result",
                state,
            )

    def _check_kept(self, state: _GraphState) -> None:
        """GL503 for a static output kept across replays: a list, dict or deque whose entries
        are that very tensor, grown to two or more since an earlier replay. The heap is scanned
        only for an output whose reference count reached a new high since the previous replay."""
        state.outputs = [(ref, watch) for ref, watch in state.outputs if ref() is not None]
        for ref, watch in state.outputs:
            tensor = ref()
            if tensor is None:
                continue
            for container, count in watch.check(tensor, sys.getrefcount(tensor)):
                if id(container) in state.kept_reported:
                    continue
                state.kept_reported.add(id(container))
                output = f"a {str(tensor.dtype).removeprefix('torch.')} tensor of shape {tuple(tensor.shape)}"
                self._report(
                    STALE_OUTPUT_READ,
                    kept_output_message(state.label, output, container, count, state.replays),
                    state,
                )

    # -- graphed gradients (GL509) -------------------------------------------------------
    def _watch_grads(self, callables: Any, graph_ids: list[int]) -> None:
        """The graphs make_graphed_callables just captured, and the parameters whose `.grad` may
        come to alias their static gradient buffers."""
        params = [(name, weakref.ref(p)) for name, p in _named_parameters(callables)]
        for graph_id in graph_ids:
            state = self._graphs[graph_id]
            state.params = params
            state.label = f"graph made by make_graphed_callables at {state.site[0]}:{state.site[1]}"

    def _check_grad_alias(self, graph_id: int, state: _GraphState) -> None:
        params = [(name, ref()) for name, ref in state.params]
        params = [(name, p) for name, p in params if p is not None]
        records = [GradRecord(name, _storage_address(p.grad)) for name, p in params]
        names = self._grad_alias.judge(graph_id, records, state.output_ranges)
        if names:
            state.grad_aliased.update(names)
            self._report(GRAPHED_GRAD_ALIAS, grad_alias_message(names, state.label, state.replays), state)
        for name, p in params:  # their stale reads, at this replay and every later one, are GL509: not GL503
            if name in state.grad_aliased and p.grad is not None:
                self._handles.pop(id(p.grad), None)

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
        self._handles.pop(id(tensor), None)  # one report per handle
        self._report(
            STALE_OUTPUT_READ,
            f"an output of replay {generation} of the {state.label} is read after replay {state.replays} overwrote it",
            state,
        )

    def _report(self, rule: Any, message: str, state: _GraphState | None = None) -> None:
        """A finding at the user's line (on the engine thread: the backward() call; with no user
        frame at all: the line that captured the graph)."""
        where = user_site()
        if where == _UNKNOWN and state is not None:
            where = state.site
        finding = rule_finding(rule, message, where)
        self.findings.append(finding)
        if self.mode == "raise" and rule.code == "GL503":
            raise StaleOutputRead(message)


def _named_parameters(callables: Any) -> list[tuple[str, Any]]:
    """(attribute name, parameter) of each module among the callables, prefixed with the
    module's class when several callables are graphed together."""
    modules = [
        c for c in (callables if isinstance(callables, tuple) else (callables,)) if hasattr(c, "named_parameters")
    ]
    found = []
    for index, module in enumerate(modules):
        prefix = f"{type(module).__name__}[{index}]." if len(modules) > 1 else ""
        found.extend((prefix + name, p) for name, p in module.named_parameters())
    return found


_BASELINE_BYTES = 256 << 20  # copy at most this much to confirm a standstill (smallest inputs first)


def _content_baseline(tensors: list[Any]) -> list[tuple[Any, Any]]:
    """Copies of the inputs, smallest first, up to a byte budget: the data inputs a program
    refills are small next to the weights, and one changed input is enough to clear GL506."""
    copies, used = [], 0
    for tensor in sorted(tensors, key=lambda t: t.numel() * t.element_size()):
        size = tensor.numel() * tensor.element_size()
        if copies and used + size > _BASELINE_BYTES:
            break
        copies.append((tensor, tensor.detach().clone()))
        used += size
    return copies


def _torch_equal(a: Any, b: Any) -> bool:
    import torch

    return a.shape == b.shape and bool(torch.equal(a, b))


def _storage_address(tensor: Any) -> int | None:
    return None if tensor is None else tensor.untyped_storage().data_ptr()


def _dispatch_mode_base():
    from torch.utils._python_dispatch import TorchDispatchMode

    class _GuardMode(TorchDispatchMode):
        @classmethod
        def ignore_compile_internals(cls) -> bool:
            """Stay out of torch.compile: Dynamo skips (runs eagerly) every frame while a mode
            that does not say this is active, and the sanitizer must not change what runs."""
            return True

    return _GuardMode


class _CaptureMode(_dispatch_mode_base()):
    """During a capture: what the graph reads, and what it makes."""

    def __init__(self) -> None:
        super().__init__()
        self.read: list[Any] = []
        self.made: list[Any] = []
        self.written: set[int] = set()  # storages an operator writes in place (schema alias info)
        self._seen: set[int] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        passed = [*zip(func._schema.arguments, args, strict=False)]
        passed += [(a, kwargs[a.name]) for a in func._schema.arguments if a.name in kwargs]
        for argument, value in passed:
            if argument.alias_info is not None and argument.alias_info.is_write:
                self.written.update(t.untyped_storage().data_ptr() for t in tensors_in(value) if t.is_cuda)
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
