"""Stream identity: which stream an expression denotes, whatever the code called it.

Real code reaches the same stream under many spellings. The current stream is
`torch.cuda.current_stream()`, but also a local bound from it (`current = ...`), an attribute
set from it, an element of a container (`streams = [torch.cuda.current_stream(), cp]`, then
`streams[0]`), and the same call through an accelerator abstraction: DeepSpeed's
`get_accelerator().current_stream()`, `torch.accelerator.current_stream()`,
`torch.get_device_module(d).current_stream()` (or a module bound from it), vLLM's
`current_platform.current_stream()`. Comparing source text makes each spelling a stream of
its own, so a wait on one never orders another and every correctly ordered hand-off looks
like a race.

Two parts: `device_module_member` canonicalises the accelerator family to `torch.cuda.*`
(the binder's `resolve` calls it, so value kinds, stream contexts and the stream flow all see
one name), and `StreamNames` keeps, in statement order, what each local and container holds.
A stream this cannot pin down is `UNKNOWN`, and the stream flow never reports on it alone.
"""

from __future__ import annotations

import ast
import re
from typing import TYPE_CHECKING

from graphlint.checkers.machinery.core import kinds as T
from graphlint.checkers.machinery.core.names import DEVICE_STREAM_OPS, source_text
from graphlint.checkers.machinery.core.syntax import is_self_attr

if TYPE_CHECKING:
    from graphlint.checkers.machinery.core.module_state import Binder

MAIN = "<current>"  # the stream current when the function was entered
UNKNOWN = "<unknown>"  # a stream this analysis cannot name (`streams[i]`, branches that disagree)

# What a device module (torch.cuda, torch.accelerator, get_accelerator(), ...) offers for
# streams and events: the same operations whatever the module is called.
STREAM_FAMILY = DEVICE_STREAM_OPS
CURRENT_STREAM = "torch.cuda.current_stream"
DEFAULT_STREAM = "torch.cuda.default_stream"
_DEVICE_MODULE_FACTORIES = frozenset({"torch.get_device_module"})
_FACTORY_TAILS = frozenset({"get_accelerator"})  # deepspeed.accelerator.get_accelerator and re-exports


def is_device_module_factory(name: str) -> bool:
    """A call that returns a device module: `get_accelerator()`, `torch.get_device_module(d)`."""
    return name in _DEVICE_MODULE_FACTORIES or name.rsplit(".", 1)[-1] in _FACTORY_TAILS


def device_module_member(walker: Binder, node: ast.AST) -> str | None:
    """`get_accelerator().stream`, `self._device_module.Event`, `acc.current_stream` -> the
    `torch.cuda` name of the same operation (the graph capture context, `.graph`, too); None
    for anything else."""
    if not isinstance(node, ast.Attribute) or (node.attr not in STREAM_FAMILY and node.attr != "graph"):
        return None
    base = node.value
    if isinstance(base, ast.Call):
        name = walker.resolve(base.func) or (
            source_text(base.func) if isinstance(base.func, (ast.Name, ast.Attribute)) else ""
        )
        found = is_device_module_factory(name)
    else:
        ty = walker.ty(base)
        found = ty is not None and ty.kind == T.DEVICE_MODULE
    return f"torch.cuda.{node.attr}" if found else None


def current_stream_attributes(walker: Binder) -> frozenset[str]:
    """`self.attr` that every method of the class sets from `current_stream()`/`default_stream()`
    outside any stream context (`self.main_stream = torch.cuda.current_stream()` in __init__):
    the stream the class's methods run on. An attribute also set from anything else is not."""
    qualname = walker.class_qualname or ""
    node = walker.st.class_nodes.get(qualname)
    if node is None:
        return frozenset()
    cache = walker.st.current_stream_attributes
    if qualname in cache:
        return cache[qualname]
    current: set[str] = set()
    other: set[str] = set()
    for method in node.body:
        if isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)):
            _note_self_stream_assignments(walker, method.body, current, other, inside_stream=False)
    found = cache[qualname] = frozenset(current - other)
    return found


def _note_self_stream_assignments(
    walker: Binder, body: list[ast.stmt], current: set[str], other: set[str], inside_stream: bool
) -> None:
    for stmt in body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if isinstance(stmt, ast.Assign):
            for target in stmt.targets:
                if is_self_attr(target):
                    is_current = not inside_stream and _names_current_call(walker, stmt.value) is not None
                    (current if is_current else other).add(target.attr)
        entered = inside_stream or (
            isinstance(stmt, (ast.With, ast.AsyncWith))
            and any(
                isinstance(item.context_expr, ast.Call) and walker.is_stream_context(item.context_expr)
                for item in stmt.items
            )
        )
        for field in ("body", "orelse", "finalbody"):
            inner = getattr(stmt, field, None)
            if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                _note_self_stream_assignments(walker, inner, current, other, entered)
        for handler in getattr(stmt, "handlers", []):
            _note_self_stream_assignments(walker, handler.body, current, other, entered)
        for case in getattr(stmt, "cases", []):
            _note_self_stream_assignments(walker, case.body, current, other, entered)


