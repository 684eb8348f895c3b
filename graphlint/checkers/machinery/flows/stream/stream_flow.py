"""The stream flow: which stream uses which tensor, and what orders them, in statement order.

The caching allocator keeps one pool per stream, so a tensor released on one stream while
another still uses it is handed to the next allocation: a race that shows up as NaNs or
wrong losses days later. This flow, a state on the flow skeleton, follows each function
that uses streams (loops run twice: rebinding `x = layer(x)` at the top of iteration k+1
releases the `x` a side stream used in iteration k) with a model of the current stream
(`with torch.cuda.stream(s)`, StreamContext, `get_accelerator().stream(s)`) and of the
ordering operations: `a.wait_stream(b)`, `a.wait_event(e)`, `e.record()`/`e.record(s)`/
`s.record_event()`, `e.wait()`, `e.synchronize()`, `s.synchronize()`,
`torch.cuda.synchronize()` and `x.record_stream(s)`. It raises typed events for the rules:
`ReleasedInUse`, `HandedWithoutRecord`, `CrossStreamUse`, `UnsyncedHostRead`.
"""

from __future__ import annotations

import ast
import bisect
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, ClassVar, TypeVar

from graphlint.checkers.machinery.core import kinds as T
from graphlint.checkers.machinery.core import tensor_values as V
from graphlint.checkers.machinery.core.flow import FlowState, walk
from graphlint.checkers.machinery.core.names import source_text
from graphlint.checkers.machinery.core.syntax import TRY_NODES, evaluation_order
from graphlint.checkers.machinery.flows.stream import stream_effects as E
from graphlint.checkers.machinery.flows.stream.attribute_escapes import SideAttributeReturned, returned_side_attributes
from graphlint.checkers.machinery.flows.stream.data_replacement import data_replaced
from graphlint.checkers.machinery.flows.stream.list_elements import (
    element_index,
    element_name,
    elements_of,
    indexes_back,
    is_list_value,
)
from graphlint.checkers.machinery.flows.stream.side_storage import SideStorageFreed, side_storage_frees
from graphlint.checkers.machinery.flows.stream.stream_bindings import StreamBindings, tensors_by_use
from graphlint.checkers.machinery.flows.stream.stream_calls import StreamCalls, is_host_copy
from graphlint.checkers.machinery.flows.stream.stream_certainty import (
    ORDERING_METHODS,
    FunctionOrderings,
    between,
    calls_any,
    hands_a_stream,
    is_current_join,
    is_fork,
    may_return_itself,
    may_run_both,
    never_both,
    on_every_path_after,
    orderings_before,
    orders_by_forks_only,
    waits_in_class,
)
from graphlint.checkers.machinery.flows.stream.stream_identity import (
    MAIN,
    UNKNOWN,
    StreamNames,
    counter_test,
    int_value,
    names_current_stream,
    names_default_stream,
)
from graphlint.checkers.machinery.flows.stream.stream_neighbours import (
    BlockNeighbours,
    bare_call,
    enters_later,
    joins_anywhere,
    some_element,
)
from graphlint.checkers.machinery.flows.stream.stream_releases import Deferred, DeferredReleases, LoopPass
from graphlint.checkers.machinery.flows.stream.tensor_state import (
    Binding,
    Storage,
    TensorState,
    Use,
    closure,
    escape,
    written,
)

if TYPE_CHECKING:
    from graphlint.checkers.machinery.core.module_state import Binder, ModuleState

_T = TypeVar("_T")


@dataclass(frozen=True)
class ReleasedInUse:
    """``name`` is released (``node``; its last side-stream use at ``use``) while unordered."""

    kind: ClassVar[str] = "release"
    node: ast.AST
    name: str
    use_node: ast.AST
    use_statement: ast.stmt
    use_stream: str
    alloc_stream: str
    scope_end: bool
    function: str
    certain: bool = False  # the function shows no ordering the flow may have missed (stream_certainty)


@dataclass(frozen=True)
class HandedWithoutRecord:
    """`inp = self.next_input` (made on ``side`` by another method) used on the current stream."""

    kind: ClassVar[str] = "release"
    node: ast.stmt
    name: str
    side: str
    certain: bool = False  # no method of the class makes ``side`` wait before it allocates again


@dataclass(frozen=True)
class DataSwappedInUse:
    """`t.data = new` (``node``) in a block on ``stream`` that read `t` (``read``) first."""

    kind: ClassVar[str] = "release"
    node: ast.stmt
    name: str
    read: ast.AST
    stream: str
    certain: bool  # the block's stream was forked from the current one: `t` is its memory


@dataclass(frozen=True)
class CrossStreamUse:
    kind: ClassVar[str] = "cross"
    node: ast.AST
    name: str
    producer: str
    stream: str
    certain: bool = False  # the function shows no ordering the flow may have missed (stream_certainty)


@dataclass(frozen=True)
class UnsyncedHostRead:
    kind: ClassVar[str] = "host-read"
    node: ast.AST
    name: str
    copy: ast.AST


@dataclass(frozen=True)
class DefaultStreamWait:
    """``side.wait_stream(default_stream())`` (a fork) or ``default_stream().wait_stream(side)``
    (a join) where the function's own work is on the current stream: the wait orders the
    wrong stream whenever the two differ (autograd's backward, a caller's stream context)."""

    kind: ClassVar[str] = "default-wait"
    node: ast.Call
    default: ast.Call  # the `default_stream()` call
    side: str
    join: bool


@dataclass(frozen=True)
class SelfWait:
    """``s.wait_stream(torch.cuda.current_stream())`` inside ``with torch.cuda.stream(s):``:
    the current stream there is ``s``, so it waits for itself and orders nothing."""

    kind: ClassVar[str] = "self-wait"
    node: ast.Call
    stream: str


@dataclass(frozen=True)
class UnorderedNewStream:
    """``with torch.cuda.stream(torch.cuda.Stream()):``: a stream made in the `with` itself has
    no name, so nothing waits for it and it waits for nothing; with no device-wide sync in the
    function and no ordering in the block, its work races what runs before and after it."""

    kind: ClassVar[str] = "new-stream"
    node: ast.Call  # the `torch.cuda.Stream()` call


@dataclass(frozen=True)
class WrongStreamWait:
    """A fork right before a block on ``block`` (or a join right after one) that names
    ``named``, another side stream, and leaves ``block`` unordered with the current stream."""

    kind: ClassVar[str] = "wrong-wait"
    node: ast.Call
    named: str
    block: str
    join: bool


EVENTS = (
    SideAttributeReturned,
    ReleasedInUse,
    HandedWithoutRecord,
    DataSwappedInUse,
    SideStorageFreed,
    CrossStreamUse,
    UnsyncedHostRead,
    DefaultStreamWait,
    SelfWait,
    UnorderedNewStream,
    WrongStreamWait,
)


def show_stream(stream: str) -> str:
    """A stream as messages name it."""
    return "the current stream" if stream == MAIN else stream


_IN_PLACE_SUFFIX = "_"


@dataclass
class Alternatives:
    """What the branches of one statement start from, and what each left (``fork``..``join``)."""

    state: dict  # the forked attributes before the first branch
    names: tuple  # the stream names before it
    deferred: set[int]  # releases deferred before it
    bounds: list[int]  # the clock at the start of each branch, then at the join
    ends: list[dict] = field(default_factory=list)  # each finished branch's forked attributes
    name_ends: list[tuple] = field(default_factory=list)  # and its stream names


