"""`t.data = new` inside a side stream's block, after the block read `t`.

Assigning `.data` swaps a tensor's memory: the old memory is freed at once unless another
tensor views it, and the caching allocator hands it to the next allocation on the stream that
made it, without waiting for the side stream that is still reading it. FSDP-style hooks do
this to gradients (`param.grad.data = param.grad.data.to(dtype)` under the reduction stream:
fairscale fixed it in a0fe832b with `record_stream`), and optimizers to flat buffers.

The memory the block reads was made before it, by the current stream's work, when the
block's stream was forked from the current one before it (`s.wait_stream(current_stream())`):
that fork is what makes a finding certain; without it the memory may be the side stream's own.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import TYPE_CHECKING

from graphlint.checkers.machinery.core.names import source_text
from graphlint.checkers.machinery.core.syntax import own_expressions, statements
from graphlint.checkers.machinery.flows.stream.stream_certainty import is_fork

if TYPE_CHECKING:
    from graphlint.checkers.machinery.core.module_state import Binder


@dataclass(frozen=True)
class Replacement:
    """The tensor whose memory is swapped (its spelling) and the block's read of it."""

    name: str
    read: ast.AST
    forked: bool  # the block's stream was forked from the current one before the block


def data_replaced(
    walker: Binder, block: ast.With | ast.AsyncWith, stream: ast.expr, target: ast.AST, stmt: ast.stmt
) -> Replacement | None:
    """`t.data = ...` (``target``, in ``stmt``) in ``block``, whose stream is ``stream``: the
    read of `t` the block queued first, when `t` was not made in the block (then its memory
    is the side stream's own). The caller checks that the function records no stream for any
    tensor (`FunctionOrderings.records`)."""
    if not (isinstance(target, ast.Attribute) and target.attr == "data"):
        return None
    name = source_text(target.value)
    if not name:
        return None
    read = None
    for earlier in statements(block.body):
        if earlier is stmt:
            read = read or _first_read([stmt], name, skip=target)
            break
        if _assigns(earlier, name):
            return None  # made (or swapped) on the side stream already: its own memory
        read = read or _first_read(own_expressions(earlier), name, skip=None)
    if read is None:
        return None
    return Replacement(name, read, _forked_before(walker, block, stream))


def _assigns(stmt: ast.stmt, name: str) -> bool:
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [getattr(stmt, "target", None)]
    for target in targets:
        if isinstance(target, ast.Attribute) and target.attr == "data":
            target = target.value
        if target is not None and source_text(target) == name:
            return True
    return False


def _first_read(nodes: list[ast.AST], name: str, skip: ast.AST | None) -> ast.AST | None:
    """The first read of ``name``'s memory in ``nodes``, outside ``skip`` (the assignment's
    target): passed on, an operand, `name.data`, or a method that reads it (`name.to(...)`,
    `name.div_(...)`); not `name.attr` (a Python attribute) nor metadata (`name.size()`)."""
    skipped = {id(node) for node in ast.walk(skip)} if skip is not None else set()
    for root in nodes:
        parents = {id(child): parent for parent in ast.walk(root) for child in ast.iter_child_nodes(parent)}
        for node in ast.walk(root):
            if id(node) in skipped or not isinstance(node, (ast.Attribute, ast.Name)):
                continue
            if isinstance(node.ctx, ast.Load) and source_text(node) == name and _reads_memory(node, parents):
                return node
    return None


def _reads_memory(node: ast.AST, parents: dict[int, ast.AST]) -> bool:
    parent = parents.get(id(node))
    if not isinstance(parent, ast.Attribute):
        return True
    if parent.attr == "data":
        return True
    called = parents.get(id(parent))
    return isinstance(called, ast.Call) and called.func is parent and parent.attr not in _METADATA


_METADATA = frozenset(
    {"size", "dim", "numel", "storage", "untyped_storage", "data_ptr", "stride", "element_size", "is_contiguous"}
)


def _forked_before(walker: Binder, block: ast.With | ast.AsyncWith, stream: ast.expr) -> bool:
    """Is `stream.wait_stream(current_stream())` written before the block in the function?"""
    text = source_text(stream)
    for stmt in walker.body:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Call) and node.lineno < block.lineno and is_fork(walker, node):
                if source_text(node.func.value) == text:  # type: ignore[attr-defined]
                    return True
    return False
