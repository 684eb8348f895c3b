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
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from graphlint.checkers.machinery import value_kinds as T
from graphlint.checkers.machinery.flow import FlowState, walk
from graphlint.checkers.machinery.names import evaluation_order, source_text
from graphlint.checkers.machinery.stream_identity import MAIN, UNKNOWN, StreamNames

if TYPE_CHECKING:
    from graphlint.checkers.machinery.binder import FunctionWalker
    from graphlint.checkers.machinery.module_state import ModuleState


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


@dataclass(frozen=True)
class HandedWithoutRecord:
    """`inp = self.next_input` (made on ``side`` by another method) used on the current stream."""

    kind: ClassVar[str] = "release"
    node: ast.stmt
    name: str
    side: str


@dataclass(frozen=True)
class CrossStreamUse:
    kind: ClassVar[str] = "cross"
    node: ast.AST
    name: str
    producer: str
    stream: str


@dataclass(frozen=True)
class UnsyncedHostRead:
    kind: ClassVar[str] = "host-read"
    node: ast.AST
    name: str
    copy: ast.AST


EVENTS = (ReleasedInUse, HandedWithoutRecord, CrossStreamUse, UnsyncedHostRead)


def show_stream(stream: str) -> str:
    """A stream as messages name it."""
    return "the current stream" if stream == MAIN else stream


_IN_PLACE_SUFFIX = "_"


@dataclass
class _Use:
    stream: str
    position: int
    statement: ast.stmt
    node: ast.AST


@dataclass
class _Tensor:
    alloc_stream: str
    produced: tuple[str, int]
    uses: list[_Use] = field(default_factory=list)
    crossings: set[tuple[str, int, str]] = field(default_factory=set)  # reported (producer, at, user)
    escaped: bool = False
    local: bool = True


