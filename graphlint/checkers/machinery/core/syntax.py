"""Small questions about syntax that several analyses ask: the statements of a body without
entering definitions, the names a target binds, whether a block ends by leaving."""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from typing import Protocol, TypeGuard, cast

from graphlint.checkers.machinery.core.names import source_text

FUNCTION_NODES = (ast.FunctionDef, ast.AsyncFunctionDef)
if sys.version_info >= (3, 11):
    TRY_NODES: tuple[type[ast.Try] | type[ast.TryStar], ...] = (ast.Try, ast.TryStar)
else:  # no `try`/`except*` before Python 3.11
    TRY_NODES = (ast.Try,)


class Located(Protocol):
    """A node with a place in the source (an expression, a statement, an argument, ...): what a
    finding or a region points at. `ast.AST` itself promises no position."""

    @property
    def lineno(self) -> int: ...

    @property
    def col_offset(self) -> int: ...

    @property
    def end_lineno(self) -> int | None: ...

    @property
    def end_col_offset(self) -> int | None: ...


_SCOPES = (*FUNCTION_NODES, ast.ClassDef, ast.Lambda)


# Fields that hold no child node (names, operators, contexts, flags, strings): the walks over
# expressions below, and the binder's and the tensor-use scan's, skip them.
_LEAF_FIELDS = frozenset(
    {"ctx", "op", "ops", "id", "attr", "arg", "kind", "conversion", "type_comment", "is_async", "str", "value_str"}
)
_CHILD_FIELDS: dict[type[ast.AST], tuple[str, ...]] = {}


def child_fields(kind: type[ast.AST]) -> tuple[str, ...]:
    """The fields of an expression node type that hold child nodes, cached per type: a faster
    `ast.iter_child_nodes` for the walks that run over every expression of a tree."""
    fields = _CHILD_FIELDS.get(kind)
    if fields is None:
        leaf = kind is ast.Constant or kind is ast.Name
        fields = () if leaf else tuple(f for f in kind._fields if f not in _LEAF_FIELDS)
        _CHILD_FIELDS[kind] = fields
    return fields


def evaluation_order(expr: ast.AST) -> list[ast.AST]:
    """The nodes of an expression with operands before the operation that uses them
    (arguments before their call), skipping lambda bodies, which do not run here. Contexts and
    operators (`Load`, `Add`) are not listed: nothing is evaluated there."""
    order: list[ast.AST] = []
    stack: list[tuple[ast.AST, bool]] = [(expr, False)]
    while stack:
        node, expanded = stack.pop()
        if expanded:
            order.append(node)
            continue
        kind = type(node)
        if kind is ast.Lambda:
            continue
        stack.append((node, True))
        children: list[ast.AST] = []
        for name in child_fields(kind):
            value = getattr(node, name)
            if type(value) is list:
                children.extend(item for item in value if item is not None)
            elif value is not None:
                children.append(value)
        stack.extend((child, False) for child in reversed(children))
    return order


def own_expressions(stmt: ast.stmt) -> list[ast.AST]:
    """A statement's own expressions: a compound statement's header, a simple one whole."""
    if isinstance(stmt, (ast.If, ast.While)):
        return [stmt.test]
    if isinstance(stmt, (ast.For, ast.AsyncFor)):
        return [stmt.iter]
    if isinstance(stmt, (ast.With, ast.AsyncWith)):
        return [item.context_expr for item in stmt.items]
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Try, ast.Match, *TRY_NODES)):
        return []
    return [stmt]


def statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Every statement in ``body`` and its nested blocks, without entering definitions."""
    stack = list(reversed(body))
    while stack:
        stmt = stack.pop()
        yield stmt
        kind = type(stmt)
        fields = _NESTED.get(kind)
        if fields is None:
            fields = _NESTED[kind] = _nested_fields(kind)
        for name in fields:
            value = getattr(stmt, name)
            if name == "handlers" or name == "cases":
                for part in value:
                    stack.extend(reversed(part.body))
            else:
                stack.extend(reversed(value))


_NESTED: dict[type[ast.stmt], tuple[str, ...]] = {}


def _nested_fields(kind: type[ast.stmt]) -> tuple[str, ...]:
    """The fields of a statement type that hold nested blocks, in the order `statements`
    stacks them; none for definitions, which are their own scopes (cached per type: the
    walk runs over every statement of a tree several times)."""
    if issubclass(kind, (*FUNCTION_NODES, ast.ClassDef)):
        return ()
    return tuple(name for name in ("finalbody", "orelse", "body", "handlers", "cases") if name in kind._fields)


def all_statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Every statement, entering function and class bodies too (imports can be anywhere)."""
    for stmt in statements(body):
        yield stmt
        if isinstance(stmt, (*FUNCTION_NODES, ast.ClassDef)):
            yield from all_statements(stmt.body)


def module_level_statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Top-level statements, looking into module-level if/try blocks (import guards)."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, ast.If):
            yield from module_level_statements(stmt.body)
            yield from module_level_statements(stmt.orelse)
        elif isinstance(stmt, ast.Try):
            yield from module_level_statements(stmt.body)
            for handler in stmt.handlers:
                yield from module_level_statements(handler.body)
            yield from module_level_statements(stmt.orelse)


def walk_no_defs(node: ast.AST) -> Iterator[ast.AST]:
    """ast.walk that does not enter nested functions, classes or lambdas."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        for child in ast.iter_child_nodes(current):
            if not isinstance(child, _SCOPES):
                stack.append(child)


def bound_names(target: ast.expr) -> Iterator[str]:
    if isinstance(target, ast.Name):
        yield target.id
    elif isinstance(target, (ast.Tuple, ast.List)):
        for elt in target.elts:
            yield from bound_names(elt.value if isinstance(elt, ast.Starred) else elt)


def assigned_names(node: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """Names a function binds locally (assignment, loop and with targets, handlers)."""
    return set(first_assignments(node))


def first_assignments(node: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, int]:
    """Each name a function binds locally, with the first line that binds it."""
    names: dict[str, int] = {}
    for stmt in statements(node.body):
        targets: list[ast.expr] = []
        if isinstance(stmt, ast.Assign):
            targets = stmt.targets
        elif isinstance(stmt, (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor)):
            targets = [stmt.target]
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            targets = [item.optional_vars for item in stmt.items if item.optional_vars is not None]
        elif isinstance(stmt, (*FUNCTION_NODES, ast.ClassDef)):
            _earliest(names, stmt.name, stmt.lineno)
        elif hasattr(stmt, "handlers"):
            for handler in stmt.handlers:
                if handler.name:
                    _earliest(names, handler.name, handler.lineno)
        for target in targets:
            for name in bound_names(target):
                _earliest(names, name, stmt.lineno)
    return names


def _earliest(names: dict[str, int], name: str, line: int) -> None:
    if line < names.get(name, line + 1):
        names[name] = line


def exits(body: list[ast.stmt]) -> bool:
    return bool(body) and isinstance(body[-1], (ast.Return, ast.Raise, ast.Continue, ast.Break))


def unquoted_annotation(node: ast.expr) -> ast.expr | None:
    """A string annotation (`"np.ndarray"`) as the expression it names; any other as it is;
    None when the string does not parse."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            return ast.parse(node.value, mode="eval").body
        except SyntaxError:
            return None
    return node


def line_of(node: ast.AST) -> int:
    """The first line of ``node``, a node with a position (`Located`) that its type does not show."""
    return cast(Located, node).lineno


def is_none(node: ast.AST | None) -> bool:
    """`None` spelled out: a default, an assigned value, a side of a comparison."""
    return isinstance(node, ast.Constant) and node.value is None


def is_self_attr(node: ast.AST) -> TypeGuard[ast.Attribute]:
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self"


def method_call_receiver(stmt: ast.stmt, method: str) -> str | None:
    """`g.capture_begin()` as a statement: the receiver's text ("g") for ``method``."""
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        func = stmt.value.func
        if isinstance(func, ast.Attribute) and func.attr == method:
            return source_text(func.value)
    return None