class StreamFlow(FlowState):
    """The stream flow over one function (a flow-skeleton state); ``quiet``: summarising the
    function for its callers (its ``calls``, `stream_calls`), facts and no findings. Its parts:
    ``bindings`` (`stream_bindings`) say what a binding holds and frees, ``releases``
    (`stream_releases`) judge a release when its memory can be reused."""

    def __init__(self, walker: Binder, quiet: bool = False) -> None:
        self.w = walker
        self.quiet = quiet
        self.position = 0
        self.current = [MAIN]
        # Per stream entered (as `self.current` grows): its `with` and the stream argument, if a call's.
        self.blocks: list[tuple[ast.With | ast.AsyncWith, ast.expr | None]] = []
        self.tensors = TensorState()  # name -> what device memory it holds (tensor_state)
        self.plain: set[str] = set()  # names bound to Python values built here (strings)
        # Names bound to values not tracked as tensors -> (stream, position) of that binding.
        self.untracked: dict[str, tuple[str, int]] = {param: (MAIN, 0) for param in walker.summary.params}
        self.dead = False  # after `return`/`raise`: this path is over
        self.off_device = False  # in a branch for a device other than CUDA
        self.waits: list[tuple[str, str, int, int]] = []  # (waiter, waited-for, cutoff, at)
        self.last_work: dict[str, int] = {}  # stream -> position of the last work queued on it
        self.wait_exclusions: dict[tuple[str, str, int, int], tuple[tuple[int, int], ...]] = {}  # join
        self.host_syncs: list[tuple[str | None, int, int]] = []  # (stream or None=all, cutoff, at)
        self.events: dict[str, tuple[str, int]] = {}  # event -> (stream, cutoff)
        self.recorded: set[tuple[str, str]] = set()  # (tensor, stream) from record_stream
        self.pending_host: dict[str, tuple[ast.AST, int, str]] = {}  # host buffer -> (copy, position, stream)
        self.reported: set[tuple[str, int, int]] = set()
        # (name, producer, produced at, consumer) reported -> whether certain (a sibling may be)
        self.crossed: dict[tuple[str, str, int, str], bool] = {}
        self.statement: ast.stmt | None = None
        self.ticked: dict[int, ast.stmt] = {}  # clock -> the statement it ticked in (certainty)
        self.lists: set[str] = set()  # names bound to fresh lists, whose elements are names too
        self.contradicting: dict[tuple[int, int], bool] = {}  # (statement, statement) -> never_both
        self.block_views: dict[str, int] = {}  # name -> the stream block (id) that bound it as a view
        self.handed: list[tuple[str, str, ast.stmt]] = []  # (name, side stream, binding statement)
        self.params = set(walker.summary.params) | {"self", "cls"}
        self.names = StreamNames(walker)
        self.waited_events = _waited_events(walker.body)
        self.host_floor: dict[str, int] = {}  # host buffer -> syncs up to here ran on another path only
        self.passes: dict[int, int] = {}  # loop statement -> passes begun (counter values)
        self.neighbours = BlockNeighbours()
        self.entered: set[str] = set()  # streams whose blocks this walk has entered
        self.unpacked: dict[str, frozenset[str]] = {}  # name -> names some `a, b = ...` bound with it
        self.orderings = FunctionOrderings(walker)  # what the function writes of orderings (certainty)
        self.releases = DeferredReleases(self)
        self.calls = StreamCalls(self, summarise)
        self.bindings = StreamBindings(self)

    # -- ordering model --------------------------------------------------------------------
    def tick(self) -> int:
        self.position += 1
        if self.statement is not None:
            self.ticked[self.position] = self.statement
        return self.position

    def stream_of(self, node: ast.AST | None) -> str:
        """The stream an expression denotes (`stream_identity`); no expression: the current one."""
        if node is None:
            return self.current[-1]
        return self.names.denote(node, self.current[-1])

    def ordered(self, producer: str, cutoff: int, consumer: str, now: int, use: ast.stmt | None = None) -> bool:
        """Is work submitted to ``producer`` before ``cutoff`` ordered before ``consumer`` at ``now``?
        ``use``: the statement of a use, for which a wait whose branch tests contradict the
        use's (stream_certainty.never_both) does not count: no path runs both."""
        if producer == consumer:
            return True
        for stream, sync_cutoff, at in self.host_syncs:
            if at <= now and (stream is None or stream == producer) and sync_cutoff >= cutoff:
                return True
        frontier = {producer: cutoff}
        changed = True
        while changed:  # transitive: a waits for b waits for c
            changed = False
            for wait in self.waits:
                waiter, waited, wait_cutoff, at = wait
                if at > now or waited not in frontier or wait_cutoff < frontier[waited]:
                    continue
                if any(low < frontier[waited] <= high for low, high in self.wait_exclusions.get(wait, ())):
                    continue  # made in a sibling arm of the wait's: no path runs both
                if use is not None and self._never_with(at, use):
                    continue  # `if mode == 2: cur.wait_stream(s)`, the use under `if mode == 3:`
                if waiter == consumer:
                    return True
                if frontier.get(waiter, -1) < at:
                    frontier[waiter] = at
                    changed = True
        return False

    def _never_with(self, at: int, use: ast.stmt) -> bool:
        """Do the tests around the statement that ticked ``at`` and around ``use`` contradict?"""
        other = self.ticked.get(at)
        if other is None or other is use:
            return False
        key = (id(other), id(use))
        found = self.contradicting.get(key)
        if found is None:
            found = self.contradicting[key] = never_both(self.w.body, other, use, self.orderings.rebound)
        return found

    def emit(self, event: object) -> None:
        if self.dead:
            return
        if self.quiet:  # summarising: a parameter read on the host before a sync is an effect
            if isinstance(event, UnsyncedHostRead) and event.copy is self.w.node:
                self.calls.host_reads.add(event.name)
            return
        node = event.node  # type: ignore[attr-defined]
        key = (event.kind, node.lineno, node.col_offset)  # type: ignore[attr-defined]
        if key not in self.reported:
            self.reported.add(key)
            self.w.emit(event)

    # -- the walk ------------------------------------------------------------------------
    def finish(self) -> None:
        """At the end of the function: hand-offs never recorded, locals released by scope end."""
        ended, self.dead = self.dead, False
        for name, side, stmt in self.handed:
            if not any(tensor == name and stream != side for tensor, stream in self.recorded):
                # Certain: nothing here hands a stream to a helper (which may record it) and
                # the side stream never waits for the current one before it allocates again.
                certain = not self.orderings.hands_a_stream and not waits_in_class(self.w, side)
                self.emit(HandedWithoutRecord(stmt, name, side, certain))
        if not ended:  # else every path returned (or raised), and scope_end ran there
            self.scope_end()

    def scope_end(self) -> None:
        """The function returns: its locals are released, unless held elsewhere."""
        end = self.tick()
        if not self.w.is_module:  # module globals live on
            for storage in sorted(self.tensors.freed_at_scope_end(), key=lambda storage: storage.name):
                self.check_free(storage, storage.name, None, end)
        self.releases.settle(None, end)
        self.calls.note_exit(end)

    def before(self, stmt: ast.stmt) -> None:
        self.statement = stmt
        self.neighbours.before(stmt)

    def header(self, expr: ast.expr, stmt: ast.stmt) -> None:
        if self.dead:
            return
        self.expr(expr)
        if isinstance(stmt, (ast.With, ast.AsyncWith)):
            stream = self._stream_context(expr)
            if stream is not None:
                self._new_stream_block(expr, stmt)
                self._fork_of_another_stream(stream)
                self.entered.add(stream)
                self.calls.enter_stream(stream)
                self.current.append(stream)
                self.blocks.append((stmt, expr.args[0] if isinstance(expr, ast.Call) and expr.args else None))

    def exit_with(self, stmt: ast.With | ast.AsyncWith) -> None:
        while self.blocks and self.blocks[-1][0] is stmt:
            self.blocks.pop()
            self.neighbours.exited(self.current.pop(), self.tick())

    def loop_target(self, stmt: ast.For | ast.AsyncFor) -> None:
        if self.dead:
            return
        counted = self._counter_pass(stmt)
        if isinstance(stmt.target, ast.Name):
            now = self.tick()
            self.bindings.rebind(stmt.target.id, self.bindings.loop_binding(stmt.target, stmt.iter, now), stmt, now)
            self.rebound(stmt.target.id, None)
        else:
            self.bind(stmt.target, None, stmt)
        self.names.bind_element(stmt.target, stmt.iter)
        if counted is not None and isinstance(stmt.target, ast.Name):
            self.names.counters[stmt.target.id] = counted

    def pass_count(self, stmt: ast.For | ast.AsyncFor | ast.While) -> int:
        """A counted loop that reads back by its counter (`outs[i - 1]`) runs a third pass: the
        element the second pass writes is read one iteration later (list_elements)."""
        if isinstance(stmt, (ast.For, ast.AsyncFor)) and indexes_back(stmt):
            if _range_start(self.w, stmt.iter) is not None:
                return self.loop_passes + 1
        return self.loop_passes

    def _counter_pass(self, stmt: ast.For | ast.AsyncFor) -> int | None:
        """`for i in range(...)` with a constant start: the value of `i` on this pass (the
        flow's two passes are iterations 0 and 1 of the range: both run when it has two)."""
        done = self.passes.get(id(stmt), 0)
        self.passes[id(stmt)] = done + 1
        start = _range_start(self.w, stmt.iter)
        return None if start is None else start + done

    # -- alternatives: each starts from the state before them; after, what either left --------
    _FORKED = (
        "tensors",
        "plain",
        "untracked",
        "dead",
        "off_device",
        "waits",
        "host_syncs",
        "events",
        "recorded",
        "pending_host",
        "host_floor",
    )

    def _snapshot(self) -> dict:
        return {
            name: value.copy() if hasattr(value, "copy") else value
            for name in self._FORKED
            for value in (getattr(self, name),)
        }

    def fork(self, stmt: ast.stmt) -> Alternatives:
        if isinstance(stmt, TRY_NODES):
            self.dead = False  # a handler runs after a raise anywhere in the body, even before its return
        return Alternatives(self._snapshot(), self.names.snapshot(), self.releases.deferred_before(), [self.position])

    def branch(self, stmt: ast.stmt, index: int, start: Alternatives) -> None:
        if index:  # each alternative starts from what held before them, not from its sibling
            self.releases.close_branch(start.deferred)
            start.ends.append({name: getattr(self, name) for name in self._FORKED})
            for name, value in start.state.items():
                setattr(self, name, value.copy() if hasattr(value, "copy") else value)
            start.name_ends.append(self.names.snapshot())
            self.names.restore(start.names)
            start.bounds.append(self.position)
        if isinstance(stmt, ast.If):
            decided = counter_test(stmt.test, self.names.counters)
            if decided is not None and decided != (index == 0):
                self.dead = True  # `if i > 0:` on the pass where `i` is 0: this path does not run
            narrowed = _none_in_branch(stmt.test, index)
            if narrowed is not None:
                # `if x is None:` x holds no tensor on this path, nor do the names a path that
                # bound `x` bound with it (`x, y = f()`): that path does not reach here.
                for name in {narrowed, *self.unpacked.get(narrowed, ())}:
                    self.tensors.pop(name, None)
            if self.w.non_cuda_branch(stmt.test, index):
                self.off_device = True  # `if x.device.type == "cpu":` runs no CUDA work
            if _cuda_guard(self.w, stmt.test) == (index == 1):
                self.pending_host = {}  # the branch where CUDA is not in use: no copy is in flight

    def join(self, stmt: ast.stmt, start: Alternatives) -> None:
        self.releases.close_branch(start.deferred)
        self.names.merge(start.name_ends)
        ends = [*start.ends, {name: getattr(self, name) for name in self._FORKED}]
        start.bounds.append(self.position)
        if isinstance(stmt, (ast.If, ast.Match)):
            self._exclude_siblings(start.state["waits"], ends, start.bounds)
        live = [end for end in ends if not end["dead"]] or ends[-1:]
        self.tensors = TensorState.join([end["tensors"] for end in live], [set(end["untracked"]) for end in live])
        self.untracked = {name: bound for end in live for name, bound in end["untracked"].items()}
        self.dead = all(end["dead"] for end in live)
        self.plain = set().union(*(end["plain"] for end in live))
        self.waits = _union_lists(end["waits"] for end in live)
        self.host_syncs = _union_lists(end["host_syncs"] for end in live)
        self.recorded = set().union(*(end["recorded"] for end in live))
        self.off_device = start.state["off_device"]
        self.events, self.pending_host, self.host_floor = {}, {}, {}
        for end in live:
            self.events.update(end["events"])
            self.pending_host.update(end["pending_host"])
            self.host_floor.update(end["host_floor"])
        now = self.tick()
        for name, (_, copied_at, stream) in self.pending_host.items():
            if any(name in end["pending_host"] and not _synced_in(end, name, stream, copied_at) for end in live):
                self.host_floor[name] = now  # a path reaches here unsynchronised: other paths' syncs do not count

    def _exclude_siblings(self, before: list[tuple], ends: list[dict], bounds: list[int]) -> None:
        """A wait made in one arm of an `if` or `match` orders nothing a sibling arm produced:
        no path runs both (`if fmt == "thd": k = reorder(k)` / `else: ...; s.wait_stream(cur)`
        leaves the reordered `k` unordered with `s`). The kept waits are the union of the
        arms' (flags may tie them to later code), so each remembers the ticks it cannot order."""
        old = set(before)
        for index, end in enumerate(ends):
            siblings = [(bounds[j], bounds[j + 1]) for j in range(len(ends)) if j != index]
            for wait in end["waits"]:
                if wait not in old:
                    self.wait_exclusions[wait] = (*self.wait_exclusions.get(wait, ()), *siblings)

    def enter_loop(self, stmt: ast.For | ast.AsyncFor | ast.While) -> None:
        self.passes[id(stmt)] = 0
        self.releases.loop_entered(stmt.body)

    def begin_block(self, body: list[ast.stmt]) -> None:
        self.releases.pass_began(body)

    def exit_loop(self, stmt: ast.For | ast.AsyncFor | ast.While) -> None:
        if isinstance(stmt, (ast.For, ast.AsyncFor)) and isinstance(stmt.target, ast.Name):
            self.names.counters.pop(stmt.target.id, None)  # the last value: not known
        self.releases.loop_left()
        self.dead = False  # the loop may run no pass at all

    def simple(self, stmt: ast.stmt) -> None:
        if self.dead:
            return  # unreachable: after a `return` or `raise` on this path
        if isinstance(stmt, ast.Delete):
            for target in stmt.targets:
                if isinstance(target, ast.Name):
                    self.release(target.id, stmt, self.tick())
        elif isinstance(stmt, ast.Assign):
            self.expr(stmt.value, stored=True)
            for target in stmt.targets:
                self.bind(target, stmt.value, stmt)
        elif isinstance(stmt, (ast.AnnAssign, ast.AugAssign)) and stmt.value is not None:
            self.expr(stmt.value, stored=isinstance(stmt, ast.AnnAssign))
            if isinstance(stmt, ast.AugAssign):
                self.use_target(stmt.target, write=True)
            else:
                self.bind(stmt.target, stmt.value, stmt)
        elif isinstance(stmt, ast.Return):
            if stmt.value is not None:
                self.expr(stmt.value, stored=True)
                self.bindings.escape(stmt.value)
                if self.quiet:
                    self.calls.note_return(stmt.value)
            self.scope_end()
            self.dead = True
        elif isinstance(stmt, ast.Expr):
            self.expr(stmt.value)
            if isinstance(stmt.value, (ast.Yield, ast.YieldFrom)):
                self.bindings.escape(stmt.value)
            elif isinstance(stmt.value, ast.Call):
                self._out_arguments(stmt.value)
        else:
            for child in ast.iter_child_nodes(stmt):
                if isinstance(child, ast.expr):
                    self.expr(child)
            if isinstance(stmt, ast.Raise):
                self.dead = True

    def _stream_context(self, context: ast.AST) -> str | None:
        if isinstance(context, ast.IfExp):
            context = _stream_or_null(self.w, context)
        if not isinstance(context, ast.Call) or (not context.args and not context.keywords):
            return None
        if not self.w.is_stream_context(context):
            return None
        argument = context.args[0] if context.args else T.keyword(context, "stream")
        if argument is None or (isinstance(argument, ast.Constant) and argument.value is None):
            return None
        return self.stream_of(argument)

    # -- bindings ------------------------------------------------------------------------
    @cached_property
    def _tensors_by_use(self) -> frozenset[str]:
        return tensors_by_use(self.w)

    def _opaque_call(self, value: ast.AST | None) -> bool:
        """A call of the project's (not torch's) whose result has no kind the binder knows."""
        if not isinstance(value, ast.Call) or self.w.ty(value) is not None:
            return False
        return not (self.w.resolve(value.func) or "").startswith("torch.")

    def bind(self, target: ast.AST, value: ast.AST | None, stmt: ast.stmt) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            self.bindings.unpack(target, value, stmt)
            return
        self.names.bind(target, value, self.current[-1])
        if isinstance(target, ast.Name):
            name = target.id
            now = self.tick()
            side = self._side_allocated_attribute(value)
            made = None
            if side is not None and self.current[-1] == MAIN:
                # `inp = self.next_input`, made on a side stream by another method: from here on
                # the current stream uses it, so the allocator must be told (record_stream).
                self.handed.append((name, side, stmt))
            else:
                made = self.calls.returned_binding(value, name) or self.bindings.made_by(value, name, now)
                if made is None and name in self._tensors_by_use and self._opaque_call(value):
                    made = self.bindings.external(name, now)  # `g = store.flat()`, all-reduced later
            self.bindings.rebind(name, made, stmt, now)
            self.rebound(name, value)
            self._listed(name, value)
            self._note_block_view(name, value, made)
            return
        # self.attr = x / container[k] = x: x now lives beyond this function.
        if value is not None:
            self.bindings.escape(value)
        self._data_swap(target, stmt)
        self.use_target(target, write=True)
        if isinstance(target, ast.Subscript):
            self.element_written(target, self.bindings.made_by(value, source_text(target), self.position), stmt)

    def _note_block_view(self, name: str, value: ast.AST | None, made: Binding | None) -> None:
        """`top = buf[:, :1]` in a stream block: a slice cut there, which a call may fill."""
        self.block_views.pop(name, None)
        if made is None or not self.blocks or not isinstance(value, ast.Subscript):
            return
        if isinstance(V.view_root(value, self.w.resolve), ast.Name):
            self.block_views[name] = id(self.blocks[-1][0])

    def _out_arguments(self, call: ast.Call) -> None:
        """`exchange(x[:1], x[-1:], top, bottom)` in a side stream's block, its result unused,
        handed views the block cut for it (`top = buf[:, :1]`): a call made for its effect,
        given slices of a buffer, fills them; they are written on the block's stream."""
        if not self.blocks or self.current[-1] in (MAIN, UNKNOWN):
            return
        if (self.w.resolve(call.func) or "").startswith("torch.") or _called_name(call) in _NOT_FILLING:
            return  # torch's own calls are modelled; orderings, and storing a slice, write nothing
        block = id(self.blocks[-1][0])
        now = self.tick()
        for argument in [*call.args, *(keyword.value for keyword in call.keywords)]:
            if isinstance(argument, ast.Name) and self.block_views.get(argument.id) == block:
                binding = self.tensors.get(argument.id)
                if binding is not None:
                    written(binding, self.current[-1], now)

    def _listed(self, name: str, value: ast.AST | None) -> None:
        """`outs = [None] * n`: a fresh list, whose elements are followed from now on."""
        for element in elements_of(name, list(self.tensors)):
            self.tensors.pop(element)
        if is_list_value(value):
            self.lists.add(name)
        else:
            self.lists.discard(name)

    def element_written(self, target: ast.Subscript, made: Binding | None, stmt: ast.stmt) -> None:
        """`outs[i] = x` into a local list, at an index known on this pass: the element holds x."""
        container = target.value
        if not (isinstance(container, ast.Name) and self._is_element(container, target)):
            return
        index = element_index(target, self.names.counters)
        if index is None:
            return
        name = element_name(container.id, index)
        if made is None:
            self.tensors.pop(name, None)
            return
        escape(made.storages)  # the list may be returned or saved: its elements are not released here
        self.bindings.rebind(name, made, stmt, self.tick())

    def _data_swap(self, target: ast.AST, stmt: ast.stmt) -> None:
        """`t.data = new` in a side stream's block that read `t`: its old memory is freed
        while the block's work may still read it (`data_replacement`)."""
        stream = self.current[-1]
        if not self.blocks or stream in (MAIN, UNKNOWN) or self.off_device or self.orderings.records:
            return
        block, expr = self.blocks[-1]
        if expr is None:
            return  # entered through a StreamContext object: its stream is not spelled here
        found = data_replaced(self.w, block, expr, target, stmt)
        if found is not None:
            self.emit(DataSwappedInUse(stmt, found.name, found.read, stream, found.forked))

    def rebound(self, name: str, value: ast.AST | None) -> None:
        """What else ``name = value`` says: a string, a view of a host buffer, a host copy."""
        if value is not None and (V.is_str_expr(value) or _is_plain(self.w.ty(value))):
            self.plain.add(name)
        else:
            self.plain.discard(name)
        viewed = self._pending_view(value)
        self.pending_host.pop(name, None)  # the name now holds something else
        if viewed is not None:
            self.pending_host[name] = viewed  # `arr = host.numpy()`: the same host memory
        if value is not None:
            self._note_host_copy(name, value)

    def allocating_stream(self, value: ast.AST) -> str:
        """The stream a new tensor is made on: the current one, unless the call is handed
        another stream (`f(x, out_alloc_stream=consumer)`), which it may allocate or run on."""
        current = self.current[-1]
        if isinstance(value, ast.Call):
            for argument in [*value.args, *(keyword.value for keyword in value.keywords)]:
                if self.names.is_stream(argument) and self.stream_of(argument) != current:
                    return UNKNOWN
        return current

    def _side_allocated_attribute(self, value: ast.AST | None) -> str | None:
        """The side stream that made `self.attr`, when another method assigns it under one."""
        if not (
            isinstance(value, ast.Attribute)
            and isinstance(value.value, ast.Name)
            and value.value.id == "self"
            and self.w.class_qualname
        ):
            return None
        return _side_stream_attributes(self.w).get(value.attr)

    def _pending_view(self, value: ast.AST | None) -> tuple[ast.AST, int, str] | None:
        if not isinstance(value, ast.expr):
            return None
        root = V.view_root(value, self.w.resolve)
        if root is value or not isinstance(root, ast.Name):
            return None
        return self.pending_host.get(root.id)

    def release(self, name: str, stmt: ast.stmt, now: int) -> None:
        """`del name`: the memory nothing else holds is freed."""
        self.bindings.rebind(name, None, stmt, now)

    def check_free(self, storage: Storage, name: str, stmt: ast.stmt | None, now: int) -> None:
        """``storage`` is freed at ``now`` (``stmt``; None: the end of the function): is a
        side-stream use of it still unordered with its allocation stream?"""
        if storage.alloc_stream == UNKNOWN:
            return  # allocated on a stream this cannot name: nothing to compare the uses with
        uses = [
            use
            for use in storage.uses
            if use.stream not in (storage.alloc_stream, UNKNOWN)
            and not any((held, use.stream) in self.recorded for held in storage.names)
            and not self.ordered(use.stream, use.position, storage.alloc_stream, now)
        ]
        if uses:  # the block is reused by the next allocation on its stream: judged then
            self.releases.defer(storage, name, stmt, uses)

    def report_release(self, release: Deferred, use: Use) -> None:
        name = release.name
        if release.node is None:
            name = use.node.id if isinstance(use.node, ast.Name) else release.storage.name
        event = ReleasedInUse(
            use.node if release.node is None else release.node,
            name,
            use.node,
            use.statement,
            use.stream,
            release.storage.alloc_stream,
            release.node is None,
            self.w.display,
            self._certain_release(release, use),
        )
        self.emit(event)

    def _certain_release(self, release: Deferred, use: Use) -> bool:
        """Is this release unordered by anything the function could hide? An explicit release
        (`del x`, `x = None`, a rebinding that cannot return `x` itself), written after the
        side stream's use, of memory this function made on the current stream; between the
        two, only forks and no helper handed a stream; no `record_stream` anywhere."""
        stmt, storage = release.node, release.storage
        if not isinstance(stmt, ast.stmt) or self.off_device or not storage.owned:
            return False
        used_at = getattr(use.node, "lineno", use.statement.lineno)
        if storage.alloc_stream != MAIN or use.stream in (MAIN, UNKNOWN) or stmt.lineno <= used_at:
            return False
        if not on_every_path_after(self.w.body, use.statement, stmt):
            return False  # a branch of its own: flags may tie it to the use's (the flow cannot tell)
        if isinstance(stmt, ast.Assign) and may_return_itself(stmt.value, release.name):
            return False
        span = between(self.w.body, used_at, stmt.lineno)
        return orders_by_forks_only(self.w, span) and not hands_a_stream(self.w, span) and not self.orderings.records

    # -- uses ----------------------------------------------------------------------------
    def use_target(self, target: ast.AST, write: bool) -> None:
        root = target
        while isinstance(root, (ast.Subscript, ast.Attribute)):
            root = root.value
        if isinstance(root, ast.Name):
            self.use(root.id, root, write=write)
        for node in ast.walk(target):
            if node is not root and isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                self.use(node.id, node, write=False)

    def use(self, name: str, node: ast.AST, write: bool = False, host_read: bool = False) -> None:
        if self.off_device:
            return
        now = self.tick()
        stream = self.current[-1]
        if name in self.pending_host and host_read:
            copy, copied_at, copy_stream = self.pending_host.pop(name)
            if not self._host_synced(copy_stream, copied_at, now, self.host_floor.get(name, 0)):
                self.emit(UnsyncedHostRead(node, name, copy))
        binding = self.tensors.get(name)
        if binding is None:
            return
        crossing = self._crossing(binding, stream, now)
        if crossing is not None:
            producer, produced_at = crossing
            key = (name, producer, produced_at, stream)
            if self.crossed.get(key) is not True:  # not again in a sibling branch, unless now certain
                certain = self._certain_crossing(binding, producer, produced_at, stream)
                if key not in self.crossed or certain:
                    self.emit(CrossStreamUse(node, name, producer, stream, certain))
                self.crossed[key] = certain
            binding.produced = (stream, now)  # one report per crossing
        if self.statement is not None:  # a use of a view is a use of its base; of a holder, of what it holds
            for storage in self._this_pass(binding.storages):
                if stream != storage.alloc_stream and not storage.holder:
                    storage.uses.append(Use(stream, now, self.statement, node))
        if write:
            written(binding, stream, now)

    def _certain_crossing(self, binding: Binding, producer: str, produced_at: int, consumer: str) -> bool:
        """Is this crossing unordered by anything the function could hide? The tensor's memory
        is made here; no helper is handed a stream; and of the orderings that can run between
        the write and the use (stream_certainty.orderings_before), out of a side-stream block
        only forks, into one only joins of the current stream. A name bound differently by
        alternatives is certain only where no flag ties the binding's branch to the use's."""
        if self.off_device or binding.partial or UNKNOWN in (producer, consumer):
            return False
        if not all(storage.made_here and not storage.holder for storage in binding.storages):
            return False
        if self.orderings.hands_a_stream or self.statement is None:
            return False
        written = self.ticked.get(produced_at)
        if binding.joined and (
            written is None or not may_run_both(self.w.body, written, self.statement, self.orderings.rebound)
        ):
            return False
        if consumer == MAIN:
            return self.orderings.forks_only or all(is_fork(self.w, call) for call in self._between(written))
        if producer == MAIN:
            return self.orderings.joins_only or all(is_current_join(self.w, call) for call in self._between(written))
        return all(self._named_wait(call) for call in self._between(written))

    def _between(self, written: ast.stmt | None) -> list[ast.Call]:
        """The ordering calls that can run between ``written`` and the use being judged."""
        assert self.statement is not None
        return orderings_before(self.w, self.statement, written, self.orderings.rebound)

    def _named_wait(self, call: ast.Call) -> bool:
        """`a.wait_stream(b)` of two streams the flow names: an ordering it reads exactly (no
        event, sync or record), so between two side streams only these may run between."""
        func = call.func
        if not (isinstance(func, ast.Attribute) and func.attr == "wait_stream" and len(call.args) == 1):
            return False
        return UNKNOWN not in (self.stream_of(func.value), self.stream_of(call.args[0]))

    def _crossing(self, binding: Binding, stream: str, now: int) -> tuple[str, int] | None:
        """The write on another stream, unordered with this use on ``stream``, or None.

        Two kinds of joined paths are no evidence: one where the name holds a value the flow
        does not track (`if fmt == "a": x = quantize(q)` / `else: x = layout`, a string), and,
        when this loop pass wrote the name on some path, one that kept an earlier pass's
        value (`if fmt == "a": q_ = ...` / `elif fmt == "b": q_ = ...` with no `else`: the
        formats are exhaustive in fact, and the earlier pass ran on another stream)."""
        if binding.partial:
            return None
        for producer, produced_at in self._this_pass_producers(binding.producers):
            if producer == stream or UNKNOWN in (producer, stream) or self._apart(produced_at):
                continue
            if not self.ordered(producer, produced_at, stream, now, self.statement):
                return producer, produced_at
        return None

    def _apart(self, produced_at: int) -> bool:
        """The tests around the write and the use say no path runs both (stream_certainty.
        never_both): that write is not what this use reads."""
        return self.statement is not None and self._never_with(produced_at, self.statement)

    def _this_pass_producers(self, producers: list[tuple[str, int]]) -> list[tuple[str, int]]:
        """``producers`` less those of an earlier loop pass, when this pass wrote too."""
        return self._drop_earlier_passes(producers, lambda loop, p: loop.earlier_pass(p[1]))

    def _this_pass(self, storages: list[Storage]) -> list[Storage]:
        """The memory a use touches (views' bases, holders' contents), less what an earlier
        loop pass made, when this pass made some of it too (the same missing `else`)."""
        touched = list(closure(storages))
        return self._drop_earlier_passes(touched, lambda loop, s: loop.earlier_pass_storage(s.ident))

    def _drop_earlier_passes(self, items: list[_T], earlier: Callable[[LoopPass, _T], bool]) -> list[_T]:
        """``items`` less those an enclosing loop's earlier pass made; all of them when every
        one is that old (then the earlier pass is the only evidence there is)."""
        current = [item for item in items if not any(earlier(loop, item) for loop in self.releases.loops)]
        return current or items

    def _host_synced(self, stream: str, cutoff: int, now: int, floor: int = 0) -> bool:
        """Has the host waited for ``stream``'s work up to ``cutoff`` (a sync, a blocking copy)?
        Syncs before ``floor`` ran on another path than one that reaches here."""
        return any(
            floor < at <= now and (synced is None or synced == stream) and synced_cutoff >= cutoff
            for synced, synced_cutoff, at in self.host_syncs
        )

    def expr(self, expr: ast.AST, stored: bool = False) -> None:
        """Evaluate ``expr``; ``stored``: its value is bound, returned or yielded as it is."""
        parents = {child: parent for parent in ast.walk(expr) for child in ast.iter_child_nodes(parent)}
        passed = self.calls.passed_to_callees(expr)
        for node in evaluation_order(expr):
            if isinstance(node, ast.Call):
                self.call(node)
            elif isinstance(node, ast.BinOp):
                self.work(self.tick())  # `x * 2` allocates its result on the current stream
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                if self._kept(node, parents, stored) or _metadata_only(node, parents):
                    continue  # `pair = (x, y)`, `Chunk(x)`, `x is None`, `x.shape`: no kernel touches it
                element = parents.get(node)
                if isinstance(element, ast.Subscript) and self._is_element(node, element):
                    if not (self._kept(element, parents, stored) or _metadata_only(element, parents)):
                        for name in self._elements_read(node.id, element):
                            self.use(name, element)
                    continue
                host_read = passed[id(node)] if id(node) in passed else self._is_host_read(node, parents)
                self.use(node.id, node, host_read=host_read)

    def _is_element(self, node: ast.Name, parent: ast.AST | None) -> bool:
        """`xs[k]` on a fresh local list (not a tuple of tensors the flow holds as one)."""
        return (
            node.id in self.lists
            and node.id not in self.tensors
            and isinstance(parent, ast.Subscript)
            and parent.value is node
        )

    def _elements_read(self, container: str, subscript: ast.Subscript) -> list[str]:
        """`xs[i - 1]`: the element the index names on this pass; every element if unknown."""
        index = element_index(subscript, self.names.counters)
        if index is not None:
            return [element_name(container, index)]
        return elements_of(container, list(self.tensors))

    def work(self, now: int) -> None:
        """Work queued on the current stream: it may allocate, reusing a block freed there."""
        stream = self.current[-1]
        self.releases.settle(stream, now)
        self.last_work[stream] = now
        self.releases.worked(stream, now)

    def _kept(self, node: ast.AST, parents: dict[ast.AST, ast.AST], stored: bool) -> bool:
        """Is this name only stored (in a display, a constructor, a container, a binding)?"""
        child = node
        while True:
            parent = parents.get(child)
            if parent is None:
                return stored
            if isinstance(parent, (ast.Tuple, ast.List, ast.Set, ast.Dict, ast.Starred, ast.keyword)) or (
                isinstance(parent, ast.IfExp) and child is not parent.test
            ):
                child = parent
                continue
            if isinstance(parent, (ast.Yield, ast.YieldFrom)):
                return True
            return isinstance(parent, ast.Call) and child is not parent.func and self._keeps(parent)

    def _keeps(self, call: ast.Call) -> bool:
        """A call that stores its arguments: a constructor, a partial, `list.append`."""
        func = call.func
        if isinstance(func, ast.Attribute) and func.attr in _STORING_METHODS | _KEEPING_METHODS:
            return True
        return V.is_holder_call(call, self.w.resolve, self.w.ty(call))

    def _is_host_read(self, node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
        """Does this use of a host buffer read its contents on the host (GL303)?

        Storing it (in a tuple, a container, an attribute, an object), returning it, binding
        another name to it, taking a view of it (`host[:n]`, `.narrow()`, `.numpy()`) or
        handing it to a function of the project does not (the callee's reads are its own);
        calling a reading method on it, formatting it or passing it to torch, numpy or a
        builtin that reads it does.
        """
        child, parent = node, parents.get(node)
        while True:  # climb the views: the read is what is done with the view
            if (isinstance(parent, ast.Subscript) and child is parent.value) or (
                isinstance(parent, ast.Attribute) and parent.attr in V.VIEW_ATTRS
            ):
                child, parent = parent, parents.get(parent)
            elif isinstance(parent, ast.Attribute) and V.returns_receiver(parent.attr):
                call = parents.get(parent)
                if not (isinstance(call, ast.Call) and call.func is parent) or V.is_in_place(parent.attr):
                    break
                child, parent = call, parents.get(call)
            else:
                break
        if isinstance(parent, ast.keyword):
            child, parent = parent, parents.get(parent)
        if parent is None or isinstance(parent, (ast.Tuple, ast.List, ast.Set, ast.Dict, ast.Starred, ast.Yield)):
            return False
        if isinstance(parent, ast.Attribute):
            return parent.attr not in _NOT_READING_ATTRS and parent.attr not in T.PY_ATTRS
        if isinstance(parent, ast.Call) and child is not parent.func:
            return self._reads_arguments(parent)
        return True

    def _reads_arguments(self, call: ast.Call) -> bool:
        """Does this call read the host memory it is given (torch, numpy, builtins)?"""
        func = call.func
        if isinstance(func, ast.Attribute) and func.attr in _STORING_METHODS | _KEEPING_METHODS | {"record_stream"}:
            return False
        name = self.w.resolve(func)
        if name is None:  # a method: a tensor's reads its arguments, another object's is its own business
            receiver = self.w.ty(func.value) if isinstance(func, ast.Attribute) else None
            return (
                receiver is not None
                and receiver.tensorish
                and not (isinstance(func, ast.Attribute) and func.attr == "copy_")
            )
        if name in V.ROW_ITERATORS or name in _NOT_READING_BUILTINS:
            return False
        return "." not in name or name.startswith(("torch.", "numpy."))

    def call(self, call: ast.Call) -> None:
        func = call.func
        name = self.w.resolve(func)
        now = self.tick()
        if not _queues_no_work(func, name):
            self.work(now)
        if name in _DEVICE_SYNCS:
            self.host_syncs.append((None, now, now))
            self.pending_host.clear()
            return
        if name in _CURRENT_STREAM_SYNCS:  # a barrier, a comparison read on the host
            self.host_syncs.append((self.current[-1], now, now))
            return
        self.calls.callee_effects(call, now)
        if name is not None and name.split(".")[-1] in _COLLECTIVES_WRITING_FIRST_ARG and call.args:
            # dist.all_reduce(t), dist.all_gather_into_tensor(out, x): the collective writes its
            # first tensor on the current stream.
            first = call.args[0]
            if isinstance(first, ast.Name) and first.id in self.tensors:
                written(self.tensors[first.id], self.current[-1], now)
            return
        if isinstance(func, ast.Attribute):
            self._method_call(call, func.attr, func.value, now)

    def _method_call(self, call: ast.Call, method: str, receiver: ast.expr, now: int) -> None:
        blocking = not T.is_true(T.keyword(call, "non_blocking"))
        if method in _HOST_SYNCING_METHODS or (
            blocking and (method == "cpu" or (method == "to" and T.call_targets_host(call)))
        ):
            # `.item()`, a blocking copy to the host: the host waits for everything queued on
            # the current stream, earlier non-blocking copies included.
            self.host_syncs.append((self.current[-1], now, now))
        if method in _STORING_METHODS or method in _KEEPING_METHODS:
            for arg in [*call.args, *(kw.value for kw in call.keywords)]:
                self.bindings.escape(arg)  # queued or stored: it outlives this function
        if method in ("wait_stream", "wait_event", "record", "record_event", "wait", "synchronize"):
            self._ordering_call(call, method, receiver, now)
        elif method == "record_stream" and call.args:
            root = V.view_root(receiver, self.w.resolve)  # a view records its base's storage
            if isinstance(root, ast.Name):
                self.recorded.add((root.id, self.stream_of(call.args[0])))
        elif method == "copy_" and T.is_true(T.keyword(call, "non_blocking")) and isinstance(receiver, ast.Name):
            receiver_ty = self.w.ty(receiver)
            if receiver_ty is not None and receiver_ty.kind == T.HOST:
                self.pending_host[receiver.id] = (call, now, self.current[-1])
        elif method.endswith(_IN_PLACE_SUFFIX) and isinstance(receiver, ast.Name) and receiver.id in self.tensors:
            self.tensors[receiver.id].produced = (self.current[-1], now)

    def _ordering_call(self, call: ast.Call, method: str, receiver: ast.expr, now: int) -> None:
        """Waits, event records and synchronisations: what orders one stream after another."""
        if method == "wait_stream" and call.args:
            self.waits.append((self.stream_of(receiver), self.stream_of(call.args[0]), now, now))
            self._default_stream_wait(call, receiver, call.args[0])
            self._self_wait(call, receiver, call.args[0])
            self._join_of_another_stream(call, self.stream_of(receiver), self.stream_of(call.args[0]), now)
        elif method == "wait" and _recorded_now(receiver):  # `s.record_event().wait(waiter)`
            waiter = self.stream_of(call.args[0]) if call.args else self.current[-1]
            waited = self.stream_of(receiver.func.value)  # type: ignore[attr-defined]
            self.waits.append((waiter, waited, now, now))
            self._join_of_another_stream(call, waiter, waited, now)
        elif method == "wait_event" and call.args:
            event = self.events.get(source_text(call.args[0]))
            if event is not None:
                self.waits.append((self.stream_of(receiver), event[0], event[1], now))
        elif method == "record_event" and call.args:  # `s.record_event(e)`: e marks s's work so far
            self.events[source_text(call.args[0])] = (self.stream_of(receiver), now)
        elif method == "record" and self._is_event(receiver):
            stream = self.stream_of(call.args[0]) if call.args else self.current[-1]
            self.events[source_text(receiver)] = (stream, now)
        elif method == "wait" and self._is_event(receiver):
            event = self.events.get(source_text(receiver))
            if event is not None:
                waiter = self.stream_of(call.args[0]) if call.args else self.current[-1]
                self.waits.append((waiter, event[0], event[1], now))
        elif method == "wait" and not call.args:
            # A future's or a collective's wait(): it orders the work it stands for with the
            # current stream, on streams this pass cannot see. Do not guess: treat it as a barrier.
            self.host_syncs.append((None, now, now))
        elif method == "synchronize":
            self._synchronize(receiver, now)

    def _default_stream_wait(self, call: ast.Call, waiter: ast.expr, waited: ast.expr) -> None:
        """A fork from or a join into the default stream, made outside any stream block of a
        function (a module's top level runs on the default stream: there the two are one)."""
        if self.w.is_module or self.off_device or self.current[-1] != MAIN:
            return
        for default, side, join in ((waited, waiter, False), (waiter, waited, True)):
            if isinstance(default, ast.Call) and names_default_stream(self.w, default):
                stream = self.stream_of(side)
                if stream not in (MAIN, UNKNOWN) and not names_default_stream(self.w, side):
                    self.emit(DefaultStreamWait(call, default, stream, join))
                return

    def _self_wait(self, call: ast.Call, waiter: ast.expr, waited: ast.expr) -> None:
        """Inside a stream block, the block's stream made to wait for `current_stream()`."""
        current = self.current[-1]
        if current in (MAIN, UNKNOWN) or self.off_device or not names_current_stream(self.w, waited):
            return
        if self.stream_of(waiter) == current:
            self.emit(SelfWait(call, current))

    def _new_stream_block(self, context: ast.expr, stmt: ast.With | ast.AsyncWith) -> None:
        """A block entered on a stream made in its own `with`, which no wait can name: its
        work is ordered only by a device-wide sync (looked for anywhere in the function, as a
        caller's order is out of sight) or by an ordering call inside the block."""
        if self.w.is_module or self.off_device or not isinstance(context, ast.Call) or not context.args:
            return
        made = context.args[0]
        if not (isinstance(made, ast.Call) and self.w.resolve(made.func) == "torch.cuda.Stream"):
            return
        if calls_any(self.w.body, {"synchronize"}) or calls_any(stmt.body, ORDERING_METHODS):
            return
        if all(isinstance(inner, ast.Pass) or _is_constant_statement(inner) for inner in stmt.body):
            return
        self.emit(UnorderedNewStream(made))

    def _fork_of_another_stream(self, block: str) -> None:
        """`x.wait_stream(current)` right before a block on another side stream that the
        current stream's work so far is not ordered before."""
        fork = self.neighbours.fork_before()
        if fork is None or self.off_device or block in (MAIN, UNKNOWN) or some_element(block):
            return
        current = self.current[-1]
        named = self.stream_of(fork.func.value)  # type: ignore[attr-defined]
        if self.stream_of(fork.args[0]) != current or named in (block, current, MAIN, UNKNOWN):
            return
        if enters_later(self.w, self.w.body, fork.func.value):  # type: ignore[attr-defined]
            return  # the named stream has a block of its own after: the fork may be for it
        forked_at = max((at for waiter, waited, _, at in self.waits if (waiter, waited) == (named, current)), default=0)
        if not self.ordered(current, forked_at, block, self.position):
            self.emit(WrongStreamWait(fork, named, block, join=False))

    def _join_of_another_stream(self, call: ast.Call, waiter: str, waited: str, now: int) -> None:
        """Right after a block on a side stream, the current stream made to wait for another
        one, while the block's own work is joined nowhere in the function."""
        left = self.neighbours.after_block
        if left is None or self.off_device or waiter != self.current[-1] or bare_call(self.statement) is not call:
            return
        if left.stream in (MAIN, UNKNOWN, waiter) or waited in (left.stream, waiter, MAIN, UNKNOWN):
            return
        if some_element(left.stream):
            return  # the block may be on the waited stream: no evidence of a slip
        if waited in self.entered:
            return  # the join is for that stream's own earlier block
        if self.ordered(left.stream, left.at, waiter, now) or any(
            stream == left.stream for stream, _ in self.events.values()
        ):
            return  # joined already, or an event marks the block's work for a later wait
        if not joins_anywhere(self.w.body, left.stream):
            self.emit(WrongStreamWait(call, waited, left.stream, join=True))

    def _synchronize(self, receiver: ast.expr, now: int) -> None:
        if self._is_event(receiver):
            event = self.events.get(source_text(receiver))
            if event is not None:
                self.host_syncs.append((event[0], event[1], now))
                self.pending_host.clear()
        else:
            self.host_syncs.append((self.stream_of(receiver), now, now))
            self.pending_host.clear()

    def _is_event(self, node: ast.AST) -> bool:
        """An event: by its kind, by a record seen, or because a stream waits on it here
        (`dependency_event.record(s)` on a parameter later passed to `wait_event`)."""
        ty = self.w.ty(node)
        text = source_text(node)
        return (ty is not None and ty.kind == T.EVENT) or text in self.events or text in self.waited_events

    def _note_host_copy(self, name: str, value: ast.AST) -> None:
        """`y = x.to("cpu", non_blocking=True)`: y is filled later; `e = s.record_event()`."""
        if not isinstance(value, ast.Call):
            return
        func = value.func
        if isinstance(func, ast.Attribute) and func.attr == "record_event":
            self.events[name] = (self.stream_of(func.value), self.position)
            return
        if is_host_copy(value) or self._returns_pending(value):
            self.pending_host[name] = (value, self.position, self.current[-1])
            self.tensors.pop(name, None)

    def _returns_pending(self, value: ast.Call) -> bool:
        """`host = fetch(x)`: this file's `fetch` returns a non-blocking host copy."""
        callee = self.calls.callee(value)
        return callee is not None and self.calls.effects(callee).returns_pending


_NOT_READING_ATTRS = frozenset(
    {
        "record_stream",
        "data_ptr",
        "is_pinned",
        "shape",
        "dtype",
        "device",
        "copy_",
        "numel",
        "element_size",
        "size",
        "dim",
        "stride",
        "nbytes",
        "itemsize",
        "storage_offset",
        "is_contiguous",
        "untyped_storage",
        "ndim",
    }
)
_HOST_SYNCING_METHODS = frozenset({"item", "tolist"})  # `.numpy()` only views host memory
_DEVICE_SYNCS = frozenset(
    {"torch.cuda.synchronize", "torch.accelerator.synchronize", "torch.cuda.current_stream.synchronize"}
)
_COLLECTIVES_WRITING_FIRST_ARG = frozenset(
    {
        "all_reduce",
        "all_gather_into_tensor",
        "_all_gather_base",
        "reduce_scatter_tensor",
        "_reduce_scatter_base",
        "broadcast",
        "all_to_all_single",
        "reduce",
        "recv",
        "irecv",
    }
)
_STORING_METHODS = frozenset({"append", "extend", "insert", "put", "put_nowait", "add", "setdefault"})
_KEEPING_METHODS = frozenset({"set_result", "save_for_backward"})  # they keep their arguments too
_NOT_FILLING = ORDERING_METHODS | _STORING_METHODS | _KEEPING_METHODS | {"record_stream", "print"}
_NOT_READING_BUILTINS = frozenset(
    {"len", "id", "isinstance", "type", "hash", "getattr", "hasattr", "setattr", "callable"}
)


def _side_stream_attributes(walker: Binder) -> dict[str, str]:
    """`self.attr` assigned a device tensor inside `with torch.cuda.stream(s):` in any method of
    the walker's class: attribute -> stream. Computed once per class node."""
    node = walker.st.class_nodes.get(walker.class_qualname or "")
    if node is None:
        return {}
    cache = walker.st.side_stream_attributes
    cached = cache.get(walker.class_qualname or "")
    if cached is not None:
        return cached
    found: dict[str, str] = {}
    methods = []
    seen: set[str] = set()
    queue = [walker.class_qualname or ""]
    while queue:  # the class and its bases defined in this file
        current = queue.pop()
        if current in seen or current not in walker.st.class_nodes:
            continue
        seen.add(current)
        methods.extend(walker.st.class_nodes[current].body)
        queue.extend(walker.st.summary.classes[current].bases)
    for method in methods:
        if not isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for inner in ast.walk(method):
            if not isinstance(inner, (ast.With, ast.AsyncWith)):
                continue
            for item in inner.items:
                context = item.context_expr
                if not (isinstance(context, ast.Call) and context.args):
                    continue
                if not walker.is_stream_context(context):
                    continue
                stream = source_text(context.args[0])
                for stmt in ast.walk(inner):
                    if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call):
                        for target in stmt.targets:
                            if (
                                isinstance(target, ast.Attribute)
                                and isinstance(target.value, ast.Name)
                                and target.value.id == "self"
                            ):
                                found[target.attr] = stream
    cache[walker.class_qualname or ""] = found
    return found


