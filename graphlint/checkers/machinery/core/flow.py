"""The one statement walker: a function body in execution order, driving a `FlowState`.

Every analysis that follows statement order (the binder that gives values their kinds, the
replay flow, the stream flow, the runner trace, the value-fact recorder, the tensor-use scan)
is a state object with transfer functions;
this module alone knows Python's statements, so each analysis covers the same syntax:
`if`/`elif`/`else`, `for`/`while` (with `else`), `with`, `try`/`except`/`except*`/`else`/
`finally`, `match` (case guards included), and nested definitions, which are their own scopes
(a state sees them through `definition` and decides whether to walk them).

Alternatives (the branches of an `if`, the cases of a `match`, the handlers and `else` of a
`try`) are handed to the state as branches: `fork` before them, `branch` at the start of
each, `join` after. A state that keeps facts joins them (union of what may hold); a state
that only needs order leaves the defaults, which take the branches one after another. Loops
run `loop_passes` times (two for the flows: what iteration k leaves behind meets iteration
k+1), like mypy's binder before it iterates to a fixed point.

The walker keeps the compound statements open around its position as typed `Frame`s,
innermost last, and shows them to the state (`FlowState.frames`): a state asks them where it
is (at a body's top level, inside a loop, a `try`, a branch) instead of keeping a stack of
its own. `break` and `continue` reach the state through `jump`, with the loop they leave or
restart, read from the frames; by default they are simple statements. A nested definition
is walked (if at all) by a walk of its own, which starts with no frames.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from graphlint.checkers.machinery.core.syntax import TRY_NODES

_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_LOOPS = (ast.For, ast.AsyncFor, ast.While)
_WITHS = (ast.With, ast.AsyncWith)

Loop: TypeAlias = ast.For | ast.AsyncFor | ast.While
FrameKind = Literal["loop", "else", "with", "try", "alternative"]


@dataclass(slots=True)
class Frame:
    """One compound statement open around the walker's position, and which part of it.

    ``loop``: a loop's body, ``index`` the pass. ``else``: a loop's `else` block, run once the
    loop is done, so no longer in it (a `continue` there belongs to an outer loop). ``with``: a
    `with` body. ``try``: a `try` body (``index`` 0) or its `finally` block (1).
    ``alternative``: branch ``index`` of an `if` (0 the body, 1 the `else`), a `match` (its
    cases) or a `try` (its handlers, then its `else`), as `branch` numbers them.

    Slotted and not frozen (never change one): the walker makes one per block it enters,
    hundreds of thousands on a large tree, and a frozen dataclass's `__init__` costs twice as
    much."""

    kind: FrameKind
    node: ast.stmt
    index: int = 0


class FlowState:
    """Transfer functions of one analysis; every hook defaults to doing nothing."""

    loop_passes = 2
    _frames: tuple[Frame, ...] = ()  # set by the walker only

    @property
    def frames(self) -> tuple[Frame, ...]:
        """The compound statements open around the current statement, innermost last; empty at
        the top level of the walked body."""
        return self._frames

    def pass_count(self, stmt: ast.For | ast.AsyncFor | ast.While) -> int:
        """How many times to walk this loop's body (a state may need more for some loops)."""
        return self.loop_passes

    def simple(self, stmt: ast.stmt) -> None:
        """A statement without blocks: assignments, expressions, return, del, raise, ..."""

    def jump(self, stmt: ast.Break | ast.Continue, loop: Loop | None) -> None:
        """`break` or `continue`, leaving or restarting ``loop`` (the innermost open loop;
        None outside any, which Python rejects when it compiles): by default a simple
        statement, so a state that does not model jumps sees nothing new."""
        self.simple(stmt)

    def header(self, expr: ast.expr, stmt: ast.stmt) -> None:
        """An expression a compound statement evaluates before its blocks (test, iterable,
        context manager, match subject, case guard)."""

    def definition(self, stmt: ast.stmt) -> None:
        """A nested function or class: its own scope."""

    def enter_with(self, stmt: ast.With | ast.AsyncWith) -> None:
        """After the context expressions, before the body."""

    def exit_with(self, stmt: ast.With | ast.AsyncWith) -> None:
        """After the body."""

    def enter_loop(self, stmt: ast.For | ast.AsyncFor | ast.While) -> None:
        """Before the first pass over the body (after the iterable or first test)."""

    def loop_target(self, stmt: ast.For | ast.AsyncFor) -> None:
        """At the start of each pass: the loop variable gets a new value."""

    def exit_loop(self, stmt: ast.For | ast.AsyncFor | ast.While) -> None:
        """After the last pass, before the `else` block."""

    def fork(self, stmt: ast.stmt) -> Any:
        """Before alternatives: what each branch starts from (kept by the walker)."""
        return None

    def branch(self, stmt: ast.stmt, index: int, start: Any) -> None:
        """At the start of alternative ``index`` of ``stmt``."""

    def join(self, stmt: ast.stmt, start: Any) -> None:
        """After all alternatives of ``stmt``."""

    def begin_block(self, body: list[ast.stmt]) -> None:
        """At the start of a statement list."""

    def before(self, stmt: ast.stmt) -> None:
        """Before any statement of a block."""

    def after(self, stmt: ast.stmt) -> None:
        """After any statement of a block."""

    def end_block(self, body: list[ast.stmt]) -> None:
        """At the end of a statement list."""


def walk(state: FlowState, body: list[ast.stmt]) -> None:
    """Run ``state`` over ``body`` in execution order, from no open frames (a state that walks
    a nested definition from a hook gets its own frames back afterwards)."""
    outer = state._frames
    state._frames = ()
    try:
        _Walker(state).block(body)
    finally:
        state._frames = outer


