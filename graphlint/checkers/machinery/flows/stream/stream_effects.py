"""What a function does to streams, summarised for the calls into it and out of it.

The stream flow follows one function; ordering often crosses a call. A helper that ends
with `torch.cuda.synchronize()` or `current.wait_stream(self.side)` orders its caller after
the call; a caller that does `h2d.wait_stream(torch.cuda.current_stream())` right before
calling orders what the callee then does on `h2d`; a value returned to the caller is
judged where the caller uses it; a non-blocking host copy handed to a callee that reads it
on the host before any synchronisation is read unsynchronised. An `Effects` is that summary
of one function of the file, computed on demand by running the stream flow quietly over the
callee (the flow hands in its own runner, so this module does not import it) and memoised
per file. Stream names cross the call only where both sides spell the same stream: the
current stream, `self.x` within one class, module globals, and parameters (replaced by the
caller's argument).
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from graphlint.checkers.machinery.core.call_targets import FunctionTarget, InstanceCall, MethodTarget
from graphlint.checkers.machinery.core.names import source_text
from graphlint.checkers.machinery.flows.stream.stream_certainty import ORDERING_METHODS
from graphlint.checkers.machinery.flows.stream.stream_identity import MAIN, UNKNOWN

if TYPE_CHECKING:
    from graphlint.checkers.machinery.core.module_state import Binder, ModuleState

ALL = "<all>"  # every stream: `torch.cuda.synchronize()`
_CURRENT_METHODS = frozenset({"current_stream", "default_stream"})


@dataclass(frozen=True)
class Effects:
    """One function's stream effects, as its callers see them (names in the callee's terms)."""

    joined: frozenset[str] = frozenset()  # streams the entry stream waits for, on every exit
    synced: frozenset[str] = frozenset()  # streams (or ALL) synchronised with the host, on every exit
    unordered_entries: frozenset[str] = frozenset()  # streams entered with no `s.wait_stream(current)` before
    host_reads: frozenset[str] = frozenset()  # parameters read on the host before any synchronisation
    returns_pending: bool = False  # returns a non-blocking device-to-host copy nobody synchronised
    returns_host: bool = False  # every return value is a host tensor (pinned staging buffers)
    returns_from: str | None = None  # a returned tensor was last produced on this stream, not joined
    returns_on: str | None = None  # returned tensors were produced on this stream, joined before the return


NO_EFFECTS = Effects()
Summarise = Callable[["Binder"], Effects]


def callee_walker(w: Binder, call: ast.Call) -> Binder | None:
    """The walker of the same-file function ``call`` runs, when the binder can name it."""
    target = w.call_target(call)
    walkers = _walkers(w.st)
    if isinstance(target, FunctionTarget):
        return walkers.get(target.name)
    if isinstance(target, MethodTarget):
        return walkers.get(f"{target.owner}.{target.name}")
    if isinstance(target, InstanceCall):
        return walkers.get(f"{target.cls}.forward") or walkers.get(f"{target.cls}.__call__")
    return None


def _walkers(st: ModuleState) -> dict[str, Binder]:
    index = st.stream_effects.get("<walkers>")
    if index is None:
        index = st.stream_effects["<walkers>"] = {
            w.qualname: w
            for w in st.walkers
            if not w.is_module and isinstance(w.node, (ast.FunctionDef, ast.AsyncFunctionDef))
        }
    return index  # type: ignore[return-value]


def effects_of(walker: Binder, summarise: Summarise) -> Effects:
    """``walker``'s effects, computed once per file; a recursive call sees no effects."""
    cache = walker.st.stream_effects
    key = f"effects:{walker.qualname}"
    found = cache.get(key)
    if found is None:
        cache[key] = NO_EFFECTS  # recursion guard: a cycle of calls sees no effects
        found = cache[key] = summarise(walker)
    return found  # type: ignore[return-value]


def caller_name(
    name: str, callee: Binder, caller: Binder, call: ast.Call, denote: Callable[[ast.AST], str]
) -> str | None:
    """A stream named in ``callee`` as the caller names it at ``call`` (``denote`` names the
    caller's expressions), or None if it cannot tell."""
    if name == MAIN:
        return denote(call)  # the caller's current stream at the call
    if name in (ALL, UNKNOWN):
        return None if name == UNKNOWN else ALL
    root = name.split(".", 1)[0].split("[", 1)[0]
    if root == "self":
        same_object = isinstance(call.func, ast.Attribute) and source_text(call.func.value) == "self"
        return name if same_object and caller.class_qualname == callee.class_qualname else None
    params = callee.summary.params
    if root in params:
        argument = _argument(call, params.index(root), root)
        if argument is None or name != root:
            return None
        return denote(argument)
    if root not in callee.locals and root in callee.st.module_assigned and not caller.is_local_name(root):
        return name  # a module-level stream both functions read
    return None


def _argument(call: ast.Call, index: int, name: str) -> ast.expr | None:
    for keyword in call.keywords:
        if keyword.arg == name:
            return keyword.value
    if any(isinstance(arg, ast.Starred) for arg in call.args):
        return None
    return call.args[index] if index < len(call.args) else None


