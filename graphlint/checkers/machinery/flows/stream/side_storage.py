"""Storage a class allocates on a side stream in one method and frees in another (GL301).

Sharded-parameter code keeps one tensor object per parameter and swaps only its storage:
`x.storage().resize_(n)` to gather the full parameter, `x.storage().resize_(0)` to drop it
(often through two tiny helpers, `alloc_storage_(x, size)` and `free_storage_(x)`). When the
gather runs under `with torch.cuda.stream(self.gather):` and the method then joins that stream
into the current one (`current_stream().wait_stream(self.gather)`), the current stream reads
the memory; another method frees it later. The block belongs to the gather stream's pool, so
without `x.record_stream(current_stream())` before the free the allocator hands it to the next
gather at once, and the gather overwrites it while the current stream's queued work still
reads it (fairscale's FSDP dropped that record_stream in #501 and restored it in 196898d6).

The class shows the whole story, and the finding is certain (default set), when:

- the allocating method joins the side stream into the current one after its block (the memory
  is handed over) and makes that stream wait for nothing before the block (a fork there orders
  the next gather's writes after the current stream's earlier reads);
- the freeing method is another one, and orders nothing at all: no `record_stream`, no
  synchronisation, no event, and no wait by a stream it does not name as the class's own other
  stream.

Storage helpers count where they are defined in the same file: a function whose parameter's
storage is resized to a constant 0 frees it, one resized to anything else allocates it.
The key is the attribute's name (`p._full_param_padded` for each parameter `p`).
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from graphlint.checkers.machinery.core.names import source_text
from graphlint.checkers.machinery.core.syntax import statements, walk_no_defs
from graphlint.checkers.machinery.flows.stream.attribute_escapes import side_blocks
from graphlint.checkers.machinery.flows.stream.stream_effects import callee_walker

if TYPE_CHECKING:
    from graphlint.checkers.machinery.core.module_state import Binder

_STORAGE_METHODS = frozenset({"storage", "untyped_storage", "_typed_storage"})
# Any of these in the freeing method may be the ordering the free needs: then it says nothing.
_ORDERING = frozenset({"record_stream", "synchronize", "wait_event", "wait", "barrier", "record_event"})
_FREE, _ALLOC = "free", "alloc"


@dataclass(frozen=True)
class SideStorageFreed:
    """``name``'s storage is freed at ``node``; ``allocator`` allocates it on ``stream``."""

    kind: ClassVar[str] = "side-storage-freed"
    node: ast.stmt
    name: str  # the freed tensor as spelled (`p._full_param_padded`)
    stream: str  # the side stream, as the allocating method spells it
    allocator: str  # the method that allocates it there
    line: int  # where


@dataclass(frozen=True)
class _Allocated:
    stream: str
    method: str
    line: int


def side_storage_frees(walker: Binder) -> list[SideStorageFreed]:
    """The frees in this method of storage another method of its class allocates on a side
    stream and hands to the current one, when this method orders nothing. The caller asks
    first whether the file resizes any storage at all (`resize_` in its text)."""
    if not walker.class_qualname or walker.is_module:
        return []
    allocated = _side_allocated(walker)
    if not allocated:
        return []
    method = walker.qualname.rsplit(".", 1)[-1]
    found = []
    made: set[str] = set()  # tensors this method binds: storage it frees after that is its own
    for stmt in statements(walker.body):
        for attr, target in _storage_changes(walker, stmt, _FREE):
            entry = allocated.get(attr)
            name = source_text(target)
            if entry is None or entry.method == method or name in made or _orders(walker.body, entry.stream):
                continue
            found.append(SideStorageFreed(stmt, name, entry.stream, entry.method, entry.line))
        if isinstance(stmt, ast.Assign):
            made.update(source_text(target) for target in stmt.targets)
    return found


def _side_allocated(walker: Binder) -> dict[str, _Allocated]:
    """attribute -> where a method of the walker's class allocates its storage in a side
    stream's block that the method forks from nothing before and joins after. Once per class."""
    qualname = walker.class_qualname or ""
    key = f"side-storage:{qualname}"
    cache = walker.st.stream_effects
    if key not in cache:
        node = walker.st.class_nodes.get(qualname)
        found: dict[str, _Allocated] = {}
        for method in node.body if node is not None else []:
            if not isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for block, stream in side_blocks(walker, method):
                if not _handed_over(method.body, block, stream):
                    continue
                for stmt in statements(block.body):
                    for attr, _ in _storage_changes(walker, stmt, _ALLOC):
                        found.setdefault(attr, _Allocated(stream, method.name, stmt.lineno))
        cache[key] = found
    return cache[key]  # type: ignore[return-value]


