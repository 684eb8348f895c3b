"""The replay flow: what happens around `replay()`, in statement order.

Every replay writes the same output memory and reads the same input memory. For each
capture the binder records the graph (`g`, `self.graph`, `self.graphs[bs]`), its static
inputs (tensors read in the capture that were defined before it) and its static outputs
(names, `self` attributes and container slots bound in it). This flow, a state on the flow
skeleton, follows every function that can see a capture, with loops run twice (a replay in
iteration k+1 follows what iteration k kept) and alternatives joined (what either branch
kept may be kept after it), and raises typed events for the rules:

- `KeptOutputRead`, `OutputYieldedInLoop`, `OutputStoredInLoop`: a static output (or a view
  of it) kept and read after a later replay, yielded from or stored in a replay loop;
- `InputRebound`: a static input rebound before a replay;
- `StaleReplay`: a replay loop whose fresh per-iteration data never reaches a static input;
- `InputReallocated`: `resize_`, `set_` or `.data =` on a static input after capture.

A function that replays and returns a static output is a runner (`returns_static`): calls of
it count as replays, in this file here and across files in the project phase.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, ClassVar

from graphlint.checkers.machinery.core import kinds as T
from graphlint.checkers.machinery.core.branch_arms import never_together
from graphlint.checkers.machinery.core.call_targets import CallTarget, FunctionTarget, InstanceCall, MethodTarget
from graphlint.checkers.machinery.core.flow import FlowState, walk
from graphlint.checkers.machinery.core.module_state import Capture
from graphlint.checkers.machinery.core.names import source_text
from graphlint.checkers.machinery.core.syntax import evaluation_order, statements
from graphlint.checkers.machinery.core.tensor_uses import EVIDENCE_METHODS

if TYPE_CHECKING:
    from graphlint.checkers.machinery.core.module_state import Binder, ModuleState


@dataclass(frozen=True)
class KeptOutputRead:
    """``kept`` (an expression whose value was kept) is read on ``read_line`` after a replay."""

    kind: ClassVar[str] = "aliased"
    node: ast.AST  # the kept expression
    graph: str
    read_line: int


@dataclass(frozen=True)
class OutputYieldedInLoop:
    kind: ClassVar[str] = "aliased"
    node: ast.expr
    graph: str


@dataclass(frozen=True)
class OutputStoredInLoop:
    kind: ClassVar[str] = "aliased"
    node: ast.AST
    graph: str
    holder: str


@dataclass(frozen=True)
class InputRebound:
    kind: ClassVar[str] = "rebound"
    node: ast.stmt  # the assignment
    name: str
    value: ast.AST
    graph: str


@dataclass(frozen=True)
class StaleReplay:
    kind: ClassVar[str] = "stale"
    node: ast.Call  # the replay
    graph: str
    fresh: tuple[str, ...]


@dataclass(frozen=True)
class InputReallocated:
    kind: ClassVar[str] = "reallocated"
    node: ast.AST
    text: str  # `x.resize_()` or `x.data = ...`
    graph: str
    method: str | None  # None for `.data =`


EVENTS = (KeptOutputRead, OutputYieldedInLoop, OutputStoredInLoop, InputRebound, StaleReplay, InputReallocated)

_ALIASING_METHODS = frozenset(
    {
        "view",
        "view_as",
        "reshape",
        "reshape_as",
        "detach",
        "narrow",
        "squeeze",
        "unsqueeze",
        "transpose",
        "permute",
        "expand",
        "expand_as",
        "as_strided",
        "flatten",
        "unflatten",
        "contiguous",
        "float",
        "half",
        "bfloat16",
        "to",
        "type_as",
        "chunk",
        "split",
        "unbind",
        "t",
        "movedim",
        "select",
        "diagonal",
        "real",
        "requires_grad_",
    }
)
_ALIASING_ATTRS = frozenset({"T", "mT", "H", "mH", "data", "real", "imag"})
_INPUT_WRITERS = frozenset(
    {
        "copy_",
        "fill_",
        "zero_",
        "index_copy_",
        "index_put_",
        "index_fill_",
        "masked_scatter_",
        "masked_fill_",
        "scatter_",
        "normal_",
        "uniform_",
        "random_",
        "add_",
        "mul_",
        "set_",
        "resize_",
    }
)
_REALLOCATORS = frozenset({"resize_", "set_", "resize_as_"})


def key_of(node: ast.AST) -> str | None:
    """`static_x`, `self.static_x`, `self.outputs[]`: a stable key for a name, attribute or slot."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = key_of(node.value)
        return f"{base}.{node.attr}" if base else None
    if isinstance(node, ast.Subscript):
        base = key_of(node.value)
        return f"{base}[]" if base else None
    return None


