"""Local names that cannot be None where a call passes them: the constant `NOT_NONE`.

A capture often hands a callee a value it has already used: vLLM's encoder graphs capture
`self.visual(pixel_values, None, encoder_metadata=metadata)` right after
`pixel_values = values.pop("pixel_values")` and `metadata = values`. The callee's
`if encoder_metadata is None:` arm, which reads sizes back to the host, never runs under that
capture, yet a constant-only reading cannot tell. Within a block (a function's body, an arm,
a loop's body), a name is known not None from the end of a statement that:

  - dereferences it unconditionally: `n.attr` (not a dunder: `None.__class__` exists),
    `n[...]`, outside the later operands of `and`/`or`, the arms of `x if c else y`,
    comprehensions and lambdas;
  - asserts it: `assert n`, `assert n is not None`;
  - leaves otherwise: `if n is None: return` (`raise`, `continue`, `break`), `if not n: return`,
    with no `else`;
  - binds it to a display (`{...}`, `[...]`, an f-string, a lambda) or to a name already
    known not None (`metadata = values`);

to the end of that block. In the arm of `if n is not None:` (`if n:`, `while n:`, the `else`
of `if n is None:`) it is known not None throughout. Statements of a block run in order on
every path that gets past them, so each fact holds to the block's end, provided nothing binds
the name again from the statement that showed it to there (any binding at all: an
assignment in a branch, a loop target, a walrus, `del`).

A local whose every binding is a plain `name = value` with a value that is never None (a
constant other than None, a display, a comparison, `not x`, `bool(...)`, `len(...)`) is known
not None wherever it is read: `full = True` on one arm and `full = bool(mask)` on the other.

The file phase cannot know what a name holds, only that it is not None; `param_tests` reads
`NOT_NONE` as deciding `p is None` and `p is not None` and nothing else (an empty dict is
falsy).
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator

from graphlint.checkers.machinery.core.syntax import FUNCTION_NODES, exits, own_expressions

NOT_NONE = "<not None>"
# builtins whose result is never None (a module that rebinds one of these names is not expected)
_BUILTINS = frozenset(
    {"bool", "int", "float", "str", "len", "list", "dict", "tuple", "set", "frozenset", "range", "isinstance"}
)
_DISPLAYS = (
    ast.Dict,
    ast.List,
    ast.Tuple,
    ast.Set,
    ast.ListComp,
    ast.DictComp,
    ast.SetComp,
    ast.GeneratorExp,
    ast.JoinedStr,
    ast.Lambda,
)


def is_display(node: ast.expr) -> bool:
    """A value that is never None whatever it holds."""
    return isinstance(node, _DISPLAYS)


Spans = dict[str, list[tuple[int, int]]]  # name -> the (first, last) lines where it is not None


def present_names(function: ast.FunctionDef | ast.AsyncFunctionDef) -> Spans:
    """Each local name known not None, with the line spans where it is (see the module)."""
    lines, values = _bindings(function)
    found: Spans = {name: [(0, sys.maxsize)] for name in _never_none_locals(function, lines, values)}
    _block(function.body, lines, found)
    return found


def holds(found: Spans, name: str, line: int) -> bool:
    """Whether ``name`` is known not None at ``line``."""
    return any(first <= line <= last for first, last in found.get(name, ()))


def _block(body: list[ast.stmt], lines: dict[str, list[int]], found: Spans) -> None:
    """The facts the statements of one block show, to its end, then those of its inner blocks."""
    end = body[-1].end_lineno or body[-1].lineno
    for stmt in body:
        after = (stmt.end_lineno or stmt.lineno) + 1
        for name in _shown_not_none(stmt):
            _note(found, lines, name, (after, end), stmt.lineno)
        alias = _bound_to_present(stmt, found)
        if alias is not None:
            _note(found, lines, alias, (after, end), after)
        for arm, names in _arms(stmt):
            for name in names:
                _note(found, lines, name, (arm[0].lineno, arm[-1].end_lineno or arm[-1].lineno), arm[0].lineno)
        for inner in _inner_blocks(stmt):
            _block(inner, lines, found)


def _note(found: Spans, lines: dict[str, list[int]], name: str, span: tuple[int, int], unbound_from: int) -> None:
    """Record ``span`` for ``name`` unless something binds it between ``unbound_from`` and the span's end."""
    bound = lines.get(name, ())
    if sys.maxsize in bound:
        return  # a global or nonlocal: bound elsewhere, at any time
    if span[0] <= span[1] and not any(unbound_from <= line <= span[1] for line in bound):
        found.setdefault(name, []).append(span)


def _arms(stmt: ast.stmt) -> Iterator[tuple[list[ast.stmt], Iterator[str]]]:
    """The arms a test guards, with the names it shows are not None throughout each."""
    if isinstance(stmt, (ast.If, ast.While)):
        yield stmt.body, _tested_not_none(stmt.test)
    if isinstance(stmt, ast.If) and stmt.orelse:
        yield stmt.orelse, _tested_none(stmt.test)


def _inner_blocks(stmt: ast.stmt) -> Iterator[list[ast.stmt]]:
    """The blocks nested in ``stmt`` (not a definition's: another scope)."""
    if isinstance(stmt, (*FUNCTION_NODES, ast.ClassDef)):
        return
    for field in ("body", "orelse", "finalbody"):
        block = getattr(stmt, field, None)
        if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
            yield block
    for part in (*getattr(stmt, "handlers", ()), *getattr(stmt, "cases", ())):
        if part.body:
            yield part.body