def passed_parameter(callee: Binder, call: ast.Call, argument: ast.AST) -> str | None:
    """The callee's parameter that receives ``argument`` at ``call``."""
    params = callee.summary.params
    for keyword in call.keywords:
        if keyword.value is argument and keyword.arg in params:
            return keyword.arg
    if any(isinstance(arg, ast.Starred) for arg in call.args):
        return None
    for index, arg in enumerate(call.args):
        if arg is argument and index < len(params):
            return params[index]
    return None


# -- what the callers do right before calling ------------------------------------------------
def entry_waits(walker: Binder) -> frozenset[str]:
    """Streams that wait for the current stream right before every same-file call of ``walker``.

    `self.h2d.wait_stream(torch.cuda.current_stream())` as the statement before
    `self.reload()` orders the caller's earlier work before what `reload` does on `self.h2d`.
    Only callers in this file count; a function nobody here calls gets nothing.
    """
    cache = walker.st.stream_effects
    key = f"entry:{walker.qualname}"
    found = cache.get(key)
    if found is None:
        found = cache[key] = _entry_waits(walker)
    return found  # type: ignore[return-value]


def _entry_waits(callee: Binder) -> frozenset[str]:
    common: set[str] | None = None
    short = callee.qualname.rsplit(".", 1)[-1]
    for caller, block, index, call in _call_index(callee.st).get(short, ()):
        if caller is callee or callee_walker(caller, call) is not callee:
            continue
        named = (_callee_name(name, caller, callee) for name in _waits_before(block, index))
        waits = {name for name in named if name is not None}
        common = waits if common is None else common & waits
        if not common:
            return frozenset()
    return frozenset(common or ())


_Site = tuple["Binder", list[ast.stmt], int, ast.Call]


def _call_index(st: ModuleState) -> dict[str, list[_Site]]:
    """Every call of the file by the name it calls: caller, statement list, index, call."""
    index = st.stream_effects.get("<calls>")
    if index is None:
        built: dict[str, list[_Site]] = {}
        for caller in st.walkers:
            for block, position, call in _calls_in(caller.body):
                func = call.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
                if name is not None:
                    built.setdefault(name, []).append((caller, block, position, call))
        index = st.stream_effects["<calls>"] = built
    return index  # type: ignore[return-value]  # the file's cache holds what this function put there


def _calls_in(body: list[ast.stmt]) -> Iterator[tuple[list[ast.stmt], int, ast.Call]]:
    """Calls in ``body``, with the statement list and index of their statement."""
    for block in _blocks(body):
        for index, stmt in enumerate(block):
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            for inner in _shallow_nodes(stmt):
                if isinstance(inner, ast.Call):
                    yield block, index, inner


def _blocks(body: list[ast.stmt]) -> Iterator[list[ast.stmt]]:
    yield body
    for stmt in body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for field in ("body", "orelse", "finalbody"):
            inner = getattr(stmt, field, None)
            if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                yield from _blocks(inner)
        for handler in getattr(stmt, "handlers", ()):
            yield from _blocks(handler.body)
        for case in getattr(stmt, "cases", ()):
            yield from _blocks(case.body)


def _shallow_nodes(stmt: ast.stmt) -> Iterator[ast.AST]:
    """The expressions a statement evaluates itself (not its nested blocks)."""
    for field, value in ast.iter_fields(stmt):
        if field in ("body", "orelse", "finalbody", "handlers", "cases"):
            continue
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, ast.AST):
                yield from ast.walk(item)


def _waits_before(block: list[ast.stmt], index: int) -> Iterator[str]:
    """`s.wait_stream(<current stream>)` among the ordering-only statements just before ``index``."""
    for stmt in reversed(block[:index]):
        if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
            return
        call = stmt.value
        if not (isinstance(call.func, ast.Attribute) and call.func.attr in ORDERING_METHODS):
            return
        if call.func.attr == "wait_stream" and call.args and _is_current(call.args[0]):
            yield source_text(call.func.value)


def _is_current(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in _CURRENT_METHODS
        and not node.args
    )


def _callee_name(name: str, caller: Binder, callee: Binder) -> str | None:
    """A stream the caller names, as the callee names it (`self.x` within one class, globals)."""
    root = name.split(".", 1)[0]
    if root == "self":
        return name if caller.class_qualname == callee.class_qualname else None
    if root in callee.st.module_assigned and not caller.is_local_name(root) and root not in callee.locals:
        return name
    return None


def class_entries_ordered(walker: Binder, stream: str, summarise: Summarise) -> bool:
    """Does every other method of the class that enters ``stream`` (`self.x`) wait for the
    current stream first? Then a block freed on `self.x` is reused only after such a wait."""
    if not stream.startswith("self.") or walker.class_qualname is None:
        return True
    for other in walker.st.walkers:
        if other is walker or other.class_qualname != walker.class_qualname or other.is_module:
            continue
        if stream in _stream_text(other) and stream in effects_of(other, summarise).unordered_entries:
            return False
    return True


def _stream_text(walker: Binder) -> str:
    """The function's source, to skip summarising methods that never name a stream."""
    cache = walker.st.stream_effects
    key = f"text:{walker.qualname}"
    found = cache.get(key)
    if found is None:
        text = ast.unparse(walker.node)
        found = cache[key] = text if "stream" in text else ""
    return found  # type: ignore[return-value]