_BLOCK_HOOKS = ("begin_block", "before", "after", "end_block")
_OVERRIDES: dict[type[FlowState], frozenset[str]] = {}


def _overridden(state: FlowState) -> list[Any]:
    """The state's block and statement hooks, each None where it keeps FlowState's empty
    default: the walker then skips a call per statement (the tensor-use scan overrides none).
    Which hooks a class overrides is worked out once per class."""
    kind = type(state)
    names = _OVERRIDES.get(kind)
    if names is None:
        names = frozenset(name for name in _BLOCK_HOOKS if getattr(kind, name) is not getattr(FlowState, name))
        _OVERRIDES[kind] = names
    own = getattr(state, "__dict__", {})  # a hook set on the instance counts too
    return [getattr(state, name) if name in names or name in own else None for name in _BLOCK_HOOKS]


class _Walker:
    def __init__(self, state: FlowState) -> None:
        self.state = state
        self.simple = state.simple
        self.begin_block, self.before, self.after, self.end_block = _overridden(state)

    def block(self, body: list[ast.stmt]) -> None:
        if self.begin_block is not None:
            self.begin_block(body)
        before, after, simple = self.before, self.after, self.simple
        for stmt in body:
            if before is not None:
                before(stmt)
            handler = _COMPOUND.get(type(stmt))
            if handler is None:
                simple(stmt)
            else:
                handler(self, stmt)
            if after is not None:
                after(stmt)
        if self.end_block is not None:
            self.end_block(body)

    def framed(self, kind: FrameKind, node: ast.stmt, index: int, body: list[ast.stmt]) -> None:
        """``body`` inside the frame (kind, node, index); an empty body (most loops' `else`,
        most `finally`s) runs its block hooks without one."""
        if not body:
            self.block(body)
            return
        state = self.state
        outer = state._frames
        state._frames = (*outer, Frame(kind, node, index))
        self.block(body)
        state._frames = outer

    def definition(self, stmt: ast.stmt) -> None:
        self.state.definition(stmt)

    def if_(self, stmt: ast.If) -> None:
        self.state.header(stmt.test, stmt)
        self.alternatives(stmt, alternative_bodies(stmt))

    def try_(self, stmt: ast.Try) -> None:
        self.framed("try", stmt, 0, stmt.body)
        self.alternatives(stmt, alternative_bodies(stmt))
        self.framed("try", stmt, 1, stmt.finalbody)

    def jump(self, stmt: ast.Break | ast.Continue) -> None:
        self.state.jump(stmt, self.innermost_loop())

    def innermost_loop(self) -> Loop | None:
        for frame in reversed(self.state._frames):
            if frame.kind == "loop" and isinstance(frame.node, _LOOPS):
                return frame.node
        return None

    def alternatives(self, stmt: ast.stmt, bodies: list[list[ast.stmt]]) -> None:
        state = self.state
        start = state.fork(stmt)
        for index, body in enumerate(bodies):
            state.branch(stmt, index, start)
            self.framed("alternative", stmt, index, body)
        state.join(stmt, start)

    def loop(self, stmt: Loop) -> None:
        state = self.state
        state.header(stmt.test if isinstance(stmt, ast.While) else stmt.iter, stmt)
        state.enter_loop(stmt)
        for index in range(state.pass_count(stmt)):
            if not isinstance(stmt, ast.While):
                state.loop_target(stmt)
            self.framed("loop", stmt, index, stmt.body)
        state.exit_loop(stmt)
        self.framed("else", stmt, 0, stmt.orelse)

    def with_(self, stmt: ast.With | ast.AsyncWith) -> None:
        state = self.state
        for item in stmt.items:
            state.header(item.context_expr, stmt)
        state.enter_with(stmt)
        self.framed("with", stmt, 0, stmt.body)
        state.exit_with(stmt)

    def match(self, stmt: ast.Match) -> None:
        state = self.state
        state.header(stmt.subject, stmt)
        start = state.fork(stmt)
        for index, case in enumerate(stmt.cases):
            state.branch(stmt, index, start)
            if case.guard is not None:
                state.header(case.guard, stmt)
            self.framed("alternative", stmt, index, case.body)
        state.join(stmt, start)


def alternative_bodies(stmt: ast.stmt) -> list[list[ast.stmt]]:
    """The bodies the walker hands a state as alternatives (`branch` ``index`` is one of them):
    an `if`'s body and `else`, a `try`'s handlers and `else`, a `match`'s cases."""
    if isinstance(stmt, ast.If):
        return [stmt.body, stmt.orelse]
    if isinstance(stmt, ast.Match):
        return [case.body for case in stmt.cases]
    if isinstance(stmt, TRY_NODES):
        return [*(handler.body for handler in stmt.handlers), stmt.orelse]
    return []


# What the walker does with each compound statement, by its exact node type (one dictionary
# lookup per statement instead of a chain of isinstance tests); any other is a simple one.
_COMPOUND: dict[type[ast.stmt], Callable[[_Walker, Any], None]] = {
    **dict.fromkeys(_DEFINITIONS, _Walker.definition),
    ast.If: _Walker.if_,
    **dict.fromkeys(_LOOPS, _Walker.loop),
    **dict.fromkeys(_WITHS, _Walker.with_),
    **dict.fromkeys(TRY_NODES, _Walker.try_),
    ast.Match: _Walker.match,
    ast.Break: _Walker.jump,
    ast.Continue: _Walker.jump,
}