def _never_none_locals(
    function: ast.FunctionDef | ast.AsyncFunctionDef,
    lines: dict[str, list[int]],
    values: dict[str, list[ast.expr | None]],
) -> Iterator[str]:
    """Locals every binding of which gives a value that is never None (`flag = True` on one arm,
    `flag = n > 0` on the other): read anywhere, they hold one of those."""
    args = function.args
    params = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg) if a}
    for name, bound in values.items():
        if name not in params and sys.maxsize not in lines[name] and all(map(_never_none, bound)):
            yield name


def _never_none(value: ast.expr | None) -> bool:
    """Whether ``value`` (None: not a plain `name = value` binding) can never evaluate to None."""
    if value is None:
        return False
    if isinstance(value, ast.Constant):
        return value.value is not None
    if isinstance(value, (ast.Compare, ast.JoinedStr)) or is_display(value):
        return True
    if isinstance(value, ast.UnaryOp):
        return isinstance(value.op, ast.Not)
    if isinstance(value, ast.BoolOp):
        return all(map(_never_none, value.values))
    if isinstance(value, ast.IfExp):
        return _never_none(value.body) and _never_none(value.orelse)
    return isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in _BUILTINS


def _shown_not_none(stmt: ast.stmt) -> Iterator[str]:
    """The names ``stmt`` shows are not None once it completes."""
    if isinstance(stmt, ast.Assert):
        yield from _tested_not_none(stmt.test)
    if isinstance(stmt, ast.If) and not stmt.orelse and exits(stmt.body):
        yield from _tested_none(stmt.test)
    for expr in own_expressions(stmt):
        for node in _unconditional(expr):
            name = _dereferenced(node)
            if name is not None:
                yield name


def _dereferenced(node: ast.AST) -> str | None:
    """`n[...]` or `n.attr`: ``n``, which raises there if None (a dunder does not: `None.__class__`)."""
    if not isinstance(node, (ast.Subscript, ast.Attribute)) or not isinstance(node.value, ast.Name):
        return None
    if isinstance(node, ast.Attribute) and node.attr.startswith("__") and node.attr.endswith("__"):
        return None
    return node.value.id


def _bound_to_present(stmt: ast.stmt, found: Spans) -> str | None:
    """`m = {...}` or `m = n` with ``n`` known not None at this statement: ``m``."""
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)):
        return None
    value = stmt.value
    if is_display(value) or (isinstance(value, ast.Name) and holds(found, value.id, stmt.lineno)):
        return stmt.targets[0].id
    return None


def _tested_not_none(test: ast.expr) -> Iterator[str]:
    """Names that are not None when ``test`` holds: `n`, `n is not None`, `a and b`."""
    if isinstance(test, ast.Name):
        yield test.id
    elif isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        for value in test.values:
            yield from _tested_not_none(value)
    elif _none_comparison(test, ast.IsNot) is not None:
        yield _none_comparison(test, ast.IsNot)  # type: ignore[misc]  # checked just above


def _tested_none(test: ast.expr) -> Iterator[str]:
    """Names that are not None when ``test`` fails: `n is None`, `not n`, `a or b`."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        yield from _tested_not_none(test.operand)
    elif isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or):
        for value in test.values:
            yield from _tested_none(value)
    elif _none_comparison(test, ast.Is) is not None:
        yield _none_comparison(test, ast.Is)  # type: ignore[misc]  # checked just above


def _none_comparison(test: ast.expr, op: type[ast.cmpop]) -> str | None:
    """`n is None` (``op`` Is) or `n is not None` (IsNot): ``n``."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], op)):
        return None
    left, right = test.left, test.comparators[0]
    if isinstance(right, ast.Constant) and right.value is None and isinstance(left, ast.Name):
        return left.id
    if isinstance(left, ast.Constant) and left.value is None and isinstance(right, ast.Name):
        return right.id
    return None


def _unconditional(expr: ast.AST) -> Iterator[ast.AST]:
    """The nodes of ``expr`` that evaluating it always evaluates."""
    stack = [expr]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, ast.BoolOp):
            stack.append(node.values[0])
        elif isinstance(node, ast.IfExp):
            stack.append(node.test)
        elif not isinstance(node, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            stack.extend(ast.iter_child_nodes(node))


def _bindings(
    function: ast.FunctionDef | ast.AsyncFunctionDef,
) -> tuple[dict[str, list[int]], dict[str, list[ast.expr | None]]]:
    """Every line that binds or deletes each name in the function's own scope, and what each
    binding gives where it is a plain `name = value` (None otherwise)."""
    lines: dict[str, list[int]] = {}
    values: dict[str, list[ast.expr | None]] = {}
    plain: dict[int, ast.expr] = {}  # id of a Name target -> the value bound to it
    stack: list[ast.AST] = list(function.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                plain[id(target)] = node.value  # popped before its targets: they are pushed below
        for name in _bound_here(node):
            lines.setdefault(name, []).append(getattr(node, "lineno", 0))
            values.setdefault(name, []).append(plain.get(id(node)))
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            for name in node.names:  # bound elsewhere, at any time: never known here
                lines.setdefault(name, []).append(sys.maxsize)
        if not isinstance(node, (*FUNCTION_NODES, ast.ClassDef, ast.Lambda)):
            stack.extend(ast.iter_child_nodes(node))
    return {name: sorted(found) for name, found in lines.items()}, values


def _bound_here(node: ast.AST) -> Iterator[str]:
    if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
        yield node.id
    elif isinstance(node, (*FUNCTION_NODES, ast.ClassDef)):
        yield node.name
    elif isinstance(node, (ast.Import, ast.ImportFrom)):
        for alias in node.names:
            yield (alias.asname or alias.name).split(".")[0]
    elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and node.name:
        yield node.name
    elif isinstance(node, ast.MatchMapping) and node.rest:
        yield node.rest