def _names_current_call(walker: Binder, node: ast.AST) -> str | None:
    """`torch.cuda.current_stream()` / `default_stream()` in any spelling: which of the two.

    A framework's own getter named for it (`get_current_device_stream_fast()` in SGLang,
    `current_stream()` from vLLM's utils: wrappers of `torch.get_device_module().current_stream()`
    defined in another file, so its body is out of reach here) is the current stream too."""
    if isinstance(node, ast.Call):
        name = walker.resolve(node.func)
        if name in (CURRENT_STREAM, DEFAULT_STREAM):
            return name
        func = node.func
        tail = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if not (name or "").startswith("torch.") and _CURRENT_GETTER.fullmatch(tail.lstrip("_")):
            return CURRENT_STREAM
    return None


def names_current_stream(walker: Binder, node: ast.AST) -> bool:
    """`torch.cuda.current_stream()` in any spelling, a framework's own getter included."""
    return _names_current_call(walker, node) == CURRENT_STREAM


def names_default_stream(walker: Binder, node: ast.AST) -> bool:
    """`torch.cuda.default_stream()` in any spelling (`get_accelerator().default_stream()`)."""
    return _names_current_call(walker, node) == DEFAULT_STREAM


_CURRENT_GETTER = re.compile(r"(get_)?current(_[a-z]+)*_stream(_fast|_cached)?")


class StreamNames:
    """What each local name, `self` attribute and literal container denotes as a stream, kept
    in statement order by the stream flow (bind on assignment, fork/join over branches)."""

    def __init__(self, walker: Binder) -> None:
        self.w = walker
        self.aliases: dict[str, str] = {f"self.{attr}": MAIN for attr in current_stream_attributes(walker)}
        self.containers: dict[str, tuple[str, ...]] = {}
        # Local names bound so far on this path (parameters from the start): a name a branch
        # never bound cannot be read after the join on that path, so that path has no say.
        self.bound: set[str] = {*walker.summary.params, "self", "cls"}
        # Loop counters with a known value on this pass (`for i in range(n)`: 0, then 1): the
        # stream `streams[i]` or `streams[i % 2]` names is then one element, not an unknown.
        self.counters: dict[str, int] = {}

    def denote(self, node: ast.AST, current: str) -> str:
        """The stream ``node`` denotes while ``current`` is the current stream."""
        call = _names_current_call(self.w, node)
        if call == CURRENT_STREAM:
            return current
        if call == DEFAULT_STREAM:
            # The default stream is the one a function is entered on in practice (inside a
            # `with stream(s)` block it is still that one, not `s`).
            return MAIN
        if isinstance(node, ast.Subscript):
            elements = self.containers.get(source_text(node.value))
            if elements is not None:
                return _element(elements, node.slice, self.counters)
        text = source_text(node)
        return self.aliases.get(text, text)

    def bind(self, target: ast.AST, value: ast.AST | None, current: str) -> None:
        """`name = value`: from here on ``name`` denotes what ``value`` denotes, if a stream."""
        if not isinstance(target, (ast.Name, ast.Attribute)):
            return
        key = source_text(target)
        self.aliases.pop(key, None)
        self.containers.pop(key, None)
        self.counters.pop(key, None)
        if isinstance(target, ast.Name):
            self.bound.add(key)
        if value is None:
            return  # bound to something this cannot follow: the name denotes itself
        if isinstance(value, (ast.List, ast.Tuple)):
            if any(self.is_stream(element) for element in value.elts):
                self.containers[key] = tuple(
                    self.denote(element, current)
                    if isinstance(element, (ast.Name, ast.Attribute, ast.Subscript)) or self._names_existing(element)
                    else f"{key}[{index}]"
                    for index, element in enumerate(value.elts)
                )
            return
        if self._names_existing(value):
            denoted = self.denote(value, current)
            if denoted != key:
                self.aliases[key] = denoted

    def _names_existing(self, node: ast.AST) -> bool:
        """A stream that exists already: the current or default one, or one held elsewhere
        (`s = self.side`). A new stream (`s = torch.cuda.Stream()`) is known by its own name."""
        if isinstance(node, ast.Call):
            return _names_current_call(self.w, node) is not None
        return isinstance(node, (ast.Name, ast.Attribute, ast.Subscript)) and self.is_stream(node)

    def is_stream(self, node: ast.AST) -> bool:
        """An expression whose value is a stream: a stream call, a known alias or element."""
        if _names_current_call(self.w, node) is not None:
            return True
        if isinstance(node, ast.Subscript):
            return source_text(node.value) in self.containers
        if isinstance(node, (ast.Name, ast.Attribute)) and source_text(node) in self.aliases:
            return True
        ty = self.w.ty(node)
        return ty is not None and ty.kind == T.STREAM

    def bind_element(self, target: ast.AST, container: ast.AST) -> None:
        """`for s in streams:` over a container of streams: ``s`` is one of them, which is unknown."""
        literal = isinstance(container, (ast.List, ast.Tuple)) and any(self.is_stream(e) for e in container.elts)
        if isinstance(target, ast.Name) and (literal or source_text(container) in self.containers):
            self.aliases[target.id] = UNKNOWN

    # -- branches: a name bound differently on two paths denotes an unknown stream -------
    def snapshot(self) -> _Paths:
        return dict(self.aliases), dict(self.containers), set(self.bound)

    def restore(self, saved: _Paths) -> None:
        self.aliases, self.containers, self.bound = dict(saved[0]), dict(saved[1]), set(saved[2])

    def merge(self, ends: list[_Paths]) -> None:
        """Join the ends of alternative paths (this state is the last path's end): what all
        paths that bound a name agree on; UNKNOWN where they disagree. A name that is the
        current stream on some paths and one other stream on the rest (`stream = self.comm if
        overlap else current_stream()`, as an `if`) is that other stream: on the paths where it
        is the current one, its work is in order anyway, so only the other can race."""
        paths = [*ends, self.snapshot()]
        aliases: dict[str, str] = {}
        for key in set().union(*(path[0] for path in paths)):
            seen = {path[0].get(key, key) for path in paths if _has_say(path, key)}
            if len(seen) == 2 and MAIN in seen and UNKNOWN not in seen:
                seen.discard(MAIN)
            aliases[key] = seen.pop() if len(seen) == 1 else UNKNOWN
        containers: dict[str, tuple[str, ...]] = {}
        for key in set().union(*(path[1] for path in paths)):
            versions = {path[1].get(key) for path in paths if _has_say(path, key)}
            if len(versions) == 1 and None not in versions:
                containers[key] = versions.pop()  # type: ignore[assignment]
        self.aliases, self.containers = aliases, containers
        self.bound = set().union(*(path[2] for path in paths))