# What `_is_stream_use` looks for, spelled in source (a superset: also in strings and comments).
# Most files that say "stream" say it in prose, and most functions of a file that uses streams
# do not: the lines this matches pick the functions whose syntax tree is then looked at.
_STREAM_USE_TEXT = re.compile(r"\.[\s\\]*(?:stream|StreamContext|default_stream)\b|\bdefault_stream\b|\bnon_blocking\b")


def analyze(state: ModuleState, source: str) -> None:
    """Run the stream flow over every function that switches streams or copies asynchronously,
    and every function that calls one of those by name."""
    if "stream" not in source and "non_blocking" not in source:
        return
    lines = _LineIndex(source)
    use_lines = lines.matching(_STREAM_USE_TEXT)
    if not use_lines:
        return
    walkers = [walker for walker in state.walkers if walker.body]
    functions = [walker for walker in walkers if not walker.is_module]
    using = {id(w) for w in functions if _spans_any(w.body, use_lines) and _subtree_any(w.body, _is_stream_use)}
    # The module's body holds every function: it uses streams if any of them does.
    modules = [w for w in walkers if w.is_module and (using or _subtree_any(w.body, _is_stream_use))]
    using |= {id(w) for w in modules}
    names = {w.qualname.rsplit(".", 1)[-1] for w in walkers if id(w) in using}
    if names:
        call_lines = lines.matching(re.compile(r"\b(?:" + "|".join(map(re.escape, sorted(names))) + r")\b"))
        called = lambda node: _called_name(node) in names  # noqa: E731
        using |= {id(w) for w in functions if _spans_any(w.body, call_lines) and _subtree_any(w.body, called)}
    for walker in state.walkers:
        if id(walker) not in using:
            continue
        walker.forget_kinds()
        flow = StreamFlow(walker)
        walk(flow, walker.body)
        flow.finish()
    resizes = "resize_" in source  # cheapest first: storage swapped by hand anywhere in the file
    for walker in functions:
        for event in returned_side_attributes(walker):
            walker.emit(event)
        for freed in side_storage_frees(walker) if resizes else ():
            walker.emit(freed)


