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
- GL511 (`poison=True`, `guard/poison.py`): refilled static inputs are filled with NaN after
  each replay, and the first eager read of a replay output that the poison reached is named.
  This changes what a buggy program computes, on purpose; a clean one computes what it did.
- GL512 (`compare_eager=True`, `guard/eager_compare.py`): each captured `with` block is run
  again eagerly before each replay of its graph, everything it writes put back, and the
  replay's outputs compared with it; at the first divergence, prefixes of the graph name the
  first operator whose output differs, at its Python line.
- Findings of the parameterized launcher (GL502, GL507) made while a guard is installed are
  collected with the guard's own (`publish`).
- Coverage (`coverage=True`, `guard/coverage_watch.py`): how much GPU work ran from graphs,
  from torch's profiler (CUDA activity only) between install and uninstall; the guard's own
  tensor work is marked so that its kernels count in neither share.

Findings are placed at the user's line (`user_site`: on autograd's engine thread, the line
that called backward()), collected (warn) or raised (`mode="raise"`); `graphs` counts the
graphs seen, analysed and refused, and their coverage; `uninstall()` restores torch.
"""

from __future__ import annotations

import contextlib
import functools
import sys
import weakref
from collections.abc import Iterator
from typing import Any

from graphlint.findings import Finding
from graphlint.runtime_sanitizer.analysis.grad_alias import GradAliasTracker, GradRecord, grad_alias_message
from graphlint.runtime_sanitizer.analysis.graph_counts import GraphCounts
from graphlint.runtime_sanitizer.analysis.kept_outputs import KeptWatch, kept_output_message
from graphlint.runtime_sanitizer.analysis.pool_order import violation_message
from graphlint.runtime_sanitizer.analysis.report import ordering_findings, refused_finding, rule_finding
from graphlint.runtime_sanitizer.capture.plain_capture import CaptureOrdering, Refused
from graphlint.runtime_sanitizer.guard.accelerator_graphs import REASON as ACCELERATOR_REASON
from graphlint.runtime_sanitizer.guard.accelerator_graphs import AcceleratorGraphWatch
from graphlint.runtime_sanitizer.guard.collector_pause import CollectorPause
from graphlint.runtime_sanitizer.guard.coverage_watch import CoverageWatch
from graphlint.runtime_sanitizer.guard.dispatch_modes import CaptureRecorder, HandleWatch
from graphlint.runtime_sanitizer.guard.eager_compare import EagerCompare
from graphlint.runtime_sanitizer.guard.graph_state import (
    GraphState,
    content_baseline,
    in_ranges,
    named_parameters,
    outside,
    static_inputs,
    storage_address,
    torch_equal,
    written_storages,
)
from graphlint.runtime_sanitizer.guard.installed import INSTALLED, sanitizer_internal
from graphlint.runtime_sanitizer.guard.lifecycle_hooks import LifecycleHooks
from graphlint.runtime_sanitizer.guard.poison import PoisonWatch
from graphlint.runtime_sanitizer.guard.pool_watch import PoolWatch
from graphlint.runtime_sanitizer.guard.sites import UNKNOWN_SITE, innermost_user_frame, located, user_frame, user_site
from graphlint.runtime_sanitizer.guard.tensor_names import describe, frame_names
from graphlint.runtime_sanitizer.rules import (
    GRAPHED_GRAD_ALIAS,
    REPLAY_DIVERGES_FROM_EAGER,
    REPLAY_ON_UNCHANGED_INPUTS,
    SANITIZER_INACTIVE,
    SHARED_POOL_REPLAY_ORDER,
    STALE_MEMORY_REACHED_OUTPUT,
    STALE_OUTPUT_READ,
)


class StaleOutputRead(RuntimeError):
    """Raised in `mode="raise"` when a stale output handle is read (GL503)."""


def _stream_key(stream: Any) -> int:
    """A stream's identity across its Python wrappers (`current_stream()` makes a new one each call)."""
    return getattr(stream, "cuda_stream", id(stream))