def _root_key(node: ast.AST) -> str | None:
    """The storage a view expression belongs to: `static_in[:n]` -> `static_in`."""
    while True:
        if isinstance(node, ast.Subscript):
            inner = key_of(node)
            base = key_of(node.value)
            if base is not None:
                return inner  # a slot (`outputs[bs]`) or a slice (`x[:n]`): resolved by the caller
            node = node.value
        elif (
            isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _ALIASING_METHODS
        ):
            node = node.func.value
        elif isinstance(node, ast.Attribute) and node.attr in _ALIASING_ATTRS:
            node = node.value
        else:
            return key_of(node)


def graph_key(node: ast.AST | None) -> str | None:
    return key_of(node) if node is not None else None


def note_capture(walker: Binder, body: list[ast.stmt], graph: ast.AST | None, line: int, end_line: int) -> None:
    """Record a capture's graph, static inputs and static outputs (types as of capture time)."""
    key = graph_key(graph)
    if key is None:
        return
    capture = Capture(key, line, end_line, walker.qualname)
    assigned: set[str] = set()
    for stmt in body:
        for node in ast.walk(stmt):
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    for element in target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]:
                        element_key = key_of(element)
                        if element_key:
                            capture.outputs.add(element_key)
                            assigned.add(element_key)
    called = {id(node.func) for stmt in body for node in ast.walk(stmt) if isinstance(node, ast.Call)}
    unknown: set[str] = set()
    for stmt in body:
        for node in ast.walk(stmt):
            if isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, ast.Load):
                node_key = key_of(node)
                if node_key is None or node_key in assigned:
                    continue
                ty = walker.ty(node)
                if ty is not None and ty.tensorish:
                    capture.inputs.add(node_key)
                elif ty is None and id(node) not in called and walker.resolve(node) is None:
                    unknown.add(node_key)  # `model(static_x)`, `static_x` never bound here
    capture.unknown_reads = unknown
    walker.st.captures.append(capture)


@dataclass
class _Kept:
    node: ast.AST
    graph: str
    replays_at: int
    container: bool


@dataclass
class _Facts:
    """What may hold at a point of the flow; joined over alternatives."""

    replays: dict[str, int] = field(default_factory=dict)
    kept: dict[str, _Kept] = field(default_factory=dict)
    rebinds: dict[str, list[tuple[ast.stmt, str, ast.AST]]] = field(default_factory=dict)
    graph_alias: dict[str, str] = field(default_factory=dict)
    outputs: dict[str, str] = field(default_factory=dict)  # output key -> graph

    def copy(self) -> _Facts:
        return _Facts(
            dict(self.replays),
            dict(self.kept),
            {graph: list(items) for graph, items in self.rebinds.items()},
            dict(self.graph_alias),
            dict(self.outputs),
        )

    def join(self, other: _Facts) -> None:
        for graph, count in other.replays.items():
            self.replays[graph] = max(count, self.replays.get(graph, 0))
        for key, kept in other.kept.items():
            mine = self.kept.get(key)
            if mine is None or kept.replays_at < mine.replays_at:
                self.kept[key] = kept
        for graph, items in other.rebinds.items():
            slot = self.rebinds.setdefault(graph, [])
            slot.extend(item for item in items if item not in slot)
        for key, value in other.graph_alias.items():
            self.graph_alias.setdefault(key, value)
        for key, value in other.outputs.items():
            self.outputs.setdefault(key, value)