def _handed_over(body: list[ast.stmt], block: ast.With, stream: str) -> bool:
    """Does the method join ``stream`` after ``block`` (`x.wait_stream(stream)`), with no wait
    of ``stream`` itself before the block?"""
    joined = False
    for call in _method_calls(body):
        receiver, method = source_text(call.func.value), call.func.attr  # type: ignore[attr-defined]
        if receiver == stream and method in ("wait_stream", "wait_event") and call.lineno < block.lineno:
            return False
        if method == "wait_stream" and call.lineno > (block.end_lineno or block.lineno):
            joined = joined or any(source_text(arg) == stream for arg in call.args)
    return joined


def _orders(body: list[ast.stmt], stream: str) -> bool:
    """Does the freeing method do anything that may order the free: an ordering call, or a wait
    by ``stream`` or by a stream it does not spell as the class's own (`self....`)?"""
    for call in _method_calls(body):
        receiver, method = source_text(call.func.value), call.func.attr  # type: ignore[attr-defined]
        if method in _ORDERING:
            return True
        if method == "wait_stream" and (receiver == stream or not receiver.startswith("self.")):
            return True
    return False


def _method_calls(body: list[ast.stmt]) -> list[ast.Call]:
    return [
        node
        for stmt in body
        for node in walk_no_defs(stmt)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
    ]


def _storage_changes(walker: Binder, stmt: ast.stmt, change: str) -> list[tuple[str, ast.Attribute]]:
    """The attributes (`obj.attr`) whose storage ``stmt`` frees or allocates (``change``),
    directly (`obj.attr.storage().resize_(0)`) or through a same-file storage helper."""
    found = []
    for node in own_calls(stmt):
        resized = _resized(node)
        if resized is not None:
            target, is_free = resized
            if isinstance(target, ast.Attribute) and is_free == (change == _FREE):
                found.append((target.attr, target))
            continue
        if node.args and isinstance(node.args[0], ast.Attribute) and _helper_change(walker, node) == change:
            found.append((node.args[0].attr, node.args[0]))
    return found


def own_calls(stmt: ast.stmt) -> list[ast.Call]:
    """The calls of ``stmt`` itself, not of the statements nested in it (each is visited)."""
    roots = [child for child in ast.iter_child_nodes(stmt) if isinstance(child, ast.expr)]
    if isinstance(stmt, (ast.With, ast.AsyncWith)):
        roots = [item.context_expr for item in stmt.items]
    return [node for root in roots for node in walk_no_defs(root) if isinstance(node, ast.Call)]


def _resized(call: ast.Call) -> tuple[ast.expr, bool] | None:
    """`x.storage().resize_(n)`: ``x`` and whether ``n`` is the constant 0 (a free)."""
    func = call.func
    if not (isinstance(func, ast.Attribute) and func.attr == "resize_" and len(call.args) == 1):
        return None
    storage = func.value
    if not (isinstance(storage, ast.Call) and isinstance(storage.func, ast.Attribute)):
        return None
    if storage.func.attr not in _STORAGE_METHODS:
        return None
    size = call.args[0]
    return storage.func.value, isinstance(size, ast.Constant) and size.value == 0


def _helper_change(walker: Binder, call: ast.Call) -> str | None:
    """What a same-file function does to its first parameter's storage (`first_parameter_change`)."""
    return helper_summary(walker, call, "storage-helper", first_parameter_change)  # type: ignore[return-value]


def helper_summary(walker: Binder, call: ast.Call, kind: str, summarise: Callable[[Binder], object]) -> object:
    """``summarise`` of the module-level function of this file that ``call`` names, once per
    file and ``kind``; None for any other call (cheapest first: a bare name defined here)."""
    if not isinstance(call.func, ast.Name) or call.func.id not in walker.st.defs:
        return None
    cache = walker.st.stream_effects
    key = f"{kind}:{call.func.id}"
    if key not in cache:
        callee = callee_walker(walker, call)
        cache[key] = summarise(callee) if callee is not None else None
    return cache[key]


def first_parameter_change(callee: Binder) -> str | None:
    """`free` when every resize of the first parameter's storage is to 0, `alloc` when one
    is to anything else, None when the function resizes none."""
    params = callee.summary.params
    if not params:
        return None
    frees = []
    for node in ast.walk(ast.Module(body=callee.body, type_ignores=[])):
        resized = _resized(node) if isinstance(node, ast.Call) else None
        if resized is not None and isinstance(resized[0], ast.Name) and resized[0].id == params[0]:
            frees.append(resized[1])
    if not frees:
        return None
    return _FREE if all(frees) else _ALLOC