_Paths = tuple[dict[str, str], dict[str, tuple[str, ...]], set[str]]


def _has_say(path: _Paths, key: str) -> bool:
    """Does this path's end decide what ``key`` denotes? Not when it never bound the name."""
    return key in path[0] or key in path[1] or "." in key or key in path[2]


def _element(elements: tuple[str, ...], index: ast.AST, counters: dict[str, int]) -> str:
    """`streams[0]`, `streams[-1]`, `streams[i % 2]` on a pass where `i` is known: that
    element; `streams[i]` for an unknown `i`: unknown."""
    position = int_value(index, counters)
    if position is None or not -len(elements) <= position < len(elements):
        return UNKNOWN
    return elements[position]


_INT_OPERATIONS = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Mod: lambda a, b: a % b if b else None,
    ast.FloorDiv: lambda a, b: a // b if b else None,
}


def int_value(node: ast.AST, counters: dict[str, int]) -> int | None:
    """The integer ``node`` evaluates to from constants and known counters, or None."""
    if isinstance(node, ast.Constant):
        value = node.value
        return value if isinstance(value, int) and not isinstance(value, bool) else None
    if isinstance(node, ast.Name):
        return counters.get(node.id)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        operand = int_value(node.operand, counters)
        return None if operand is None else -operand
    if isinstance(node, ast.BinOp) and type(node.op) in _INT_OPERATIONS:
        left, right = int_value(node.left, counters), int_value(node.right, counters)
        if left is None or right is None:
            return None
        return _INT_OPERATIONS[type(node.op)](left, right)  # type: ignore[no-any-return]
    return None


_COMPARISONS = {
    ast.Eq: lambda a, b: a == b,
    ast.NotEq: lambda a, b: a != b,
    ast.Lt: lambda a, b: a < b,
    ast.LtE: lambda a, b: a <= b,
    ast.Gt: lambda a, b: a > b,
    ast.GtE: lambda a, b: a >= b,
}


def counter_test(test: ast.AST, counters: dict[str, int]) -> bool | None:
    """The truth of a branch test on known counters (`i > 0`, `i == 1 and j < 2`), or None
    where any part of it is unknown."""
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and type(test.ops[0]) in _COMPARISONS:
        left, right = int_value(test.left, counters), int_value(test.comparators[0], counters)
        if left is None or right is None:
            return None
        return bool(_COMPARISONS[type(test.ops[0])](left, right))
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = counter_test(test.operand, counters)
        return None if inner is None else not inner
    if isinstance(test, ast.BoolOp):
        values = [counter_test(value, counters) for value in test.values]
        if isinstance(test.op, ast.And):
            return False if False in values else (None if None in values else True)
        return True if True in values else (None if None in values else False)
    return None