class ReplayGuard:
    def __init__(
        self,
        mode: str = "warn",
        graph_dir: str | None = None,
        poison: bool = False,
        coverage: bool = False,
        compare_eager: bool = False,
    ) -> None:
        if mode not in ("warn", "raise"):
            raise ValueError("mode must be 'warn' or 'raise'")
        if poison and compare_eager:
            raise ValueError("poison and compare_eager cannot be combined: poison changes what the replays read")
        self.mode = mode
        self.graph_dir = graph_dir  # where to draw each analysed graph (SVG + HTML), if anywhere
        self.findings: list[Finding] = []
        self._graphs: dict[int, GraphState] = {}
        self._handles: dict[int, tuple[Any, int, int]] = {}  # id(tensor) -> (weakref, graph id, generation)
        self._saved: dict[str, Any] = {}
        self._outer: Any = None  # the HandleWatch dispatch mode while installed
        self._capturing: list[Any] = []
        self._internal = 0  # >0 while the sanitizer runs its own captures
        self._graphing = 0  # >0 inside make_graphed_callables
        self.graphs = GraphCounts()
        self._grad_alias = GradAliasTracker()
        self._backward_sites: list[tuple[str, int]] = []  # the user lines of the backward() calls running
        self._pools = PoolWatch()  # GL510: graphs sharing a memory pool
        self._collector = CollectorPause()  # no collection inside a capture
        self._accelerator = AcceleratorGraphWatch(self._accelerator_capture, lambda: self._captures_ended)
        self._captures_ended = 0  # captures this guard saw end (an accelerator graph it saw is not refused)
        # torch's lifecycle hooks where it has them (`lifecycle_hooks`), else its entry points patched
        self._hooks = LifecycleHooks(
            self._hooked_capture_start, self._hooked_capture_end, self._before_replay, self._after_replay
        )
        self.hooked = False  # this installation saw graphs through the hooks, not through patches
        self._managed = 0  # >0 while torch.cuda.graph enters or exits (its capture_begin/end are its own)
        # GL511: changes a buggy program's results on purpose
        self.poison = PoisonWatch(report=self._report_stale_memory) if poison else None
        self._stale: dict[int, list[str]] = {}  # graph id -> what its running replay reads poisoned
        # How much GPU work runs from graphs (the run's coverage report); watched from install to uninstall
        self.coverage = CoverageWatch() if coverage else None
        if self.poison is not None:
            self.graphs.poisoned_replays = 0
            self.graphs.stale_integers = self.poison.stale_integers
        # GL512: runs each captured block again beside its replays, undoing what it writes
        self.compare = EagerCompare(self._report_divergence, self._refuse_comparison) if compare_eager else None
        if self.compare is not None:
            self.graphs.compared_replays = 0

    # -- install / uninstall -------------------------------------------------------------
    def install(self) -> ReplayGuard:
        import torch

        self.hooked = self._hooks.install(torch)
        if not self.hooked:
            self._patch_entry_points(torch)
        self._pools.install(torch)
        self._accelerator.install(torch)
        self._wrap_graphed(torch)
        self._wrap_backward(torch)
        if self.poison is not None:
            self.poison.install(torch)
        if self.compare is not None:
            self.compare.install(torch)
        self._outer = HandleWatch(self)
        self._outer.__enter__()
        INSTALLED.append(self)
        if self.coverage is not None:
            self.coverage.install(torch)
        return self

    def _patch_entry_points(self, torch: Any) -> None:
        """Where torch has no lifecycle hooks: `torch.cuda.graph`, `CUDAGraph.replay` and the raw
        `capture_begin`/`capture_end` wrapped. Each wrapper takes and forwards whatever the
        original takes (torch adds keywords release by release), and `functools.wraps` keeps its
        signature visible to callers that inspect it."""
        guard = self
        graph_cls = torch.cuda.graph
        original_enter, original_exit = graph_cls.__enter__, graph_cls.__exit__
        original_replay = torch.cuda.CUDAGraph.replay
        self._saved.update(enter=original_enter, exit=original_exit, replay=original_replay)

        @functools.wraps(original_enter)
        def enter(ctx, *args, **kwargs):
            with guard._managing():
                result = original_enter(ctx, *args, **kwargs)
            guard._begin_capture(ctx)
            return result

        @functools.wraps(original_exit)
        def exit_(ctx, *exc, **kwargs):
            guard._end_capture(ctx, failed=bool(exc) and exc[0] is not None)
            with guard._managing():
                return original_exit(ctx, *exc, **kwargs)

        @functools.wraps(original_replay)
        def replay(graph, *args, **kwargs):
            guard._before_replay(graph)
            result = original_replay(graph, *args, **kwargs)
            guard._after_replay(graph)
            return result

        # Patching torch is the guard's job; uninstall() puts every original back.
        graph_cls.__enter__, graph_cls.__exit__ = enter, exit_  # type: ignore[method-assign]
        torch.cuda.CUDAGraph.replay = replay  # type: ignore[method-assign,assignment]
        self._wrap_raw_capture(torch)

    def uninstall(self) -> None:
        import torch

        if self.coverage is not None and self._saved:
            self.graphs.coverage = self.coverage.finish(torch)
        if self in INSTALLED:
            INSTALLED.remove(self)
        self._abandon_captures()  # before the handle watch: modes are left innermost first
        if self._outer is not None:
            self._outer.__exit__(None, None, None)
            self._outer = None
        if self._saved:
            self._hooks.uninstall()
            self._restore_entry_points(torch)
            torch.cuda.make_graphed_callables, torch.cuda.graphs.make_graphed_callables = self._saved["graphed"]
            self._pools.uninstall()
            self._collector.release()
            self._accelerator.uninstall()
            if self.poison is not None:
                self.poison.uninstall(torch)
            if self.compare is not None:
                self.compare.uninstall(torch)
            torch.Tensor.backward, torch.autograd.backward, torch.autograd.grad = self._saved["backward"]  # type: ignore[method-assign]
            self._saved = {}

    def _restore_entry_points(self, torch: Any) -> None:
        if "enter" not in self._saved:
            return  # hooked: nothing was patched
        torch.cuda.graph.__enter__ = self._saved["enter"]  # type: ignore[method-assign]
        torch.cuda.graph.__exit__ = self._saved["exit"]  # type: ignore[method-assign]
        torch.cuda.CUDAGraph.replay = self._saved["replay"]  # type: ignore[method-assign]
        torch.cuda.CUDAGraph.capture_begin, torch.cuda.CUDAGraph.capture_end = self._saved["raw"]  # type: ignore[method-assign]

    def _hooked_capture_start(self, graph: Any) -> None:
        """torch's capture-start hook: the capture is live on the current stream. A capture still
        open on that stream never ended (its block raised before capture_end): closed unread."""
        import torch

        stream = torch.cuda.current_stream()
        self._abandon_captures(stream)  # a stream captures one graph at a time
        self._collector.begin_on(_stream_key(stream))  # live already: no later collection falls in it
        self._begin_capture(_RawCapture(graph, stream, hooked=True))

    def _hooked_capture_end(self, graph: Any) -> None:
        """torch's capture-end hook: the capture ended and its graph is still alive."""
        import torch

        if self._capturing and getattr(self._capturing[-1][0], "cuda_graph", None) is graph:
            self._end_capture(self._capturing[-1][0])
        self._collector.end_on(_stream_key(torch.cuda.current_stream()))

    def _wrap_graphed(self, torch: Any) -> None:
        """`make_graphed_callables`: analysed as a whole, and the grads it may alias watched (GL509)."""
        guard = self
        self._saved["graphed"] = (torch.cuda.make_graphed_callables, torch.cuda.graphs.make_graphed_callables)
        original_graphed = torch.cuda.graphs.make_graphed_callables

        @functools.wraps(original_graphed)
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

    @contextlib.contextmanager
    def _managing(self) -> Iterator[None]:
        """torch.cuda.graph entering or exiting: the capture_begin/end it calls are its own."""
        self._managed += 1
        try:
            yield
        finally:
            self._managed -= 1

    def _wrap_raw_capture(self, torch: Any) -> None:
        """`g.capture_begin()` ... `g.capture_end()` called by the program itself (PyTorch's own
        tests do): watched like a `torch.cuda.graph` block, whose own calls are left alone."""
        guard = self
        original_begin, original_end = torch.cuda.CUDAGraph.capture_begin, torch.cuda.CUDAGraph.capture_end
        self._saved["raw"] = (original_begin, original_end)

        @functools.wraps(original_begin)
        def capture_begin(graph, *args, **kwargs):
            guard._collector.begin()  # `torch.cuda.graph`'s own begin too (`collector_pause`)
            try:
                result = original_begin(graph, *args, **kwargs)
            except BaseException:
                guard._collector.end()
                raise
            if not guard._managed:
                guard._begin_capture(_RawCapture(graph, torch.cuda.current_stream()))
            return result

        @functools.wraps(original_end)
        def capture_end(graph, *args, **kwargs):
            if (
                not guard._managed
                and guard._capturing
                and getattr(guard._capturing[-1][0], "cuda_graph", None) is graph
            ):
                guard._end_capture(guard._capturing[-1][0])
            try:
                return original_end(graph, *args, **kwargs)
            finally:
                guard._collector.end()

        torch.cuda.CUDAGraph.capture_begin = capture_begin  # type: ignore[method-assign]
        torch.cuda.CUDAGraph.capture_end = capture_end  # type: ignore[method-assign]

    def _wrap_backward(self, torch: Any) -> None:
        """Record the user line of each backward()/grad() call while it runs: the graphed
        backward replays on autograd's engine thread, where no user frame is on the stack."""
        self._saved["backward"] = (torch.Tensor.backward, torch.autograd.backward, torch.autograd.grad)
        sites = self._backward_sites

        def recording(original):
            @functools.wraps(original)
            def wrapper(*args, **kwargs):
                sites.append(innermost_user_frame() or (sites[-1] if sites else UNKNOWN_SITE))
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
        with self._guard_work():  # its own captures are not the program's
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
                self.findings.extend(located(f, site) for f in report.findings)

    def _accelerator_capture(self) -> None:
        """A `torch.accelerator.Graph` capture ended: seen, and refused (`accelerator_graphs`)."""
        if self._internal:
            return
        site = user_site()
        self.graphs.seen += 1
        self._refuse(f"torch.accelerator.Graph captured at {site[0]}:{site[1]}", ACCELERATOR_REASON, site)

    def _refuse(self, graph: str, reason: str, site: tuple[str, int]) -> None:
        """A graph seen but not analysed: counted, and a GL500 finding so no report reads as clean."""
        self.graphs.refused.append((graph, reason))
        self.findings.append(refused_finding(graph, reason, site))

    # -- capture -------------------------------------------------------------------------
    def _begin_capture(self, ctx: Any) -> None:
        if self._internal:
            return
        recorder = CaptureRecorder()
        recorder.__enter__()
        ordering = None
        if not self._graphing:
            ordering = CaptureOrdering()
            ordering.start()
        site = user_site()
        self._capturing.append((ctx, recorder, ordering, site))
        graph = getattr(ctx, "cuda_graph", None)
        if self.compare is not None and graph is not None:
            label = f"graph captured at {site[0]}:{site[1]}"
            if self._graphing:
                self.compare.capture_refused(graph, label, site, "graphs made by make_graphed_callables")
            else:
                self.compare.capture_begun(graph, label, site, user_frame())

    def _end_capture(self, ctx: Any, failed: bool = False) -> None:
        """As the capture ends (just before, patched; just after, through torch's hook): what the
        graph reads and writes (GL503, GL506), and for a plain capture the ordering of its nodes
        (GL504), read from the graph being captured or just captured."""
        if self._internal or not self._capturing:
            return
        recorder, ordering, site = self._close_capture(ctx, failed)
        graph = getattr(ctx, "cuda_graph", None)
        if graph is None or failed:
            return
        self._captures_ended += 1
        made_ranges = recorder.made_ranges
        label = f"graph captured at {site[0]}:{site[1]}"
        inputs = static_inputs(recorder, made_ranges)
        state = GraphState(label, inputs, made_ranges, site=site)
        # A graph that writes what it reads (parameters updated in place by a captured optimizer
        # step, a KV cache a compiled decode step appends to), or draws random numbers (each
        # replay advances the generator), computes something new on every replay, whatever the
        # version counters say.
        live = [ref() for ref, _ in inputs]
        written = recorder.written | written_storages(live, ordering.triton_writes() if ordering else [])
        state.new_each_replay = bool(written & {storage_address(t) for t in live}) or recorder.draws_random
        # The tensors it made: those the program still holds after the capture are its static
        # outputs (the recorder holds them weakly: the temporaries are gone already).
        made = {id(t): t for t in recorder.made}
        state.outputs = [(weakref.ref(t), KeptWatch()) for t in made.values()]
        self._track(graph, state)
        self._pools.captured(graph, label, outside(recorder.read_ranges, made_ranges), made_ranges)
        if self.poison is not None:
            with self._poisoning("a capture", site):
                names = frame_names(user_frame())
                self.poison.captured(id(graph), live, list(made.values()), written, names)
        if ordering is not None:
            self.graphs.seen += 1
            self._check_ordering(ctx, ordering, label, site)

    def _close_capture(self, ctx: Any, failed: bool) -> tuple[CaptureRecorder, CaptureOrdering | None, Any]:
        """The innermost capture's recording modes left (innermost first), and what they recorded."""
        graph = getattr(ctx, "cuda_graph", None)
        if self.compare is not None and graph is not None:
            self.compare.capture_ended(graph, failed)  # its operator trace: the innermost mode
        _, recorder, ordering, site = self._capturing.pop()
        if ordering is not None:
            ordering.stop()  # entered after the recorder: left first
        recorder.__exit__(None, None, None)
        return recorder, ordering, site

    def _abandon_captures(self, stream: Any = None) -> None:
        """Captures whose end never came (the block raised before capture_end, so torch's end
        hook never fired), on ``stream`` or on any: closed unread, their modes left."""
        while self._capturing and (stream is None or getattr(self._capturing[-1][0], "capture_stream", None) == stream):
            self._close_capture(self._capturing[-1][0], failed=True)

    def _track(self, graph: Any, state: GraphState) -> None:
        """Know the graph until it dies: its state (and any input copies GL506 took) goes with it,
        and a later graph given the same id starts afresh instead of inheriting its replays."""
        key = id(graph)
        self._graphs[key] = state
        with contextlib.suppress(TypeError):  # a graph type without weak references: kept
            weakref.finalize(graph, self._forget, key, state)

    def _forget(self, key: int, state: GraphState) -> None:
        if self._graphs.get(key) is state:
            del self._graphs[key]

    def _check_ordering(self, ctx: Any, ordering: CaptureOrdering, label: str, site: tuple[str, int]) -> None:
        import torch

        stream = getattr(ctx, "capture_stream", None) or torch.cuda.current_stream()
        try:
            if getattr(ctx, "hooked", False):  # the capture has ended: its graph, not the stream's
                snapshot = ordering.finish_captured(ctx.cuda_graph.raw_cuda_graph)
            else:
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
        self._check_pool_order(graph, state)
        if state.params:
            self._check_grad_alias(id(graph), state)
        if state.outputs:
            self._check_kept(state)
        live = [(ref(), version) for ref, version in state.inputs]
        live = [(t, v) for t, v in live if t is not None]
        if live and not state.unchanged_reported and not state.new_each_replay:
            self._check_unchanged(state, live)
        state.inputs = [(weakref.ref(t), t._version) for t, _ in live]
        if self.poison is not None:
            with self._guard_work(), self._poisoning("a replay", state.site):
                self._stale[id(graph)] = self.poison.before_replay(id(graph))
        if self.compare is not None:
            with self._guard_work(), sanitizer_internal():
                self.compare.before_replay(graph)

    def _after_replay(self, graph: Any) -> None:
        """GL512: compare the replay with the eager run. GL511: behind the replay, mark its
        outputs if it read poison and poison its refilled inputs."""
        state = self._graphs.get(id(graph))
        if state is None:
            return
        if self.compare is not None:
            with self._guard_work(), sanitizer_internal():
                self.compare.after_replay(graph, state.replays)
            self.graphs.compared_replays = self.compare.compared_replays
        if self.poison is None:
            return
        poison = self.poison
        with self._guard_work(), self._poisoning("a replay", state.site):
            poison.after_replay(id(graph), state.label, state.replays, user_site(), self._stale.pop(id(graph), []))
        self.graphs.poisoned_replays = poison.poisoned_replays

    @contextlib.contextmanager
    def _poisoning(self, during: str, site: tuple[str, int] | None = None) -> Iterator[None]:
        """--poison must never break the program: on any error it gives every poisoned input its
        values back, stops, and says so (GL500), and the run goes on sanitized as without it."""
        try:
            yield
        except Exception as error:
            poison, self.poison = self.poison, None
            if poison is not None:
                with contextlib.suppress(Exception):
                    poison.give_back()
                poison.uninstall(sys.modules["torch"])
            reason = f"stopped during {during}: {type(error).__name__}: {error}"
            self.graphs.refused.append(("--poison", reason))
            message = f"--poison {reason}; every poisoned input got its values back and the run went on without it"
            self.findings.append(rule_finding(SANITIZER_INACTIVE, message, site or user_site()))

    @contextlib.contextmanager
    def _guard_work(self) -> Iterator[None]:
        """The guard's own tensor work (copies, comparisons, poison) with its dispatch mode out of
        the way: none of it is a read or a write of the program's, nor its GPU work (coverage)."""
        self._outer.__exit__(None, None, None)
        try:
            with self._own_kernels():
                yield
        finally:
            self._outer.__enter__()

    def _own_kernels(self) -> contextlib.AbstractContextManager[None]:
        """Kernels launched here are the sanitizer's: the coverage report leaves them out."""
        return self.coverage.own_work() if self.coverage is not None else contextlib.nullcontext()

    def _check_pool_order(self, graph: Any, state: GraphState) -> None:
        """GL510: this replay breaks the capture order of graphs sharing its pool, or runs at
        once with one of them on another stream."""
        import torch

        for violation in self._pools.replayed(graph, lambda: torch.cuda.current_stream().cuda_stream):
            self._report(SHARED_POOL_REPLAY_ORDER, violation_message(violation, state.replays), state)

    def _check_unchanged(self, state: GraphState, live: list[tuple[Any, int]]) -> None:
        """GL506 when the inputs' version counters stood still since the last replay and their
        contents did too. Version counters miss writes that bypass autograd's bookkeeping (a
        buffer refilled through another tensor on the same storage, data written by an
        extension), so the first standstill only takes a copy of the inputs and the next one
        compares: a finding needs both."""
        if state.replays < 2 or any(t._version != v for t, v in live):
            state.baseline = None
            return
        with self._guard_work():
            if state.baseline is None:
                state.baseline = content_baseline([t for t, _ in live])
                return
            same = all(torch_equal(copy, tensor) for tensor, copy in state.baseline)
        state.baseline = None
        state.unchanged_reported = True  # written behind the counters, or reported: judged once either way
        if same:
            self._report(
                REPLAY_ON_UNCHANGED_INPUTS,
                f"replay {state.replays} of the {state.label} runs on static inputs that were not written since "
                f"replay {state.replays - 2} (same version counters, same contents): it recomputes the same result",
                state,
            )

    def _check_kept(self, state: GraphState) -> None:
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
                output = describe(tensor, {})
                self._report(
                    STALE_OUTPUT_READ,
                    kept_output_message(state.label, output, container, count, state.replays),
                    state,
                )

    # -- graphed gradients (GL509) -------------------------------------------------------
    def _watch_grads(self, callables: Any, graph_ids: list[int]) -> None:
        """The graphs make_graphed_callables just captured, and the parameters whose `.grad` may
        come to alias their static gradient buffers."""
        params = [(name, weakref.ref(p)) for name, p in named_parameters(callables)]
        for graph_id in graph_ids:
            state = self._graphs[graph_id]
            state.label = f"graph made by make_graphed_callables at {state.site[0]}:{state.site[1]}"
        # It captures every forward graph, then every backward graph: the hazard is a backward
        # replay's. A forward graph shares the pool, so its dead temporaries' blocks may hold the
        # gradient buffers too; watched as well, it would report the same alias twice.
        half = len(graph_ids) // 2
        backward = graph_ids[half:] if len(graph_ids) % 2 == 0 else graph_ids
        for graph_id in backward:
            self._graphs[graph_id].params = params

    def _check_grad_alias(self, graph_id: int, state: GraphState) -> None:
        params = [(name, ref()) for name, ref in state.params]
        params = [(name, p) for name, p in params if p is not None]
        records = [GradRecord(name, storage_address(p.grad)) for name, p in params]
        names = self._grad_alias.judge(graph_id, records, state.output_ranges)
        if names:
            state.grad_aliased.update(names)
            self._report(GRAPHED_GRAD_ALIAS, grad_alias_message(names, state.label, state.replays), state)
        for name, p in params:  # their stale reads, at this replay and every later one, are GL509: not GL503
            if name in state.grad_aliased and p.grad is not None:
                self._handles.pop(id(p.grad), None)

    # -- poison (GL511), for each eager operator ----------------------------------------
    def _before_op(self, func: Any, tensors: list[Any]) -> None:
        if self.poison is not None and not self._capturing and not self._internal:
            with self._poisoning("an eager operator"), self._own_kernels():
                self.poison.before_op(func, tensors)

    def _after_op(self, func: Any, tensors: list[Any], results: list[Any]) -> None:
        if self.poison is not None and not self._capturing and not self._internal:
            with self._poisoning("an eager operator"), self._own_kernels():
                self.poison.after_op(func, tensors, results)

    def _report_stale_memory(self, message: str) -> None:
        self._report(STALE_MEMORY_REACHED_OUTPUT, message)

    def _refuse_comparison(self, label: str, reason: str, site: tuple[str, int]) -> None:
        """GL500: a graph --compare-eager does not compare (its other checks still ran)."""
        self.graphs.refused.append((f"--compare-eager: {label}", reason))
        message = f"--compare-eager did not compare the {label} with an eager run: {reason}"
        self.findings.append(rule_finding(SANITIZER_INACTIVE, message, site))

    def _report_divergence(self, message: str, site: tuple[str, int]) -> None:
        """GL512 at the line of the first operator that differs (what to fix), not the replay's."""
        self.findings.append(rule_finding(REPLAY_DIVERGES_FROM_EAGER, message, site))

    # -- handles -------------------------------------------------------------------------
    def _note_new(self, tensor: Any) -> None:
        if self._capturing:
            return
        try:
            ptr = tensor.untyped_storage().data_ptr()
        except Exception:
            return
        for graph_id, state in self._graphs.items():
            if state.replays and in_ranges(ptr, state.output_ranges):
                key = id(tensor)

                def forget(_: object, k: int = key) -> None:
                    self._handles.pop(k, None)

                self._handles[key] = (
                    weakref.ref(tensor, forget),
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

    def _report(self, rule: Any, message: str, state: GraphState | None = None) -> None:
        """A finding at the user's line (on the engine thread: the backward() call; with no user
        frame at all: the line that captured the graph)."""
        where = user_site()
        if where == UNKNOWN_SITE and state is not None:
            where = state.site
        finding = rule_finding(rule, message, where)
        self.findings.append(finding)
        if self.mode == "raise" and rule.code == "GL503":
            raise StaleOutputRead(message)


class _RawCapture:
    """What `_begin_capture` reads of a `torch.cuda.graph` block, for a raw capture_begin or a
    capture seen through torch's hooks (``hooked``: read after it ended, not from its stream)."""

    def __init__(self, graph: Any, stream: Any, hooked: bool = False) -> None:
        self.cuda_graph = graph
        self.capture_stream = stream
        self.hooked = hooked