class StreamFlow(FlowState):
    """The stream flow over one function (a flow-skeleton state)."""

    def __init__(self, walker: FunctionWalker) -> None:
        self.w = walker
        self.position = 0
        self.current = [MAIN]
        self.pushed: list[int] = []  # streams entered per open `with`
        self.tensors: dict[str, _Tensor] = {}
        self.waits: list[tuple[str, str, int, int]] = []  # (waiter, waited-for, cutoff, at)
        self.host_syncs: list[tuple[str | None, int, int]] = []  # (stream or None=all, cutoff, at)
        self.events: dict[str, tuple[str, int]] = {}  # event -> (stream, cutoff)
        self.recorded: set[tuple[str, str]] = set()  # (tensor, stream) from record_stream
        self.pending_host: dict[str, tuple[ast.AST, int]] = {}  # host buffer -> (copy, position)
        self.reported: set[tuple[str, int, int]] = set()
        self.statement: ast.stmt | None = None
        self.handed: list[tuple[str, str, ast.stmt]] = []  # (name, side stream, binding statement)
        self.params = set(walker.summary.params) | {"self", "cls"}
        self.names = StreamNames(walker)
        self.waited_events = _waited_events(walker.body)

    # -- ordering model --------------------------------------------------------------------
    def tick(self) -> int:
        self.position += 1
        return self.position

    def stream_of(self, node: ast.AST | None) -> str:
        """The stream an expression denotes (`stream_identity`); no expression: the current one."""
        if node is None:
            return self.current[-1]
        return self.names.denote(node, self.current[-1])

    def ordered(self, producer: str, cutoff: int, consumer: str, now: int) -> bool:
        """Is work submitted to ``producer`` before ``cutoff`` ordered before ``consumer`` at ``now``?"""
        if producer == consumer:
            return True
        for stream, sync_cutoff, at in self.host_syncs:
            if at <= now and (stream is None or stream == producer) and sync_cutoff >= cutoff:
                return True
        frontier = {producer: cutoff}
        changed = True
        while changed:  # transitive: a waits for b waits for c
            changed = False
            for waiter, waited, wait_cutoff, at in self.waits:
                if at > now or waited not in frontier or wait_cutoff < frontier[waited]:
                    continue
                if waiter == consumer:
                    return True
                if frontier.get(waiter, -1) < at:
                    frontier[waiter] = at
                    changed = True
        return False

    def emit(self, event: object) -> None:
        node = event.node  # type: ignore[attr-defined]
        key = (event.kind, node.lineno, node.col_offset)  # type: ignore[attr-defined]
        if key not in self.reported:
            self.reported.add(key)
            self.w.emit(event)

    # -- the walk ------------------------------------------------------------------------
    def finish(self) -> None:
        """At the end of the function: hand-offs never recorded, locals released by scope end."""
        for name, side, stmt in self.handed:
            if not any(tensor == name and stream != side for tensor, stream in self.recorded):
                self.emit(HandedWithoutRecord(stmt, name, side))
        if self.w.is_module:
            return  # module globals live on
        end = self.tick()
        for name, tensor in sorted(self.tensors.items()):
            if tensor.local and not tensor.escaped:
                self.release(name, None, end, scope_end=True)

    def before(self, stmt: ast.stmt) -> None:
        self.statement = stmt

    def header(self, expr: ast.expr, stmt: ast.stmt) -> None:
        self.expr(expr)
        if isinstance(stmt, (ast.With, ast.AsyncWith)):
            stream = self._stream_context(expr)
            if stream is not None:
                self.current.append(stream)
                self.pushed.append(id(stmt))

    def exit_with(self, stmt: ast.With | ast.AsyncWith) -> None:
        while self.pushed and self.pushed[-1] == id(stmt):
            self.pushed.pop()
            self.current.pop()

    def loop_target(self, stmt: ast.For | ast.AsyncFor) -> None:
        self.bind(stmt.target, None, stmt)
        self.names.bind_element(stmt.target, stmt.iter)

    def fork(self, stmt: ast.stmt) -> tuple[dict, list[dict], tuple, list[tuple]]:
        return dict(self.pending_host), [], self.names.snapshot(), []

    def branch(self, stmt: ast.stmt, index: int, start: tuple[dict, list[dict], tuple, list[tuple]]) -> None:
        if index:  # each alternative starts from what held before them, not from its sibling
            start[1].append(self.pending_host)
            self.pending_host = dict(start[0])
            start[3].append(self.names.snapshot())
            self.names.restore(start[2])

    def join(self, stmt: ast.stmt, start: tuple[dict, list[dict], tuple, list[tuple]]) -> None:
        merged: dict[str, tuple[ast.AST, int]] = {}
        for pending in start[1]:
            merged.update(pending)
        merged.update(self.pending_host)
        self.pending_host = merged
        self.names.merge(start[3])

    def simple(self, stmt: ast.stmt) -> None:
        if isinstance(stmt, ast.Delete):
            for target in stmt.targets:
                if isinstance(target, ast.Name):
                    self.release(target.id, stmt, self.tick())
        elif isinstance(stmt, ast.Assign):
            self.expr(stmt.value)
            for target in stmt.targets:
                self.bind(target, stmt.value, stmt)
        elif isinstance(stmt, (ast.AnnAssign, ast.AugAssign)) and stmt.value is not None:
            self.expr(stmt.value)
            if isinstance(stmt, ast.AugAssign):
                self.use_target(stmt.target, write=True)
            else:
                self.bind(stmt.target, stmt.value, stmt)
        elif isinstance(stmt, (ast.Return, ast.Expr)) and stmt.value is not None:
            self.expr(stmt.value)
            if isinstance(stmt, ast.Return) or isinstance(stmt.value, (ast.Yield, ast.YieldFrom)):
                self.escape(stmt.value)
        else:
            for child in ast.iter_child_nodes(stmt):
                if isinstance(child, ast.expr):
                    self.expr(child)

    def _stream_context(self, context: ast.AST) -> str | None:
        if not isinstance(context, ast.Call) or (not context.args and not context.keywords):
            return None
        if not self.w.is_stream_context(context):
            return None
        argument = context.args[0] if context.args else T.keyword(context, "stream")
        if argument is None or (isinstance(argument, ast.Constant) and argument.value is None):
            return None
        return self.stream_of(argument)

    # -- bindings ------------------------------------------------------------------------
    def bind(self, target: ast.AST, value: ast.AST | None, stmt: ast.stmt) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self.bind(element, None if value is None else value, stmt)
            return
        self.names.bind(target, value, self.current[-1])
        if isinstance(target, ast.Name):
            name = target.id
            now = self.tick()
            if name in self.tensors:
                self.release(name, stmt, now)
            side = self._side_allocated_attribute(value)
            if side is not None and self.current[-1] == MAIN:
                # `inp = self.next_input`, made on a side stream by another method: from here on
                # the current stream uses it, so the allocator must be told (record_stream).
                self.handed.append((name, side, stmt))
                self.tensors.pop(name, None)
            elif value is not None and self._is_tensor_value(value):
                stream = self._allocating_stream(value)
                self.tensors[name] = _Tensor(stream, (stream, now), local=name not in self.w.globals)
            else:
                self.tensors.pop(name, None)
            self.pending_host.pop(name, None)  # the name now holds something else
            if value is not None:
                self._note_host_copy(name, value)
            return
        # self.attr = x / container[k] = x: x now lives beyond this function.
        if value is not None:
            self.escape(value)
        self.use_target(target, write=True)

    def _allocating_stream(self, value: ast.AST) -> str:
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

    def _is_tensor_value(self, value: ast.AST) -> bool:
        """Device tensors computed here; host data and values of unknown origin are not tracked."""
        ty = self.w.ty(value)
        if ty is not None:
            return ty.kind in (T.TENSOR, T.MASK)
        if isinstance(value, ast.BinOp):
            return self._is_tensor_value(value.left) or self._is_tensor_value(value.right)
        if isinstance(value, ast.Call):  # model(x): a call on device tensors gives a device tensor
            name = self.w.resolve(value.func)
            if name is not None and (name.startswith("torch.") or "." not in name):
                return False  # torch's own non-tensor results (work handles, events), builtins
            return any(self._is_tensor_value(arg) for arg in value.args)
        return False

    def escape(self, value: ast.AST) -> None:
        for node in ast.walk(value):
            if isinstance(node, ast.Name) and node.id in self.tensors:
                self.tensors[node.id].escaped = True

    def release(self, name: str, stmt: ast.stmt | None, now: int, scope_end: bool = False) -> None:
        tensor = self.tensors.pop(name, None)
        if tensor is None or name in self.params:
            return
        if tensor.escaped and not stmt:
            return
        if tensor.alloc_stream == UNKNOWN:
            return  # allocated on a stream this cannot name: nothing to compare the uses with
        for use in reversed(tensor.uses):
            if use.stream in (tensor.alloc_stream, UNKNOWN) or (name, use.stream) in self.recorded:
                continue
            if self.ordered(use.stream, use.position, tensor.alloc_stream, now):
                continue
            node = use.node if stmt is None else stmt
            self.emit(
                ReleasedInUse(
                    node, name, use.node, use.statement, use.stream, tensor.alloc_stream, scope_end, self.w.display
                )
            )
            return

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
        now = self.tick()
        stream = self.current[-1]
        if name in self.pending_host and host_read:
            copy, _ = self.pending_host.pop(name)
            self.emit(UnsyncedHostRead(node, name, copy))
        tensor = self.tensors.get(name)
        if tensor is None:
            return
        producer, produced_at = tensor.produced
        crossing = (producer, produced_at, stream)
        if (
            producer != stream
            and UNKNOWN not in (producer, stream)  # an unknown stream never makes a report alone
            and crossing not in tensor.crossings
            and not self.ordered(producer, produced_at, stream, now)
        ):
            self.emit(CrossStreamUse(node, name, producer, stream))
            tensor.crossings.add(crossing)  # one report per crossing; a read produces nothing
        if stream != tensor.alloc_stream and self.statement is not None:
            tensor.uses.append(_Use(stream, now, self.statement, node))
        if write:
            tensor.produced = (stream, now)

    def expr(self, expr: ast.AST) -> None:
        parents = {child: parent for parent in ast.walk(expr) for child in ast.iter_child_nodes(parent)}
        for node in evaluation_order(expr):
            if isinstance(node, ast.Call):
                self.call(node)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                self.use(node.id, node, host_read=_is_host_read(node, parents))

    def call(self, call: ast.Call) -> None:
        func = call.func
        name = self.w.resolve(func)
        now = self.tick()
        if name in _DEVICE_SYNCS:
            self.host_syncs.append((None, now, now))
            self.pending_host.clear()
            return
        if name is not None and name.split(".")[-1] in _COLLECTIVES_WRITING_FIRST_ARG and call.args:
            # dist.all_reduce(t), dist.all_gather_into_tensor(out, x): the collective writes its
            # first tensor on the current stream.
            first = call.args[0]
            if isinstance(first, ast.Name) and first.id in self.tensors:
                self.tensors[first.id].produced = (self.current[-1], now)
            return
        if isinstance(func, ast.Attribute):
            self._method_call(call, func.attr, func.value, now)

    def _method_call(self, call: ast.Call, method: str, receiver: ast.expr, now: int) -> None:
        if method in _HOST_SYNCING_METHODS or (method == "cpu" and not T.is_true(T.keyword(call, "non_blocking"))):
            # `.item()` waits for the current stream: everything queued on it is done.
            self.host_syncs.append((self.current[-1], now, now))
        if method in _STORING_METHODS or method == "set_result":
            for arg in call.args:
                self.escape(arg)  # queued or stored: it outlives this function
        if method in ("wait_stream", "wait_event", "record", "wait", "synchronize"):
            self._ordering_call(call, method, receiver, now)
        elif method == "record_stream" and call.args and isinstance(receiver, ast.Name):
            self.recorded.add((receiver.id, self.stream_of(call.args[0])))
        elif method == "copy_" and T.is_true(T.keyword(call, "non_blocking")) and isinstance(receiver, ast.Name):
            receiver_ty = self.w.ty(receiver)
            if receiver_ty is not None and receiver_ty.kind == T.HOST:
                self.pending_host[receiver.id] = (call, now)
        elif method.endswith(_IN_PLACE_SUFFIX) and isinstance(receiver, ast.Name) and receiver.id in self.tensors:
            self.tensors[receiver.id].produced = (self.current[-1], now)

    def _ordering_call(self, call: ast.Call, method: str, receiver: ast.expr, now: int) -> None:
        """Waits, event records and synchronisations: what orders one stream after another."""
        if method == "wait_stream" and call.args:
            self.waits.append((self.stream_of(receiver), self.stream_of(call.args[0]), now, now))
        elif method == "wait_event" and call.args:
            event = self.events.get(source_text(call.args[0]))
            if event is not None:
                self.waits.append((self.stream_of(receiver), event[0], event[1], now))
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
        if not isinstance(value, ast.Call) or not isinstance(value.func, ast.Attribute):
            return
        method = value.func.attr
        if method == "record_event":
            self.events[name] = (self.stream_of(value.func.value), self.position)
            return
        if not T.is_true(T.keyword(value, "non_blocking")):
            return
        if method == "cpu" or (method == "to" and T.call_targets_host(value)):
            self.pending_host[name] = (value, self.position)
            self.tensors.pop(name, None)


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
_HOST_SYNCING_METHODS = frozenset({"item", "tolist", "numpy"})
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


