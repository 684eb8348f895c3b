"""The statements next to a stream block: the one just before `with torch.cuda.stream(s):` and
the one just after it.

A fork written right before a block (`x.wait_stream(torch.cuda.current_stream())`) is meant for
that block, and a join written right after one (`current.wait_stream(x)`,
`x.record_event().wait()`) is meant for the work it queued. When that wait names another side
stream, the block's own stream is left unordered: the copy-paste slip that apex (a5d51c01) and
Megatron-LM (ae670762) fixed. The stream flow asks this bookkeeping which statement is which;
whether the block's stream is ordered anyway is the flow's call.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import TYPE_CHECKING

from graphlint.checkers.machinery.core.names import source_text

if TYPE_CHECKING:
    from graphlint.checkers.machinery.core.module_state import Binder


@dataclass(frozen=True)
class Exited:
    """A stream block just left: its stream and the flow position at its end."""

    stream: str
    at: int


class BlockNeighbours:
    """Which statement precedes the one being walked, and which block the walk just left."""

    def __init__(self) -> None:
        self.current: ast.stmt | None = None
        self.previous: ast.stmt | None = None
        self._exited: Exited | None = None  # set at a block's end, for the next statement only
        self.after_block: Exited | None = None  # the block the current statement directly follows

    def before(self, stmt: ast.stmt) -> None:
        self.previous, self.current = self.current, stmt
        self.after_block, self._exited = self._exited, None

    def exited(self, stream: str, at: int) -> None:
        self._exited = Exited(stream, at)

    def fork_before(self) -> ast.Call | None:
        """`x.wait_stream(...)` as the whole statement before the current one."""
        call = bare_call(self.previous)
        if call is not None and isinstance(call.func, ast.Attribute) and call.func.attr == "wait_stream" and call.args:
            return call
        return None


def bare_call(stmt: ast.stmt | None) -> ast.Call | None:
    """The call a bare expression statement is (`current.wait_stream(x)`), else None."""
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        return stmt.value
    return None


def joins_anywhere(body: list[ast.stmt], stream: str) -> bool:
    """Does the function join ``stream`` somewhere, by any spelling this can read as text:
    `a.wait_stream(stream)`, `stream.record_event(...)`, `e.record(stream)`, `stream.synchronize()`."""
    for stmt in body:
        for node in ast.walk(stmt):
            if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
                continue
            method, receiver = node.func.attr, source_text(node.func.value)
            if method in ("wait_stream", "record") and any(source_text(arg) == stream for arg in node.args):
                return True
            if method in ("record_event", "synchronize") and receiver == stream:
                return True
    return False


def some_element(stream: str) -> bool:
    """Is ``stream`` an element the flow could not pin down (`streams[i % 2]` of a list bound
    outside the function, a closure's or a parameter's)? Such a block may run on the very stream
    the neighbouring wait names (`streams = [current_stream(), side]`), so a wait that names
    another stream is no evidence of a slip there."""
    try:
        node = ast.parse(stream, mode="eval").body
    except SyntaxError:
        return False
    return isinstance(node, ast.Subscript) and not isinstance(node.slice, ast.Constant)


def enters_later(walker: Binder, body: list[ast.stmt], stream: ast.expr) -> bool:
    """Is there a `with torch.cuda.stream(stream):` (same spelling) in ``body`` after ``stream``'s
    own line: a block the fork that names it may be meant for?"""
    text = source_text(stream)
    for stmt in body:
        for node in ast.walk(stmt):
            if isinstance(node, (ast.With, ast.AsyncWith)) and node.lineno > stream.lineno:
                for item in node.items:
                    context = item.context_expr
                    if isinstance(context, ast.Call) and context.args and walker.is_stream_context(context):
                        if source_text(context.args[0]) == text:
                            return True
    return False
