"""GL109 unjoined-stream-in-capture."""

from __future__ import annotations

import ast
import bisect

from graphlint.checkers.machinery.core.binder import FunctionWalker
from graphlint.checkers.machinery.core.model import COMPILE, GRAPH
from graphlint.checkers.machinery.core.names import source_text
from graphlint.checkers.machinery.core.syntax import walk_no_defs
from graphlint.checkers.machinery.detectors import Detector
from graphlint.checkers.machinery.flows.stream.stream_certainty import ORDERING_METHODS
from graphlint.registry import Rule, declare

RULE = declare(
    Rule(
        code="GL109",
        name="unjoined-stream-in-capture",
        summary=(
            "Inside a capture, `with torch.cuda.stream(s):` where `s` did not first wait on the "
            "capturing stream, or is not joined back (`current_stream().wait_stream(s)` or an "
            "event) before the capture ends."
        ),
        why=(
            "A side stream joins the capture only by waiting on the capturing stream; without "
            "that its work is not in the graph (or the capture fails). A side stream not joined "
            "back leaves the capture unjoined (cudaErrorStreamCaptureUnjoined) or the graph "
            "unordered."
        ),
        example="""
            import torch

            with torch.cuda.graph(g):
                with torch.cuda.stream(side):
                    b = proj(x)
                out = a + b
        """,
        use_instead="""
            import torch

            with torch.cuda.graph(g):
                side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(side):
                    b = proj(x)
                torch.cuda.current_stream().wait_stream(side)
                out = a + b
        """,
        consequences={
            GRAPH: "the side stream's work is left out of the graph or the capture fails as unjoined",
            COMPILE: "the side stream's work is not ordered with the captured graph",
        },
    )
)

_Ordering = tuple[int, str, str, list[str]]  # line, receiver, method, arguments


class UnjoinedStreamInCapture(Detector):
    rule = RULE

    def __init__(self) -> None:
        super().__init__()
        self._function: FunctionWalker | None = None
        self._ordering = _StreamOrdering([])

    def on_stream_context(self, w: FunctionWalker, node: ast.With | ast.AsyncWith, stream: ast.expr) -> None:
        """A side stream inside a capture must fork from and join back to the capture."""
        if isinstance(stream, ast.Call):
            return  # with torch.cuda.stream(torch.cuda.current_stream()) and similar: no fork
        if self._function is not w:  # once per function, not per stream block: linear in the blocks
            self._function, self._ordering = w, _StreamOrdering(_ordering_calls(w))
        text = source_text(stream)
        start = w.st.summary.regions[w.regions[-1]].line if w.regions else getattr(w.node, "lineno", 0)
        forked = self._ordering.forked(text, start, node.lineno) or _waits_first(node.body)
        joined = self._ordering.joined(text, node.end_lineno or node.lineno) or _records_last(node.body, text)
        if forked and joined:
            return
        missing = []
        if not forked:
            missing.append(f"`{text}` does not wait on the capturing stream first")
        if not joined:
            missing.append(f"`{text}` is not joined back (`torch.cuda.current_stream().wait_stream({text})`)")
        w.hazard(RULE.code, node.items[0].context_expr, "side stream in capture: " + " and ".join(missing))


def _waits_first(body: list[ast.stmt]) -> bool:
    """Does the block open by making its own stream wait: `start.wait()` (an event's wait with
    no stream waits on the current one, the block's) or `current_stream().wait_stream(...)`?
    That is the fork, written inside the block instead of before it."""
    call = _statement_call(body[0]) if body else None
    if call is None or not isinstance(call.func, ast.Attribute):
        return False
    method, receiver = call.func.attr, source_text(call.func.value)
    if method == "wait" and not call.args and not call.keywords:
        return True
    return method in ("wait_stream", "wait_event") and receiver.endswith("current_stream()")


def _records_last(body: list[ast.stmt], stream: str) -> bool:
    """Does the block close by recording an event on its stream (`done.record()`,
    `done.record(side)`)? The event marks the end of the side stream's work, and whoever waits
    on it joins the stream back: often another function (a `join()` the next layer calls),
    which this file-level check cannot see. An event recorded before the work marks nothing."""
    call = _statement_call(body[-1]) if body else None
    if call is None or not isinstance(call.func, ast.Attribute) or call.func.attr != "record":
        return False
    return not call.args or (len(call.args) == 1 and source_text(call.args[0]) == stream)


def _statement_call(stmt: ast.stmt) -> ast.Call | None:
    return stmt.value if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) else None


def _ordering_calls(w: FunctionWalker) -> list[_Ordering]:
    """The function's stream-ordering calls (`s.wait_stream(...)`, `e.record()`, ...)."""
    found = []
    for stmt in w.body:
        for node in walk_no_defs(stmt):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                if node.func.attr in ORDERING_METHODS:
                    args = [source_text(a) for a in node.args]
                    found.append((node.lineno, source_text(node.func.value), node.func.attr, args))
    return found


class _StreamOrdering:
    """A function's ordering calls, indexed so that each stream block asks in O(log n):

    - a fork of ``stream`` is ``stream.wait_stream(...)``/``stream.wait_event(...)`` or
      ``e.wait(stream)``;
    - a join is, after the block, ``other.wait_stream(stream)``, a ``wait_event``/``wait`` on
      another receiver, or ``stream.synchronize()``/``torch.cuda.synchronize()``.
    """

    def __init__(self, ordering: list[_Ordering]) -> None:
        forks: dict[str, list[int]] = {}
        self._joined_by_name: dict[str, int] = {}  # stream -> last line that joins it by name
        self._last_wait: dict[str, int] = {}  # receiver -> its last wait_event/wait line
        self._last_global_sync = -1
        for at, receiver, method, args in ordering:
            if method in ("wait_stream", "wait_event"):
                forks.setdefault(receiver, []).append(at)
            if method == "wait":
                for arg in args:
                    forks.setdefault(arg, []).append(at)
            if method == "wait_stream":
                for arg in args:
                    if arg != receiver:
                        self._joined_by_name[arg] = max(self._joined_by_name.get(arg, -1), at)
            if method in ("wait_event", "wait"):
                self._last_wait[receiver] = max(self._last_wait.get(receiver, -1), at)
            if method == "synchronize":
                if receiver == "torch.cuda":
                    self._last_global_sync = max(self._last_global_sync, at)
                else:
                    self._joined_by_name[receiver] = max(self._joined_by_name.get(receiver, -1), at)
        self._forks = {stream: sorted(lines) for stream, lines in forks.items()}
        self._latest_waits = sorted(((at, r) for r, at in self._last_wait.items()), reverse=True)[:2]

    def forked(self, stream: str, start: int, line: int) -> bool:
        """Did ``stream`` wait on something between the start of the capture and ``line``?"""
        lines = self._forks.get(stream, [])
        index = bisect.bisect_left(lines, start)
        return index < len(lines) and lines[index] < line

    def joined(self, stream: str, line: int) -> bool:
        """Is ``stream`` joined back after ``line``?"""
        if self._joined_by_name.get(stream, -1) > line or self._last_global_sync > line:
            return True
        # the last wait of a receiver other than the stream: of the two latest receivers, one is
        return any(at > line for at, receiver in self._latest_waits if receiver != stream)
