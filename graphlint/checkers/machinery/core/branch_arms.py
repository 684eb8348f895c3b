"""Which arm of which branching statement a statement sits in, within one function body.

Two statements in different arms of one `if`, `match` or `try` never run on the same path. The
stream flow orders waits by it, and the replay flow uses it to tell capture from replay in
functions that capture on one call and replay on the next (`if self.graph is None: capture`).
Both flows need the same answer, so it lives in the core, which knows no flow.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from graphlint.checkers.machinery.core.syntax import TRY_NODES

Arm = tuple[ast.stmt, str]  # a branch of a statement: the `if` and "body", the `try` and "handler0"


def exclusive(body: list[ast.stmt], first: ast.stmt, second: ast.stmt) -> bool:
    """Are the two in different arms of one `if`, `match` or `try` (its handlers, its `else`)?
    Then no path runs both, and an ordering in one cannot order the other."""
    one, other = arms_around(body, first), arms_around(body, second)
    if one is None or other is None:
        return False
    fields = dict(one)
    return any(stmt in fields and fields[stmt] != field for stmt, field in other)


def never_together(body: list[ast.stmt], first: ast.stmt, second: ast.stmt) -> bool:
    """No path runs both: different arms of one statement, or one in an arm that returns (or
    raises) before the other, written after that statement, is reached (`if replaying: ...;
    return out` above the capture code)."""
    return exclusive(body, first, second) or _left_before(body, first, second) or _left_before(body, second, first)


def _left_before(body: list[ast.stmt], early: ast.stmt, late: ast.stmt) -> bool:
    """Is ``early`` in an arm that always leaves the function, of a statement ``late`` follows?"""
    for stmt, field in arms_around(body, early) or ():
        arm = _arm_body(stmt, field)
        after = late.lineno > (stmt.end_lineno or stmt.lineno)
        if arm and isinstance(arm[-1], (ast.Return, ast.Raise)) and after and path_to(body, late) is not None:
            return True
    return False


def _arm_body(stmt: ast.stmt, field: str) -> list[ast.stmt]:
    return next((arm for name, arm in _branch_arms(stmt) if name == field), [])


def arms_around(body: list[ast.stmt], target: ast.stmt) -> tuple[Arm, ...] | None:
    """The branch arms (statement, field) around ``target`` in ``body`` that only some paths
    run, or None if absent."""
    path = path_to(body, target)
    return None if path is None else tuple(arm for arm in path if arm[1])


def path_to(body: list[ast.stmt], target: ast.stmt, held: tuple[Arm, ...] = ()) -> tuple[Arm, ...] | None:
    """Every arm (statement, field; "" where all paths run it) around ``target``, outermost first."""
    for stmt in body:
        if stmt is target:
            return held
        for field, arm in _branch_arms(stmt):
            found = path_to(arm, target, (*held, (stmt, field)))
            if found is not None:
                return found
    return None


def _branch_arms(stmt: ast.stmt) -> Iterator[tuple[str, list[ast.stmt]]]:
    """Each statement list inside ``stmt``, named by its arm when only some paths run it
    (`body`/`orelse` of an `if`, a case, a handler), unnamed ("") when every path does."""
    if isinstance(stmt, ast.If):
        yield "body", stmt.body
        yield "orelse", stmt.orelse
    elif isinstance(stmt, ast.Match):
        for index, case in enumerate(stmt.cases):
            yield f"case{index}", case.body
    elif isinstance(stmt, TRY_NODES):
        yield "", stmt.body  # type: ignore[attr-defined]
        for index, handler in enumerate(stmt.handlers):  # type: ignore[attr-defined]
            yield f"handler{index}", handler.body
        yield "orelse", stmt.orelse  # type: ignore[attr-defined]
        yield "", stmt.finalbody  # type: ignore[attr-defined]
    elif isinstance(stmt, (ast.For, ast.AsyncFor, ast.While)):
        yield "", stmt.body
        yield "orelse", stmt.orelse
    elif isinstance(stmt, (ast.With, ast.AsyncWith)):
        yield "", stmt.body