class ReplayFlow(FlowState):
    """The replay flow over one function that can see some captures (a flow-skeleton state)."""

    def __init__(
        self,
        walker: Binder,
        captures: list[Capture],
        returns_static: dict[CallTarget, str],
        final: bool,
    ) -> None:
        self.w = walker
        self.captures = captures
        self.returns_static = returns_static  # same-file functions that replay and return an output
        self.final = final  # the reporting round (the first only finds runners)
        self.facts = _Facts(graph_alias={c.graph: c.graph for c in captures})
        self.inputs: dict[str, str] = {}
        self.unknown_inputs: dict[str, str] = {}  # read in a capture, kind unknown: maybe inputs
        self.unseen: set[str] = set()  # graphs whose capture is not visible: any memory may be an input
        for capture in captures:
            for key in capture.outputs:
                self.facts.outputs.setdefault(key, capture.graph)
            for key in capture.inputs:
                self.inputs.setdefault(key, capture.graph)
            if capture.unknown_reads is None:
                self.unseen.add(capture.graph)
            for key in capture.unknown_reads or ():
                self.unknown_inputs.setdefault(key, capture.graph)
        self.reported: set[tuple[str, int, int]] = set()
        self.loop_replays: list[set[str]] = []
        self.returns_output: str | None = None
        # A cudagraph-mode compiled call starts a new iteration of the tree (freeing the last
        # one's outputs) only when no backward is pending; where this function runs one itself,
        # its calls are not taken as overwrites (torch.compiler.cudagraph_mark_step_begin is).
        self._runs_backward: bool | None = None  # computed at the first such call

    def emit(self, event: object) -> None:
        """Hand an event to the rules, once per kind and position, in the reporting round."""
        node = event.node  # type: ignore[attr-defined]
        key = (event.kind, node.lineno, node.col_offset)  # type: ignore[attr-defined]
        if self.final and key not in self.reported:
            self.reported.add(key)
            self.w.emit(event)

    # -- classification --------------------------------------------------------------------
    def static_output_graph(self, value: ast.AST) -> str | None:
        """Graph whose static output ``value`` aliases (itself, a view, a kept alias)."""
        node = value
        facts = self.facts
        while True:
            key = key_of(node)
            if key is not None:
                if key in facts.outputs:
                    return facts.outputs[key]
                if key in facts.kept and not facts.kept[key].container:
                    return facts.kept[key].graph
            if isinstance(node, ast.Subscript):
                node = node.value
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in _ALIASING_METHODS
            ):
                node = node.func.value
            elif isinstance(node, ast.Attribute) and node.attr in _ALIASING_ATTRS:
                node = node.value
            elif isinstance(node, ast.Call):
                return self._static_call(node)
            else:
                return None

    def replay_of(self, call: ast.Call) -> str | None:
        func = call.func
        if isinstance(func, ast.Attribute) and func.attr == "replay":
            key = key_of(func.value)
            if key is not None:
                alias = self.facts.graph_alias
                return alias.get(key) or (key if key in alias.values() else None)
        return None

    # -- transfer functions ------------------------------------------------------------------
    def fork(self, stmt: ast.stmt) -> tuple[_Facts, list[_Facts]]:
        return self.facts.copy(), []

    def branch(self, stmt: ast.stmt, index: int, start: tuple[_Facts, list[_Facts]]) -> None:
        if index:
            start[1].append(self.facts)
            self.facts = start[0].copy()

    def join(self, stmt: ast.stmt, start: tuple[_Facts, list[_Facts]]) -> None:
        for other in start[1]:
            self.facts.join(other)

    def header(self, expr: ast.expr, stmt: ast.stmt) -> None:
        self.reads(expr)

    def simple(self, stmt: ast.stmt) -> None:
        if isinstance(stmt, ast.Assign):
            self.reads(stmt.value)
            for target in stmt.targets:
                self.assign(target, stmt.value, stmt)
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            self.reads(stmt.value)
            self.assign(stmt.target, stmt.value, stmt)
        elif isinstance(stmt, ast.Return) and stmt.value is not None:
            self.reads(stmt.value)
            graph = self.static_output_graph(stmt.value)
            if graph is not None and self._replays(graph):
                self.returns_output = graph
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, (ast.Yield, ast.YieldFrom)):
            self._yield(stmt.value)
        else:
            for child in ast.iter_child_nodes(stmt):
                if isinstance(child, ast.expr):
                    self.reads(child)

    def _yield(self, value: ast.Yield | ast.YieldFrom) -> None:
        if value.value is None:
            return
        self.reads(value.value)
        graph = self.static_output_graph(value.value)
        if graph is not None and self._in_replay_loop(graph):
            self.emit(OutputYieldedInLoop(value.value, graph))

    def enter_loop(self, stmt: ast.For | ast.AsyncFor | ast.While) -> None:
        replays_here = self._replays_in(stmt.body)
        self.loop_replays.append(replays_here)
        if replays_here:
            self._check_inputs_updated(stmt, replays_here)

    def loop_target(self, stmt: ast.For | ast.AsyncFor) -> None:
        self.kill(stmt.target)

    def exit_loop(self, stmt: ast.For | ast.AsyncFor | ast.While) -> None:
        self.loop_replays.pop()

    def _replays_in(self, body: list[ast.stmt]) -> set[str]:
        found = set()
        for stmt in body:
            for node in ast.walk(stmt):
                if isinstance(node, ast.Call):
                    graph = self.replay_of(node) or self._static_call(node)
                    if graph is not None:
                        found.add(_clock(graph))
                    elif _is_step_begin(self.w, node):
                        found.add(TREE)
        return found

    # -- expressions -----------------------------------------------------------------------
    def reads(self, expr: ast.AST) -> None:
        """Calls (replays, input writes, appends) and reads of kept names, in evaluation order."""
        for node in evaluation_order(expr):
            if isinstance(node, ast.Call):
                self.call(node)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                self.read_key(node.id, node)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
                key = key_of(node)
                if key is not None and key in self.facts.kept:
                    self.read_key(key, node)

    def read_key(self, key: str, node: ast.expr) -> None:
        kept = self.facts.kept.get(key)
        if kept is not None and self._replays(kept.graph) > kept.replays_at:
            self.emit(KeptOutputRead(kept.node, kept.graph, node.lineno))

    def call(self, call: ast.Call) -> None:
        graph = self.replay_of(call)
        if graph is not None:
            self._replayed(graph)
            for node, name, value in self.facts.rebinds.pop(graph, []):
                self.emit(InputRebound(node, name, value, graph))
            return
        func = call.func
        if isinstance(func, ast.Attribute):
            method = func.attr
            if method in ("append", "extend", "insert", "add", "appendleft") and call.args:
                value = call.args[-1]
                graph = self.static_output_graph(value)
                if graph is not None:
                    self._keep(key_of(func.value), value, graph, container=True)
            elif method in _REALLOCATORS:
                # `resize_` proves its receiver a tensor: read in a capture, it is a static input
                owner = self._input_owner(func.value, by_use=method in EVIDENCE_METHODS)
                if owner is not None:
                    self.emit(InputReallocated(call, f"{source_text(func.value)}.{method}()", owner, method))
        graph = self._static_call(call)
        if graph is not None and not (graph.endswith(TREE_SUFFIX) and self._backward_pending()):
            self._replayed(graph)
        elif graph is None and _is_step_begin(self.w, call):
            self._replayed(TREE)

    def _backward_pending(self) -> bool:
        if self._runs_backward is None:
            self._runs_backward = _runs_backward(self.w.body)
        return self._runs_backward

    def _replayed(self, graph: str) -> None:
        clock = _clock(graph)
        self.facts.replays[clock] = self.facts.replays.get(clock, 0) + 1

    def _replays(self, graph: str) -> int:
        """How many replays of ``graph`` the flow has seen (of any function of its tree)."""
        return self.facts.replays.get(_clock(graph), 0)

    def _in_loop(self) -> bool:
        """Inside a loop's body, however deep (the walker's frames say)."""
        return any(frame.kind == "loop" for frame in self.frames)

    def _in_replay_loop(self, graph: str) -> bool:
        return any(_clock(graph) in r for r in self.loop_replays)  # empty outside any loop

    def _input_owner(self, node: ast.AST, by_use: bool = False) -> str | None:
        """The graph ``node`` is a static input of; ``by_use``: the use at hand proves it a
        tensor, so a name of unknown kind read in a capture counts too."""
        key = _root_key(node)
        if key is None:
            return None
        tables = (self.inputs, self.unknown_inputs) if by_use else (self.inputs,)
        for table in tables:
            owner = table.get(key) or table.get(key.split("[", 1)[0])
            if owner is not None:
                return owner
        return None

    def _keep(self, holder: str | None, value: ast.AST, graph: str, container: bool) -> None:
        if holder is None or self._capturing(value, graph) is not None:
            return  # stored while capturing `graph`: the holder gets the static output itself, once
        if container and self._in_replay_loop(graph):
            self.emit(OutputStoredInLoop(value, graph, holder))
            return
        self.facts.kept[holder] = _Kept(value, graph, self._replays(graph), container)

    def assign(self, target: ast.expr, value: ast.expr, stmt: ast.stmt) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self.kill(element)
                self._bound_in_capture(element)
            return
        key = key_of(target)
        if key is None:
            return
        facts = self.facts
        # The graph itself made anew (`self.graph = CUDAGraph()` where it was None): the inputs
        # rebound before are the new capture's set-up, not buffers an old graph still reads.
        facts.rebinds.pop(key, None)
        value_key = key_of(value)  # a graph stored under another name: `self.graphs[bs] = graph`
        if value_key is not None and value_key in facts.graph_alias:
            facts.graph_alias[key] = facts.graph_alias[value_key]
        if isinstance(target, ast.Attribute) and target.attr == "data":
            owner = self._input_owner(target.value)
            if owner is not None:
                self.emit(InputReallocated(target, f"{key} = ...", owner, None))
                return
        owner = self._rebound_input(key, value)
        if owner is not None and self._after_capture(owner, stmt) and not _is_allocation(value):
            facts.rebinds.setdefault(owner, []).append((stmt, key, value))
        self._assign_output(target, key, value)

    def _assign_output(self, target: ast.expr, key: str, value: ast.expr) -> None:
        if self._bound_in_capture(target):
            self.kill(target)
            return
        graph = self.static_output_graph(value)
        if key in self.facts.outputs and graph is None:
            self.kill(target)
            if isinstance(target, ast.Name):
                # `x = torch.rand(...)` outside the capture: from here on `x` is fresh data, not
                # the static output the capture bound (a capture passed later binds it again)
                del self.facts.outputs[key]
            return
        if graph is not None and key not in self.facts.outputs:
            if key.startswith("self.") and not self._replays(graph) and not self._in_loop():
                # `self.output_buffers["hidden"] = hidden` right after the capture: the class
                # now holds the static output under another name, for every method to see.
                self._publish_output(key, graph)
                return
            container = isinstance(target, ast.Subscript) or "." in key
            self._keep(key, value, graph, container)
            return
        self.kill(target)

    def _capturing(self, node: ast.AST, graph: str | None = None) -> Capture | None:
        """The capture of this function (of ``graph``, if given) whose body holds ``node``."""
        line = getattr(node, "lineno", 0)
        for capture in self.captures:
            if (
                capture.function == self.w.qualname
                and capture.line <= line <= capture.end_line
                and (graph is None or capture.graph == graph)
            ):
                return capture
        return None

    def _bound_in_capture(self, target: ast.expr) -> bool:
        """A name or slot a capture of this function binds: a static output again from here on."""
        key = key_of(target)
        capture = self._capturing(target) if key is not None else None
        if key is None or capture is None or key not in capture.outputs:
            return False
        self.facts.outputs[key] = capture.graph
        return True

    def _publish_output(self, key: str, graph: str) -> None:
        self.facts.outputs[key] = graph
        for capture in self.captures:
            if capture.graph == graph:
                capture.outputs.add(key)

    def _static_call(self, value: ast.AST) -> str | None:
        """The graph a call replays when its result is a static output: a runner defined in
        this file, a make_graphed_callables result, a cudagraph-mode torch.compile result."""
        if isinstance(value, ast.Call):
            target = self.w.call_target(value)
            if target is not None and target in self.returns_static:
                return self.returns_static[target]
            callee = self.w.ty(value.func)
            if callee is not None and callee.kind == T.GRAPHED:
                return f"{source_text(value.func)} {TREE_SUFFIX if callee.tree else '(graphed)'}"
        return None

    def kill(self, target: ast.AST) -> None:
        for node in ast.walk(target):
            key = key_of(node)
            if key is not None:
                self.facts.kept.pop(key, None)

    def _capture_end(self, graph: str) -> int:
        lines = [c.end_line for c in self.captures if c.graph == graph and c.function == self.w.qualname]
        return max(lines) if lines else 0

    def _rebound_input(self, key: str, value: ast.expr) -> str | None:
        """The graph whose static input ``key`` is, when binding ``value`` to it discards what the
        graph reads: a tensor input, or one of unknown kind (a TensorDict, a dataclass of tensors)
        given this call's own data, a parameter (`self._inputs = batch`)."""
        if key in self.inputs:
            return self.inputs[key]
        if key in self.unknown_inputs and isinstance(value, ast.Name) and value.id in self._parameters:
            return self.unknown_inputs[key]
        return None

    @cached_property
    def _parameters(self) -> frozenset[str]:
        arguments = getattr(self.w.node, "args", None)
        if not isinstance(arguments, ast.arguments):
            return frozenset()
        return frozenset(a.arg for a in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs))

    def _after_capture(self, graph: str, stmt: ast.stmt) -> bool:
        """Does ``stmt`` run after this function's capture of ``graph``: written after it, or on
        no path with the capture (`if self.graph is None: capture / else: replay`, or a replay
        arm that returns above the capture code), which runs it on a later call, wherever it
        is written?"""
        if stmt.lineno > self._capture_end(graph):
            return True
        return any(never_together(self.w.body, capture, stmt) for capture in self._capture_statements(graph))

    def _capture_statements(self, graph: str) -> list[ast.stmt]:
        lines = {c.line for c in self.captures if c.graph == graph and c.function == self.w.qualname}
        return [s for s in statements(self.w.body) if isinstance(s, (ast.With, ast.AsyncWith)) and s.lineno in lines]

    # -- stale replays -----------------------------------------------------------------------
    def _check_inputs_updated(self, loop: ast.For | ast.AsyncFor | ast.While, graphs: set[str]) -> None:
        fresh = _fresh_names(loop)
        if not fresh:
            return
        for graph in sorted(graphs):
            inputs = self._possible_inputs(graph)
            if inputs is not None and not inputs:
                continue  # a graph that reads no input: nothing to update
            replay, reached = self._first_replay_reached(loop, graph, inputs, fresh)
            if replay is not None and _mentions(replay.func, fresh):
                continue  # `for g in graphs: g.replay()`, `graphs[key(c)].replay()`: the data picks the graph
            if replay is not None and not reached:
                self.emit(StaleReplay(replay, graph, tuple(sorted(fresh))))

    def _possible_inputs(self, graph: str) -> set[str] | None:
        """What may be a static input of ``graph``: the tensors its capture reads and the names
        of unknown kind it reads. None: its capture is not visible and no input is known, so
        any memory the loop writes may be one."""
        inputs = {k for table in (self.inputs, self.unknown_inputs) for k, g in table.items() if g == graph}
        return None if not inputs and graph in self.unseen else inputs

    def _first_replay_reached(
        self, loop: ast.For | ast.AsyncFor | ast.While, graph: str, inputs: set[str] | None, fresh: set[str]
    ) -> tuple[ast.Call | None, bool]:
        """The loop's first replay of ``graph``, and whether fresh data reaches an input before it."""
        replay = None
        derived = set(fresh)
        for stmt in loop.body:
            replay = replay or _first_replay(stmt, self, graph)
            if replay is not None and not _contains(stmt, replay):
                return replay, False
            for node in ast.walk(stmt):
                if replay is not None and node is replay:
                    break
                if self._reaches_input(node, graph, inputs, derived):
                    return replay, True
            if replay is not None:
                return replay, False
        return replay, False

    def _reaches_input(self, node: ast.AST, graph: str, inputs: set[str] | None, derived: set[str]) -> bool:
        if isinstance(node, ast.Call) and self.w.resolve(node.func) in _SEEDERS and _mentions(node, derived):
            derived.add(_SEEDED)  # `torch.manual_seed(seed)`: the iteration's random draws come from it
            return False
        if isinstance(node, ast.Assign):
            if not self._carries(node.value, derived):
                return False
            reached = any(_may_be_input(target, inputs, derived) for target in node.targets)
            for target in node.targets:
                derived |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
            return reached
        if isinstance(node, ast.Call) and self._carries(node, derived):
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr in _INPUT_WRITERS:
                return _may_be_input(func.value, inputs, derived, in_place=True)
            return self._passes_to_unknown_code(node, derived)  # a helper may copy it in: do not guess
        return False

    def _carries(self, node: ast.AST, derived: set[str]) -> bool:
        """Does ``node`` compute from the fresh data: it names it, or draws random numbers
        after the iteration seeded the generator with it?"""
        if _mentions(node, derived):
            return True
        return _SEEDED in derived and any(
            isinstance(n, ast.Call) and (self.w.resolve(n.func) or "").startswith(_RANDOM_DRAWS) for n in ast.walk(node)
        )

    def _passes_to_unknown_code(self, call: ast.Call, derived: set[str]) -> bool:
        name = self.w.resolve(call.func)
        if name is not None and name.startswith(("torch.", "print", "len", "range", "enumerate", "zip", "isinstance")):
            return False
        if isinstance(call.func, ast.Attribute):
            receiver = self.w.ty(call.func.value)
            if receiver is not None and receiver.kind in T.TENSORISH:
                return False
        return any(_mentions(arg, derived) for arg in [*call.args, *(kw.value for kw in call.keywords)])