def _is_host_read(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    """Does this use of a host buffer read its contents on the host (GL303)?

    Storing it (in a tuple, a container, an attribute), returning it or binding another name
    to it does not; calling a method on it, indexing it, formatting it or passing it to a
    function does.
    """
    parent = parents.get(node)
    if parent is None or isinstance(parent, (ast.Tuple, ast.List, ast.Set, ast.Dict, ast.Starred)):
        return False
    if isinstance(parent, ast.Attribute):
        return parent.attr not in _NOT_READING_ATTRS
    if isinstance(parent, ast.Call) and node is not parent.func:
        func = parent.func
        return not (isinstance(func, ast.Attribute) and func.attr in _STORING_METHODS | {"record_stream", "copy_"})
    return True


def _side_stream_attributes(walker: FunctionWalker) -> dict[str, str]:
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


def analyze(state: ModuleState, source: str) -> None:
    """Run the stream flow over every function that switches streams or copies asynchronously."""
    if "stream" not in source and "non_blocking" not in source:
        return
    for walker in state.walkers:
        body = walker.body
        if not body or not _uses_streams(body):
            continue
        walker.forget_kinds()
        flow = StreamFlow(walker)
        walk(flow, body)
        flow.finish()


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


def _uses_streams(body: list[ast.stmt]) -> bool:
    for stmt in body:
        for node in ast.walk(stmt):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            if isinstance(node, ast.Attribute) and node.attr in ("stream", "StreamContext"):
                return True
            if isinstance(node, ast.keyword) and node.arg == "non_blocking":
                return True
    return False
