"""Process-wide lazy initialisation: `if cls._instance is None: cls._instance = Manager()`.

A singleton kept on a class or in a module global is built by the first call that asks for
it, once in the life of the process. A capture is preceded by eager runs of the work it
records (its warm-up, or GL108 says so), and those build the singleton, so under the capture
the branch is not taken. Even when it is, nothing in it is frozen in a way eager code would
not be: it runs once either way. So the branch is code no capture runs.

Only state that outlives a call counts: a class attribute read through `cls` or the class's
own name, and a module global the function declares `global`. `if self._cache is None:` is
not one: `self` may be an object built per call (a batch's metadata), whose lazy field is
filled again under each capture.
"""

from __future__ import annotations

import ast

from graphlint.checkers.machinery.core.syntax import is_none


def builds_singleton(stmt: ast.If, function: ast.AST) -> bool:
    """Whether ``stmt`` is `if <holder> is None:` whose body assigns that holder, the holder
    being a class attribute or a global of ``function``."""
    test = stmt.test
    if not (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], ast.Is)
        and is_none(test.comparators[0])
    ):
        return False
    holder = test.left
    if not (_class_attribute(holder) or (isinstance(holder, ast.Name) and holder.id in _globals(function))):
        return False
    wanted = ast.unparse(holder)
    return any(ast.unparse(target) == wanted for target in _assigned(stmt.body))


def _class_attribute(node: ast.expr) -> bool:
    """`cls.X` or `Manager.X` (a capitalised name: a class, by the universal convention)."""
    if not isinstance(node, ast.Attribute) or not isinstance(node.value, ast.Name):
        return False
    owner = node.value.id
    return owner == "cls" or owner[:1].isupper()


def _globals(function: ast.AST) -> set[str]:
    names: set[str] = set()
    for stmt in getattr(function, "body", []):
        if isinstance(stmt, ast.Global):
            names.update(stmt.names)
    return names


def _assigned(body: list[ast.stmt]) -> list[ast.expr]:
    """The targets the branch's own statements assign (not its nested blocks: the build is
    the branch's point, not something it may do)."""
    targets: list[ast.expr] = []
    for stmt in body:
        if isinstance(stmt, ast.Assign):
            targets.extend(stmt.targets)
        elif isinstance(stmt, ast.AnnAssign):
            targets.append(stmt.target)
    return targets