# Seeding a generator with the iteration's data makes every later draw of the iteration data
# of it: `torch.manual_seed(seed); static_x.copy_(torch.randn(...))` refreshes the input.
_SEEDERS = frozenset(
    {"torch.manual_seed", "torch.random.manual_seed", "torch.cuda.manual_seed", "torch.cuda.manual_seed_all"}
    | {"random.seed", "numpy.random.seed"}
)
_SEEDED = "<generator seeded with fresh data>"
_RANDOM_DRAWS = (
    *(f"torch.{name}" for name in ("rand", "randn", "randint", "randperm", "normal", "bernoulli", "multinomial")),
    "numpy.random.",
    "random.",
)

# The outputs of every cudagraph-mode torch.compile function live in one CUDA graph tree: a call
# of any of them (or torch.compiler.cudagraph_mark_step_begin()) starts a new iteration and frees
# the previous one's outputs for reuse, so all of them count replays on one clock.
TREE_SUFFIX = "(CUDA graph tree)"
TREE = "torch.compile's CUDA graph tree"
_STEP_BEGIN = frozenset({"torch.compiler.cudagraph_mark_step_begin", "torch._inductor.cudagraph_mark_step_begin"})


def _clock(graph: str) -> str:
    return TREE if graph.endswith(TREE_SUFFIX) else graph