def summarise(walker: Binder) -> E.Effects:
    """Run the stream flow over a callee, quietly, for its effects on its callers."""
    walker.forget_kinds()
    flow = StreamFlow(walker, quiet=True)
    walk(flow, walker.body)
    flow.finish()
    walker.forget_kinds()
    return flow.calls.summary()


class _LineIndex:
    """Line numbers of regex matches in one source text."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.breaks = [match.start() for match in re.finditer("\n", source)]

    def matching(self, pattern: re.Pattern[str]) -> list[int]:
        return sorted({bisect.bisect_left(self.breaks, m.end()) + 1 for m in pattern.finditer(self.source)})


def _spans_any(body: list[ast.stmt], lines: list[int]) -> bool:
    """Does a line of ``lines`` (sorted) fall within ``body``, its first statement's decorators included?"""
    first = body[0]
    start = min([first.lineno, *(d.lineno for d in getattr(first, "decorator_list", ()))])
    end = body[-1].end_lineno or body[-1].lineno
    index = bisect.bisect_left(lines, start)
    return index < len(lines) and lines[index] <= end


def _subtree_any(body: list[ast.stmt], test: Callable[[ast.AST], bool]) -> bool:
    return any(test(node) for stmt in body for node in ast.walk(stmt))


def _stream_or_null(walker: Binder, context: ast.IfExp) -> ast.AST:
    """`torch.cuda.stream(s) if s is not None else nullcontext()`: the stream context itself,
    since `torch.cuda.stream(None)` enters no stream either. Any other conditional: itself."""
    test, body, orelse = context.test, context.body, context.orelse
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        test, body, orelse = test.operand, orelse, body  # `... if not (s is None) else ...`
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.Is, ast.IsNot))):
        return context
    if not (isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value is None):
        return context
    stream_side, null_side = (body, orelse) if isinstance(test.ops[0], ast.IsNot) else (orelse, body)
    is_null = isinstance(null_side, ast.Call) and walker.resolve(null_side.func) == "contextlib.nullcontext"
    if not (
        is_null and isinstance(stream_side, ast.Call) and stream_side.args and walker.is_stream_context(stream_side)
    ):
        return context
    return stream_side if source_text(stream_side.args[0]) == source_text(test.left) else context


