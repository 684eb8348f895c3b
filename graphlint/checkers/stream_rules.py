"""GL3xx: side streams. The caching allocator keeps one pool per stream, so a tensor released
on one stream while another still uses it is handed to the next allocation: a race that
shows up as NaNs or wrong losses days later.

A flow pass over each function that uses streams follows statement order (loops run twice:
rebinding `x = layer(x)` at the top of iteration k+1 releases the `x` a side stream used in
iteration k) with a model of the current stream (`with torch.cuda.stream(s)`, StreamContext,
`get_accelerator().stream(s)`) and of the ordering operations: `a.wait_stream(b)`,
`a.wait_event(e)`, `e.record()`/`e.record(s)`/`s.record_event()`, `e.wait()`,
`e.synchronize()`, `s.synchronize()`, `torch.cuda.synchronize()` and `x.record_stream(s)`.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from graphlint.checkers import types as T
from graphlint.checkers.names import evaluation_order, source_text
from graphlint.findings import Fix
from graphlint.fix_ops import InsertStatementAfter
from graphlint.registry import Rule, declare

if TYPE_CHECKING:
    from graphlint.checkers.summarize import FunctionWalker, ModuleState

declare(
    Rule(
        code="GL301",
        preview=True,
        preview_reason=(
            "On the real-code corpus (benchmarks/corpus: vLLM, SGLang, Megatron-core, TransformerEngine, DeepSpeed, tensordict, torchrl, torchtitan, torchao; 10,640 files), 0 of 91 findings were real: the old tensor was still held (a view, a list or attribute), the release sat in a branch exclusive with the side-stream use, the side stream's next allocation was ordered by a wait at every fork, or a `record_stream`/wait already ordered it."
        ),
        name="del-without-stream-sync",
        fix="unsafe",
        summary=(
            "`del x`, `x = None`, rebinding `x`, or the end of scope of a local `x`, where `x` was "
            "used on another stream (`with torch.cuda.stream(s):`) and nothing since ordered that "
            "use before the release (`current_stream().wait_stream(s)`, `s.synchronize()`, "
            "`torch.cuda.synchronize()`, an event recorded on `s` and waited on, or "
            "`x.record_stream(s)`)."
        ),
        why=(
            "The caching allocator recycles a freed block on the stream that allocated it, without "
            "waiting for other streams. If `s` still reads or writes `x`, the next allocation on "
            "the current stream gets the same memory while `s` is using it."
        ),
        example="""
            x = torch.randn(n, device="cuda")
            with torch.cuda.stream(side):
                y = x * 2
            del x
        """,
        use_instead="""
            x = torch.randn(n, device="cuda")
            with torch.cuda.stream(side):
                y = x * 2
                x.record_stream(side)
            del x
        """,
    )
)
declare(
    Rule(
        code="GL302",
        preview=True,
        preview_reason=(
            'On the real-code corpus (benchmarks/corpus: vLLM, SGLang, Megatron-core, TransformerEngine, DeepSpeed, tensordict, torchrl, torchtitan, torchao; 10,640 files), 0 of 157 findings were real: the current stream held in a local (`current = torch.cuda.current_stream()`) was not recognised, the use sat in a branch exclusive with the side-stream block, the caller or callee did the wait, or the "producer" was a bare allocation.'
        ),
        name="cross-stream-use-without-wait",
        summary=(
            "A tensor produced on one stream and used on another with no `wait_stream`, "
            "`wait_event` or event wait between producer and consumer, in either direction (into "
            "a side-stream block, or out of it)."
        ),
        why="Streams run concurrently: the consumer can read the tensor before the producer has written it.",
        example="""
            h = model(x)
            with torch.cuda.stream(side):
                summary = h.mean()
        """,
        use_instead="""
            h = model(x)
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                summary = h.mean()
        """,
    )
)
declare(
    Rule(
        code="GL303",
        preview=True,
        preview_reason=(
            "On the real-code corpus (benchmarks/corpus: vLLM, SGLang, Megatron-core, TransformerEngine, DeepSpeed, tensordict, torchrl, torchtitan, torchao; 10,640 files), 0 of 9 findings were real: storing the host tensor in a container, a constructor or a handle with its event is not a host read, and readers synchronised on the recorded event first."
        ),
        name="unsynced-non-blocking-copy",
        summary=(
            "`y = x.to('cpu', non_blocking=True)` (or `.cpu(non_blocking=True)`, "
            "`host.copy_(x, non_blocking=True)`) read on the host before a synchronisation."
        ),
        why=(
            "A non-blocking device-to-host copy returns at once; the host buffer is filled later. "
            "Reading it before `torch.cuda.synchronize()` or an event's `synchronize()` reads "
            "garbage or stale values."
        ),
        example="""
            host = logits.to("cpu", non_blocking=True)
            tokens = host.argmax(-1).tolist()
        """,
        use_instead="""
            host = logits.to("cpu", non_blocking=True)
            done = torch.cuda.Event()
            done.record()
            done.synchronize()
            tokens = host.argmax(-1).tolist()
        """,
    )
)

MAIN = "<current>"
_STREAM_CONTEXTS = frozenset({"torch.cuda.stream", "torch.cuda.StreamContext"})
_CURRENT = frozenset({"torch.cuda.current_stream", "torch.cuda.default_stream"})
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
    escaped: bool = False
    local: bool = True


class StreamFlow:
    def __init__(self, walker: FunctionWalker) -> None:
        self.w = walker
        self.position = 0
        self.current = [MAIN]
        self.tensors: dict[str, _Tensor] = {}
        self.waits: list[tuple[str, str, int, int]] = []  # (waiter, waited-for, cutoff, at)
        self.host_syncs: list[tuple[str | None, int, int]] = []  # (stream or None=all, cutoff, at)
        self.events: dict[str, tuple[str, int]] = {}  # event -> (stream, cutoff)
        self.recorded: set[tuple[str, str]] = set()  # (tensor, stream) from record_stream
        self.pending_host: dict[str, tuple[ast.AST, int]] = {}  # GL303: host buffer -> (copy, position)
        self.reported: set[tuple[str, int, int]] = set()
        self.statement: ast.stmt | None = None
        self.handed: list[tuple[str, str, ast.stmt]] = []  # (name, side stream, binding statement)
        self.params = set(walker.summary.params) | {"self", "cls"}

    # -- ordering model --------------------------------------------------------------------
    def tick(self) -> int:
        self.position += 1
        return self.position

    def stream_of(self, node: ast.AST | None) -> str | None:
        """The stream an expression denotes: a variable, or the current one."""
        if node is None:
            return self.current[-1]
        if isinstance(node, ast.Call) and self.w.resolve(node.func) in _CURRENT:
            return self.current[-1]
        return source_text(node)

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

    # -- reporting -----------------------------------------------------------------------
    def report(self, code: str, node: ast.AST, message: str, fix: Fix | None = None) -> None:
        key = (code, node.lineno, node.col_offset)
        if key not in self.reported:
            self.reported.add(key)
            self.w.hazard(code, node, message, fix=fix, always=True)

    # -- walk ----------------------------------------------------------------------------
    def run(self, body: list[ast.stmt]) -> None:
        self.block(body)
        for name, side, stmt in self.handed:
            if not any(tensor == name and stream != side for tensor, stream in self.recorded):
                self.report(
                    "GL301",
                    stmt,
                    f"`{name}` was allocated on `{side}` and is handed to the current stream without "
                    f"`{name}.record_stream(torch.cuda.current_stream())`: once it is freed, the allocator "
                    f"can reuse it on `{side}` while the current stream still reads it",
                    _record_stream_fix(self.w.st, stmt, name, "torch.cuda.current_stream()"),
                )
        if self.w.is_module:
            return  # module globals live on
        end = self.tick()
        for name, tensor in sorted(self.tensors.items()):
            if tensor.local and not tensor.escaped:
                self.release(name, None, end, scope_end=True)

    def block(self, body: list[ast.stmt]) -> None:
        for stmt in body:
            self.stmt(stmt)

    def stmt(self, stmt: ast.stmt) -> None:
        self.statement = stmt
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return
        if isinstance(stmt, (ast.With, ast.AsyncWith)):
            pushed = 0
            for item in stmt.items:
                self.expr(item.context_expr)
                stream = self._stream_context(item.context_expr)
                if stream is not None:
                    self.current.append(stream)
                    pushed += 1
            self.block(stmt.body)
            for _ in range(pushed):
                self.current.pop()
            return
        if isinstance(stmt, (ast.For, ast.AsyncFor, ast.While)):
            self.expr(stmt.test if isinstance(stmt, ast.While) else stmt.iter)
            for _ in range(2):
                if not isinstance(stmt, ast.While):
                    self.bind(stmt.target, None, stmt)
                self.block(stmt.body)
            self.block(stmt.orelse)
            return
        if isinstance(stmt, ast.If):
            self.expr(stmt.test)
            before = dict(self.pending_host)
            self.block(stmt.body)
            after_body = self.pending_host
            self.pending_host = before  # the else-branch does not see the if-branch's copies
            self.block(stmt.orelse)
            self.pending_host = {**after_body, **self.pending_host}
            return
        if isinstance(stmt, ast.Try):
            self.block(stmt.body)
            for handler in stmt.handlers:
                self.block(handler.body)
            self.block(stmt.orelse)
            self.block(stmt.finalbody)
            return
        if isinstance(stmt, ast.Delete):
            for target in stmt.targets:
                if isinstance(target, ast.Name):
                    self.release(target.id, stmt, self.tick())
            return
        if isinstance(stmt, ast.Assign):
            self.expr(stmt.value)
            for target in stmt.targets:
                self.bind(target, stmt.value, stmt)
            return
        if isinstance(stmt, (ast.AnnAssign, ast.AugAssign)) and stmt.value is not None:
            self.expr(stmt.value)
            if isinstance(stmt, ast.AugAssign):
                self.use_target(stmt.target, write=True)
            else:
                self.bind(stmt.target, stmt.value, stmt)
            return
        if isinstance(stmt, (ast.Return, ast.Expr)) and stmt.value is not None:
            self.expr(stmt.value)
            if isinstance(stmt, ast.Return) or isinstance(stmt.value, (ast.Yield, ast.YieldFrom)):
                self.escape(stmt.value)
            return
        for child in ast.iter_child_nodes(stmt):
            if isinstance(child, ast.expr):
                self.expr(child)

    def _stream_context(self, context: ast.AST) -> str | None:
        if not isinstance(context, ast.Call) or (not context.args and not context.keywords):
            return None
        func = context.func
        is_stream = self.w.resolve(func) in _STREAM_CONTEXTS or (
            isinstance(func, ast.Attribute)
            and func.attr == "stream"
            and isinstance(func.value, ast.Call)
            and source_text(func.value.func).endswith("get_accelerator")
        )
        if not is_stream:
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
                stream = self.current[-1]
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
        for use in reversed(tensor.uses):
            if use.stream == tensor.alloc_stream or (name, use.stream) in self.recorded:
                continue
            if self.ordered(use.stream, use.position, tensor.alloc_stream, now):
                continue
            where = f"at the end of `{self.w.display}`" if scope_end else "here"
            node = use.node if stmt is None else stmt
            self.report(
                "GL301",
                node,
                f"`{name}` is released {where} while stream `{use.stream}` may still use it (line "
                f"{use.node.lineno}): the allocator can hand its memory to the next allocation on "
                f"`{_show(tensor.alloc_stream)}`",
                _record_stream_fix(self.w.st, use.statement, name, use.stream),
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
            self.report(
                "GL303",
                node,
                f"`{name}` is read on the host before the non-blocking copy into it (line {copy.lineno}) is "
                "synchronised",
            )
        tensor = self.tensors.get(name)
        if tensor is None:
            return
        producer, produced_at = tensor.produced
        if producer != stream and not self.ordered(producer, produced_at, stream, now):
            direction = "into" if stream != MAIN else "out of"
            self.report(
                "GL302",
                node,
                f"`{name}` is produced on `{_show(producer)}` and used on `{_show(stream)}` ({direction} a "
                f"side-stream block) with no wait between them",
            )
            tensor.produced = (stream, now)  # one report per crossing
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
        if name in ("torch.cuda.synchronize", "torch.accelerator.synchronize", "torch.cuda.current_stream.synchronize"):
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
        if not isinstance(func, ast.Attribute):
            return
        method = func.attr
        receiver = func.value
        if method in _HOST_SYNCING_METHODS or (method == "cpu" and not T.is_true(T.keyword(call, "non_blocking"))):
            # `.item()` waits for the current stream: everything queued on it is done.
            self.host_syncs.append((self.current[-1], now, now))
        if method in _STORING_METHODS or method == "set_result":
            for arg in call.args:
                self.escape(arg)  # queued or stored: it outlives this function
        if method == "wait_stream" and call.args:
            self.waits.append((self.stream_of(receiver), self.stream_of(call.args[0]), now, now))
        elif method == "wait_event" and call.args:
            event = self.events.get(source_text(call.args[0]))
            if event is not None:
                self.waits.append((self.stream_of(receiver), event[0], event[1], now))
        elif method == "record_event":
            pass  # bound by the assignment: see _note_event
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
            if self._is_event(receiver):
                event = self.events.get(source_text(receiver))
                if event is not None:
                    self.host_syncs.append((event[0], event[1], now))
                    self.pending_host.clear()
            else:
                self.host_syncs.append((self.stream_of(receiver), now, now))
                self.pending_host.clear()
        elif method == "record_stream" and call.args and isinstance(receiver, ast.Name):
            self.recorded.add((receiver.id, self.stream_of(call.args[0])))
        elif method == "copy_" and T.is_true(T.keyword(call, "non_blocking")) and isinstance(receiver, ast.Name):
            receiver_ty = self.w.ty(receiver)
            if receiver_ty is not None and receiver_ty.kind == T.HOST:
                self.pending_host[receiver.id] = (call, now)
        elif method.endswith(_IN_PLACE_SUFFIX) and isinstance(receiver, ast.Name) and receiver.id in self.tensors:
            self.tensors[receiver.id].produced = (self.current[-1], now)

    def _is_event(self, node: ast.AST) -> bool:
        ty = self.w.ty(node)
        return (ty is not None and ty.kind == T.EVENT) or source_text(node) in self.events

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
    cache = walker.st.__dict__.setdefault("side_stream_attributes", {})
    cached = cache.get(walker.class_qualname)
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
                if walker.resolve(context.func) not in _STREAM_CONTEXTS:
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
    cache[walker.class_qualname] = found
    return found


def _show(stream: str) -> str:
    return "the current stream" if stream == MAIN else stream


def _record_stream_fix(state: ModuleState, statement: ast.stmt, name: str, stream: str) -> Fix | None:
    """Insert `x.record_stream(s)` after the last statement that used `x` on `s`."""
    if statement.end_lineno is None:
        return None
    if stream == MAIN:
        stream = "torch.cuda.current_stream()"
    return Fix(
        "unsafe",
        f"tell the allocator `{stream}` uses `{name}`: `{name}.record_stream({stream})`",
        (InsertStatementAfter(state.span(statement), f"{name}.record_stream({stream})"),),
    )


def analyze(state: ModuleState, source: str) -> None:
    """Run the stream flow over every function that switches streams or copies asynchronously."""
    if "stream" not in source and "non_blocking" not in source:
        return
    for walker in state.walkers:
        body = walker.node.body if hasattr(walker.node, "body") else []
        if not body or not _uses_streams(body):
            continue
        walker._ty_cache.clear()
        StreamFlow(walker).run(body)


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