def _is_step_begin(walker: Binder, call: ast.Call) -> bool:
    return walker.resolve(call.func) in _STEP_BEGIN


def _runs_backward(body: list[ast.stmt]) -> bool:
    """`loss.backward()` or `torch.autograd.backward/grad(...)` anywhere in the function."""
    for stmt in body:
        for node in ast.walk(stmt):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("backward", "grad")
            ):
                return True
    return False


def _may_be_input(target: ast.AST, inputs: set[str] | None, derived: set[str], in_place: bool = False) -> bool:
    """Is ``target`` (assigned to, or written ``in_place``) possibly a static input? With
    ``inputs`` None (none known), any memory but the fresh data itself, and but a name an
    assignment merely rebinds."""
    if inputs is None:
        root = _root_key(target)
        base = root.split("[", 1)[0].split(".", 1)[0] if root else None
        return (in_place or not isinstance(target, ast.Name)) and base is not None and base not in derived
    key = key_of(target)
    root = _root_key(target)
    return key in inputs or bool(root and (root in inputs or root.split("[", 1)[0] in inputs))


def _fresh_names(loop: ast.For | ast.AsyncFor | ast.While) -> set[str]:
    """Names bound to per-iteration data: the loop target (not a counter) and `x = next(it)`."""
    fresh = set()
    if not isinstance(loop, ast.While) and not _is_counter(loop.iter):
        fresh |= {n.id for n in ast.walk(loop.target) if isinstance(n, ast.Name) and not n.id.startswith("_")}
    for stmt in loop.body:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and _is_next(node.value):
                for target in node.targets:
                    fresh |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
    return fresh