def _range_start(walker: Binder, iterable: ast.expr) -> int | None:
    """`range(n)` -> 0, `range(1, n)` -> 1; None for any other iterable, start or step."""
    if not (isinstance(iterable, ast.Call) and walker.resolve(iterable.func) == "range") or iterable.keywords:
        return None
    arguments = iterable.args
    if len(arguments) == 1:
        return 0
    if len(arguments) == 3 and int_value(arguments[2], {}) != 1:
        return None
    return int_value(arguments[0], {}) if len(arguments) in (2, 3) else None


def _recorded_now(node: ast.AST) -> bool:
    """`s.record_event()` as an expression: an event of `s`'s work up to here."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "record_event"
        and not node.args
    )


def _is_constant_statement(stmt: ast.stmt) -> bool:
    """A docstring or `...`: a statement that queues nothing."""
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)


def _waited_events(body: list[ast.stmt]) -> frozenset[str]:
    """What this function passes to `s.wait_event(...)`: events, whatever their kind says."""
    return frozenset(
        source_text(node.args[0])
        for stmt in body
        for node in ast.walk(stmt)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "wait_event"
        and node.args
    )


def _called_name(node: ast.AST) -> str | None:
    """The last name of what ``node`` calls (``f`` of ``f(x)`` and of ``obj.f(x)``)."""
    if not isinstance(node, ast.Call):
        return None
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)


def _is_stream_use(node: ast.AST) -> bool:
    """A stream switch (``.stream``, ``StreamContext``), an asynchronous copy (``non_blocking=``),
    or the default stream named (a join into it may be all a function does with streams)."""
    if isinstance(node, ast.Attribute):
        return node.attr in ("stream", "StreamContext", "default_stream")
    if isinstance(node, ast.Name):
        return node.id == "default_stream"
    return isinstance(node, ast.keyword) and node.arg == "non_blocking"


def _union_lists(lists: Iterable[list]) -> list:
    """The facts of every alternative, each once, in order."""
    return list(dict.fromkeys(item for facts in lists for item in facts))


def _is_plain(ty: T.Ty | None) -> bool:
    return ty is not None and ty.kind == T.PY


def _none_in_branch(test: ast.expr, index: int) -> str | None:
    """`if x is None:` (alternative 0) / `if x is not None: ... else:` (1): the name that holds None."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.left, ast.Name)):
        return None
    other = test.comparators[0]
    if not (isinstance(other, ast.Constant) and other.value is None):
        return None
    if (isinstance(test.ops[0], ast.Is) and index == 0) or (isinstance(test.ops[0], ast.IsNot) and index == 1):
        return test.left.id
    return None


