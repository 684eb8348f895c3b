"""Runner traces: static outputs that cross files through a function that replays and returns.

A runner method in one file replays its graph and returns its static output (the replay
flow marks it `returns_static`); a caller in another file keeps the result across a second
call. The file phase cannot know the callee is a runner, so it records, per function, a
small trace of the calls whose results are kept (a state on the flow skeleton), and the
project phase replays the trace once every function's `returns_static` is known, raising
`RunnerOutputKept` and `RunnerOutputStored` for the rules.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Union

from graphlint.checkers.machinery.core.call_targets import CallTarget
from graphlint.checkers.machinery.core.flow import FlowState, walk
from graphlint.checkers.machinery.core.model import Compact
from graphlint.checkers.machinery.core.syntax import evaluation_order, statements

if TYPE_CHECKING:
    from graphlint.checkers.machinery.core.module_state import Binder, ModuleState

Span = tuple[int, int, int, int]  # line, 0-based column, end line, 0-based end column


# -- the recorded trace (cached in summaries: compact pickles) ---------------------------------
@dataclass
class Read(Compact):
    name: str
    line: int


@dataclass
class Call(Compact):
    target: CallTarget


@dataclass
class Bind(Compact):
    """``name = <call of target>``."""

    target: CallTarget
    name: str
    span: Span


@dataclass
class Store(Compact):
    """``container.append(name)``."""

    name: str
    span: Span


@dataclass
class Kill(Compact):
    name: str


@dataclass
class Loop(Compact):
    events: tuple[TraceEvent, ...]


TraceEvent = Union[Read, Call, Bind, Store, Kill, Loop]  # noqa: UP007 (runtime alias for 3.10)


# -- what the project phase raises -------------------------------------------------------------
@dataclass(frozen=True)
class RunnerOutputKept:
    """The result of a runner call, kept in ``name``, is read after a later call overwrote it."""

    span: Span
    graph: str
    name: str
    read_line: int


@dataclass(frozen=True)
class RunnerOutputStored:
    """A runner's result stored in a container inside a loop that calls the runner again."""

    span: Span
    graph: str
    name: str


EVENTS = (RunnerOutputKept, RunnerOutputStored)


def record(state: ModuleState) -> None:
    """Record the trace of every function that binds a call's result twice or in a loop."""
    for walker in state.walkers:
        bound = _bound_calls(walker)
        if not bound or (max(bound.values()) == 1 and not _has_loop(walker.body)):
            continue  # the trace is kept only for a call bound twice or a loop: none here
        recorder = _Recorder(walker, set(bound))
        walk(recorder, walker.body)
        events = recorder.stack[0]
        if any(isinstance(e, Loop) for e in events) or max(bound.values()) > 1:
            walker.summary.trace = events


def _has_loop(body: list[ast.stmt]) -> bool:
    """A `for` or `while` in the function (not in its nested definitions): the statements a
    recorded `Loop` comes from."""
    return any(isinstance(stmt, (ast.For, ast.AsyncFor, ast.While)) for stmt in statements(body))


def _bound_calls(walker: Binder) -> dict[CallTarget, int]:
    bound: dict[CallTarget, int] = {}
    for stmt in statements(walker.body):
        if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call):
            target = walker.call_target(stmt.value)
            if target is not None:
                bound[target] = bound.get(target, 0) + 1
    return bound