def _first_replay(stmt: ast.stmt, flow: ReplayFlow, graph: str) -> ast.Call | None:
    for node in ast.walk(stmt):
        if isinstance(node, ast.Call) and flow.replay_of(node) == graph:
            return node
    return None


def _contains(stmt: ast.AST, target: ast.AST) -> bool:
    return any(node is target for node in ast.walk(stmt))


def _mentions(node: ast.AST, names: set[str]) -> bool:
    return any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(node))


def _is_counter(iterable: ast.AST) -> bool:
    """`range(n)`, `itertools.count()`: iteration numbers, not data."""
    if isinstance(iterable, ast.Call):
        name = source_text(iterable.func)
        return name in ("range", "itertools.count", "count", "itertools.repeat", "repeat")
    return False


def _is_next(call: ast.Call) -> bool:
    return isinstance(call.func, ast.Name) and call.func.id == "next"


def _is_allocation(value: ast.AST) -> bool:
    """`static_x = torch.zeros(...)` before a new capture is a fresh buffer, not a rebinding."""
    if isinstance(value, ast.Call):
        func = value.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        return name in ("zeros", "ones", "empty", "full", "randn", "rand", "zeros_like", "empty_like", "ones_like")
    return False


def analyze(state: ModuleState, source: str = "") -> None:
    """Run the flow pass over every function that can see a capture of this file.

    Two rounds: the first finds the functions that replay and return a static output
    (runners), the second reports, treating calls of those runners as replays.
    """
    if not state.captures and not any(walker.graphed_calls for walker in state.walkers) and ".replay()" not in source:
        return
    by_function: dict[str, list[Capture]] = {}
    for capture in state.captures:
        by_function.setdefault(capture.function, []).append(capture)
    returns_static: dict[CallTarget, str] = {}
    for round_number in range(2):
        final = round_number == 1
        for walker in state.walkers:
            visible = _visible_captures(walker, by_function)
            if not visible and not returns_static and not walker.graphed_calls:
                continue
            walker.forget_kinds()
            flow = ReplayFlow(walker, visible, returns_static, final)
            walk(flow, walker.body)
            if flow.returns_output is not None:
                for target in _self_targets(walker):
                    returns_static[target] = flow.returns_output
                walker.summary.returns_static = flow.returns_output


