"""Small questions about syntax that several analyses ask: the statements of a body without
entering definitions, the names a target binds, whether a block ends by leaving."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import Protocol, TypeGuard, cast

from graphlint.checkers.machinery.core.names import source_text

FUNCTION_NODES = (ast.FunctionDef, ast.AsyncFunctionDef)


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


def statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Every statement in ``body`` and its nested blocks, without entering definitions."""
    stack = list(reversed(body))
    while stack:
        stmt = stack.pop()
        yield stmt
        if isinstance(stmt, (*FUNCTION_NODES, ast.ClassDef)):
            continue
        for name in ("finalbody", "orelse", "body"):
            block = getattr(stmt, name, None)
            if isinstance(block, list):
                stack.extend(reversed(block))
        for handler in getattr(stmt, "handlers", ()):
            stack.extend(reversed(handler.body))
        for case in getattr(stmt, "cases", ()):
            stack.extend(reversed(case.body))


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
    names: set[str] = set()
    for stmt in statements(node.body):
        targets: list[ast.expr] = []
        if isinstance(stmt, ast.Assign):
            targets = stmt.targets
        elif isinstance(stmt, (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor)):
            targets = [stmt.target]
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            targets = [item.optional_vars for item in stmt.items if item.optional_vars is not None]
        elif isinstance(stmt, (*FUNCTION_NODES, ast.ClassDef)):
            names.add(stmt.name)
        elif hasattr(stmt, "handlers"):
            names.update(h.name for h in stmt.handlers if h.name)
        for target in targets:
            names.update(bound_names(target))
    return names


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


def is_self_attr(node: ast.AST) -> TypeGuard[ast.Attribute]:
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self"


def method_call_receiver(stmt: ast.stmt, method: str) -> str | None:
    """`g.capture_begin()` as a statement: the receiver's text ("g") for ``method``."""
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        func = stmt.value.func
        if isinstance(func, ast.Attribute) and func.attr == method:
            return source_text(func.value)
    return None
