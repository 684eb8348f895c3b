"""A tensor attribute made on a side stream in one method and handed out by another (GL302).

One method computes `self.norm` under `with torch.cuda.stream(self.side):` and leaves the
method without making anything wait for that stream; a property or getter of the same class
returns `self.norm` with no wait either. Whoever calls the getter reads the tensor on its own
current stream while the side stream may still be writing it (apex fixed this in its
distributed Adam's `L2_grad_norm`: gradients were clipped by a norm still being reduced).

The class shows the whole story when the writer orders nothing after its block and the getter
orders nothing at all, so the finding is certain (default set). A getter that
waits, or a writer that joins the side stream after its block, gives none.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from graphlint.checkers.machinery.core.names import source_text
from graphlint.checkers.machinery.core.syntax import statements

if TYPE_CHECKING:
    from graphlint.checkers.machinery.core.module_state import Binder

# Calls after which a stream's earlier work may be ordered for what follows. In the writer, after
# its block, `x.wait()` counts only where the method records x (an event) or hands it a stream:
# a collective's `work.wait()` orders the collective for the current stream, not the side stream
# for anyone. In the getter any `wait()` counts: it may be the event that orders it.
_ORDERING_METHODS = frozenset({"wait_stream", "wait_event", "synchronize", "record_stream", "barrier"})
_NOT_SIDE = ("current_stream", "default_stream")


@dataclass(frozen=True)
class SideAttributeReturned:
    kind: ClassVar[str] = "side-attribute-returned"
    node: ast.AST  # the `self.attr` returned
    attr: str
    stream: str  # the side stream, as the writer spells it
    writer: str  # the method that writes it there
    line: int  # where


class _MethodCall(ast.Call):
    func: ast.Attribute  # for the type checker: a call of an attribute


@dataclass(frozen=True)
class _Written:
    stream: str
    writer: str
    line: int


def returned_side_attributes(walker: Binder) -> list[SideAttributeReturned]:
    """The `return self.attr` of this method whose attribute another method of the class wrote
    on a side stream and left unordered, with no ordering anywhere in this method."""
    if not walker.class_qualname or walker.is_module:
        return []
    written = _side_written(walker)
    if not written:
        return []
    method = walker.qualname.rsplit(".", 1)[-1]
    # A wait anywhere in the getter, even after this return (on another path, which a flag or
    # the capture state may tie to this one), may be the ordering: only a getter that orders
    # nothing at all shows the whole story.
    getter_orders = _orders_anywhere(walker.body)
    found = []
    for stmt in statements(walker.body):
        if not isinstance(stmt, ast.Return) or stmt.value is None:
            continue
        for node in _returned_attributes(stmt.value):
            entry = written.get(node.attr)
            if entry is None or entry.writer == method or getter_orders:
                continue
            found.append(SideAttributeReturned(node, node.attr, entry.stream, entry.writer, entry.line))
    return found


def _returned_attributes(value: ast.expr) -> list[ast.Attribute]:
    elements = value.elts if isinstance(value, (ast.Tuple, ast.List)) else [value]
    return [e for e in elements if isinstance(e, ast.Attribute) and _is_self(e.value)]


def _side_written(walker: Binder) -> dict[str, _Written]:
    """attribute -> where a method of the walker's class writes it in a side stream's block that
    nothing in that method orders afterwards. Computed once per class."""
    qualname = walker.class_qualname or ""
    cache = walker.st.side_written_attributes
    if qualname not in cache:
        node = walker.st.class_nodes.get(qualname)
        found: dict[str, _Written] = {}
        for method in node.body if node is not None else []:
            if isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for block, stream in side_blocks(walker, method):
                    if not _orders_after(method.body, block.end_lineno or block.lineno):
                        for attr, line in _attributes_written(block.body):
                            found.setdefault(attr, _Written(stream, method.name, line))
        cache[qualname] = found
    return cache[qualname]


def side_blocks(walker: Binder, method: ast.FunctionDef | ast.AsyncFunctionDef) -> list[tuple[ast.With, str]]:
    blocks = []
    for stmt in statements(method.body):
        if not isinstance(stmt, ast.With):
            continue
        for item in stmt.items:
            context = item.context_expr
            if isinstance(context, ast.Call) and context.args and walker.is_stream_context(context):
                stream = source_text(context.args[0])
                if not any(word in stream for word in _NOT_SIDE):
                    blocks.append((stmt, stream))
    return blocks


def _attributes_written(body: list[ast.stmt]) -> list[tuple[str, int]]:
    """`self.x = <computed>`, `self.x += ...` and `self.x.op_(...)` in a block."""
    written = []
    for stmt in statements(body):
        if isinstance(stmt, ast.Assign) and isinstance(stmt.value, (ast.Call, ast.BinOp)):
            written += [
                (t.attr, stmt.lineno) for t in stmt.targets if isinstance(t, ast.Attribute) and _is_self(t.value)
            ]
        elif isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Attribute) and _is_self(stmt.target.value):
            written.append((stmt.target.attr, stmt.lineno))
    return written


def _orders_after(body: list[ast.stmt], line: int) -> bool:
    calls = _calls(body)
    recorded = {source_text(c.func.value) for c in calls if c.func.attr == "record"}
    return any(c.lineno > line and _orders(c, c.func, recorded) for c in calls)


def _orders_anywhere(body: list[ast.stmt]) -> bool:
    return any(c.func.attr == "wait" or _orders(c, c.func, set()) for c in _calls(body))


def _calls(body: list[ast.stmt]) -> list[_MethodCall]:
    calls: list[_MethodCall] = []
    for stmt in body:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                calls.append(node)  # type: ignore[arg-type]  # func narrowed just above
    return calls


def _orders(call: ast.Call, func: ast.Attribute, recorded: set[str]) -> bool:
    if func.attr == "wait":
        return bool(call.args or call.keywords) or source_text(func.value) in recorded
    return func.attr in _ORDERING_METHODS


def _is_self(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) and node.id == "self"