class _Recorder(FlowState):
    loop_passes = 1  # the evaluation runs each recorded loop twice

    def __init__(self, walker: Binder, targets: set[CallTarget]) -> None:
        self.w = walker
        self.targets = targets
        self.stack: list[list[TraceEvent]] = [[]]

    def header(self, expr: ast.expr, stmt: ast.stmt) -> None:
        self.reads(expr)

    def enter_loop(self, stmt: ast.stmt) -> None:
        self.stack.append([])

    def exit_loop(self, stmt: ast.stmt) -> None:
        inner = self.stack.pop()
        self.stack[-1].append(Loop(tuple(inner)))

    def simple(self, stmt: ast.stmt) -> None:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            self.assign(stmt.targets[0].id, stmt.value)
            return
        for child in ast.iter_child_nodes(stmt):
            if isinstance(child, ast.expr):
                self.reads(child)

    def assign(self, name: str, value: ast.expr) -> None:
        target = self.w.call_target(value) if isinstance(value, ast.Call) else None
        if target in self.targets:
            assert isinstance(value, ast.Call)
            for arg in [*value.args, *(kw.value for kw in value.keywords)]:
                self.reads(arg)
            self.stack[-1].append(Bind(target, name, self._span(value)))
            return
        self.reads(value)
        self.stack[-1].append(Kill(name))

    def _span(self, node: ast.AST) -> Span:
        """A node's span with 0-based columns in characters, like the findings' (ast counts bytes)."""
        line, col, end_line, end_col = self.w.st.span(node)
        return line, col - 1, end_line, end_col - 1

    def reads(self, expr: ast.AST) -> None:
        events = self.stack[-1]
        for node in evaluation_order(expr):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                events.append(Read(node.id, node.lineno))
            elif isinstance(node, ast.Call):
                target = self.w.call_target(node)
                if target in self.targets:
                    events.append(Call(target))
                func = node.func
                if isinstance(func, ast.Attribute) and func.attr in ("append", "extend", "insert") and node.args:
                    arg = node.args[-1]
                    if isinstance(arg, ast.Name):
                        events.append(Store(arg.id, self._span(arg)))


# -- evaluation (project phase) ------------------------------------------------------------------
def evaluate(trace: list[TraceEvent], runner_graph: Callable[[CallTarget], str | None]) -> list[object]:
    """Replay a recorded trace; ``runner_graph(target)`` names the graph a runner call replays."""
    evaluation = _Evaluation(runner_graph)
    evaluation.run(trace, frozenset())
    return [evaluation.found[key] for key in sorted(evaluation.found)]


class _Evaluation:
    def __init__(self, runner_graph: Callable[[CallTarget], str | None]) -> None:
        self.runner_graph = runner_graph
        self.replays: dict[str, int] = {}
        self.kept: dict[str, tuple[str, int, Span]] = {}
        self.found: dict[tuple[int, int], object] = {}

    def run(self, events: tuple[TraceEvent, ...] | list[TraceEvent], loop_graphs: frozenset[str]) -> None:
        for event in events:
            if isinstance(event, Loop):
                inner = loop_graphs | frozenset(_graphs(event.events, self.runner_graph))
                for _ in range(2):
                    self.run(event.events, inner)
            elif isinstance(event, Call):
                graph = self.runner_graph(event.target)
                if graph is not None:
                    self.replays[graph] = self.replays.get(graph, 0) + 1
            elif isinstance(event, Bind):
                self.bind(event)
            elif isinstance(event, Read):
                self.read(event)
            elif isinstance(event, Store):
                entry = self.kept.get(event.name)
                if entry is not None and entry[0] in loop_graphs:
                    self.found.setdefault(event.span[:2], RunnerOutputStored(event.span, entry[0], event.name))
            elif isinstance(event, Kill):
                self.kept.pop(event.name, None)

    def bind(self, event: Bind) -> None:
        graph = self.runner_graph(event.target)
        if graph is None:
            self.kept.pop(event.name, None)
            return
        self.replays[graph] = self.replays.get(graph, 0) + 1
        self.kept[event.name] = (graph, self.replays[graph], event.span)

    def read(self, event: Read) -> None:
        entry = self.kept.get(event.name)
        if entry is not None and self.replays.get(entry[0], 0) > entry[1]:
            graph, _, span = entry
            self.found.setdefault(span[:2], RunnerOutputKept(span, graph, event.name, event.line))


def _graphs(events: tuple[TraceEvent, ...], runner_graph: Callable[[CallTarget], str | None]) -> Iterator[str]:
    for event in events:
        if isinstance(event, (Call, Bind)):
            graph = runner_graph(event.target)
            if graph is not None:
                yield graph
        elif isinstance(event, Loop):
            yield from _graphs(event.events, runner_graph)