def _metadata_only(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    """`x is None`, `x.shape`, `x.device`, `isinstance(x, ...)`, `len(x)`: the tensor object
    is looked at, its data is not; `x.record_stream(s)` (on a view too) is bookkeeping."""
    parent = parents.get(node)
    if isinstance(parent, ast.Compare):
        return all(isinstance(op, (ast.Is, ast.IsNot)) for op in parent.ops)
    if isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name) and node is not parent.func:
        return parent.func.id in _NOT_READING_BUILTINS
    return (isinstance(parent, ast.Attribute) and parent.attr in T.PY_ATTRS) or _only_recorded(node, parents)


def _only_recorded(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    """`x.record_stream(s)`, `x.view(-1).record_stream(s)`, `x[0].record_stream(s)`."""
    parent = parents.get(node)
    while isinstance(parent, (ast.Attribute, ast.Subscript, ast.Call)):
        if isinstance(parent, ast.Attribute) and parent.attr == "record_stream":
            return True
        if isinstance(parent, ast.Call) and node is not parent.func:
            return False
        node, parent = parent, parents.get(parent)
    return False


_CURRENT_STREAM_SYNCS = frozenset(
    {
        "torch.distributed.barrier",  # NCCL's barrier blocks the host on the current stream
        "deepspeed.comm.barrier",  # the same through DeepSpeed's torch.distributed wrapper
        "torch.testing.assert_close",  # compares on the host: waits for the current stream
        "torch.allclose",
        "torch.equal",
    }
)
# Stream and event bookkeeping: calls that queue no kernel and allocate no device memory.
_NO_WORK = frozenset(
    {
        "stream",
        "current_stream",
        "default_stream",
        "Stream",
        "StreamContext",
        "Event",
        "record_stream",
        "record_event",
        "record",
        "wait_stream",
        "wait_event",
        "wait",
        "synchronize",
        "query",
        "get_accelerator",
        "current_device",
        "device",
    }
)


def _queues_no_work(func: ast.expr, name: str | None) -> bool:
    """Calls that cannot allocate device memory: stream/event bookkeeping and builtins."""
    tail = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    return tail in _NO_WORK or (name is not None and "." not in name)


_CUDA_GUARDS = frozenset({"torch.cuda.is_initialized", "torch.cuda.is_available"})


def _cuda_guard(w: Binder, test: ast.expr) -> bool | None:
    """True for `if torch.cuda.is_initialized():`, False for its negation, None otherwise."""
    negated = isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)
    if negated:
        test = test.operand  # type: ignore[attr-defined]
    if isinstance(test, ast.Call) and not test.args and w.resolve(test.func) in _CUDA_GUARDS:
        return not negated
    return None


def _synced_in(end: dict, name: str, stream: str, cutoff: int) -> bool:
    """Did the path that ended in ``end`` synchronise the host with the copy into ``name``?"""
    floor = end["host_floor"].get(name, 0)
    return any(
        floor < at and (synced is None or synced == stream) and synced_cutoff >= cutoff
        for synced, synced_cutoff, at in end["host_syncs"]
    )