def _self_targets(walker: Binder) -> list[CallTarget]:
    """The call targets that run this function, as a caller in this file names them."""
    if walker.class_qualname:
        method = walker.qualname.rsplit(".", 1)[-1]
        targets: list[CallTarget] = [MethodTarget(walker.class_qualname, method)]
        if method in ("__call__", "forward"):
            targets.append(InstanceCall(walker.class_qualname))
        return targets
    return [FunctionTarget(walker.qualname)]


def _conventional_captures(walker: Binder) -> list[Capture]:
    """A function that replays a graph captured elsewhere (passed in, built by a helper):
    its buffers are recognised by PyTorch's documented naming, `static_*`. Those written in
    place (`static_input.copy_(data)`) or rebound are inputs; the others it reads are outputs.
    Only used when no capture of the graph is visible."""
    body = walker.body
    graphs: set[str] = set()
    names: set[str] = set()
    written: set[str] = set()
    for stmt in body:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                if node.func.attr == "replay" and not node.args:
                    graph = key_of(node.func.value)
                    if graph is not None:
                        graphs.add(graph)
                elif node.func.attr in _INPUT_WRITERS:
                    root = _root_key(node.func.value)
                    if root is not None:
                        written.add(root.split("[", 1)[0])
            elif isinstance(node, (ast.Assign, ast.AugAssign)):
                for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                    root = _root_key(target)
                    if root is not None:
                        written.add(root.split("[", 1)[0])
            key = key_of(node) if isinstance(node, (ast.Name, ast.Attribute)) else None
            if key is not None and key.rsplit(".", 1)[-1].startswith("static_"):
                names.add(key)
    if len(graphs) != 1 or not names:
        return []
    capture = Capture(graphs.pop(), 0, 0, walker.qualname, unknown_reads=None)
    capture.inputs = {n for n in names if n in written}
    capture.outputs = names - capture.inputs
    return [capture]


def _visible_captures(walker: Binder, by_function: dict[str, list[Capture]]) -> list[Capture]:
    visible = list(by_function.get(walker.qualname, []))
    for function, captures in by_function.items():
        if function == walker.qualname:
            continue
        for capture in captures:
            shared_self = walker.class_qualname and function.startswith(walker.class_qualname + ".")
            if capture.graph.startswith("self.") and shared_self:
                visible.append(capture)
            elif not capture.graph.startswith("self.") and function.endswith(".<module>"):
                visible.append(capture)  # module-level graphs and buffers, used from functions
    if not visible:
        visible = _conventional_captures(walker)
    return visible
