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
the name again from the statement that showed it to there (any binding a statement makes: an
assignment in a branch, a loop target, `del`, `global`; a walrus inside an expression is not
seen, as the parameters' own rebinding is not in `syntax.first_assignments`).

A local whose every binding is a plain `name = value` with a value that is never None (a
constant other than None, a display, a comparison, `not x`, `bool(...)`, `len(...)`) is known
not None wherever it is read: `full = True` on one arm and `full = bool(mask)` on the other.
So is a parameter the body never binds whose annotation excludes None and whose default is not
None (`metadata: VisionMetadata`, passed on as `forward_metadata=metadata` by SGLang's ViT
graph runners): a type checker holds its callers to that.

The binder asks only about names a call passes by keyword, as far as its last such call
(`FunctionWalker.walk_function`), and the source text tells which statements name them at all:
reading every name of every function cost a tenth of a cold run.

The file phase cannot know what a name holds, only that it is not None; `param_tests` reads
`NOT_NONE` as deciding `p is None` and `p is not None` and nothing else (an empty dict is
falsy).
"""

from __future__ import annotations

import ast
import bisect
import re
import sys
from collections.abc import Iterator, Sequence

from graphlint.checkers.machinery.core.names import dotted_parts
from graphlint.checkers.machinery.core.syntax import (
    FUNCTION_NODES,
    bound_names,
    exits,
    is_none,
    own_expressions,
    statements,
    unquoted_annotation,
)

NOT_NONE = "<not None>"
RECEIVERS = frozenset({"self", "cls"})  # never None, and named by most statements: never asked about
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


def present_names(
    function: ast.FunctionDef | ast.AsyncFunctionDef,
    source: Sequence[str] = (),
    wanted: frozenset[str] | None = None,
    until: int = sys.maxsize,
) -> Spans:
    """Each local name known not None (of ``wanted``, and the names they are bound from, when
    given), with the line spans where it is (see the module), as far as line ``until``.
    ``source``, the module's lines, lets a statement whose text dereferences no such name skip
    the walk for dereferences (most do: that walk is the costly part)."""
    lines, values = _bindings(function)
    candidates = _candidates(function, lines, values, wanted)
    never = (
        name
        for name in (*_never_none_locals(function, lines, values), *_declared_not_none(function, lines, source))
        if name in candidates
    )
    found: Spans = {name: [(0, sys.maxsize)] for name in never}
    if not candidates:
        return found
    mentions = _mentions(function, source, candidates, until) if source else None
    _Reader(lines, found, candidates, mentions, until).block(function.body)
    return found


def _mentions(
    function: ast.FunctionDef | ast.AsyncFunctionDef, source: Sequence[str], candidates: frozenset[str], until: int
) -> dict[int, frozenset[str]]:
    """From the text alone, cheaply: each line naming a candidate, with the candidates it has
    as `name.` or `name[`. A statement that names none shows nothing about them, and one without a
    dereference in its text dereferences none (text inside strings may over-match: a read more)."""
    found = {}
    last = min(function.end_lineno or function.lineno, until, len(source))
    for line in range(function.lineno, last + 1):
        text = source[line - 1]
        if any(name in text for name in candidates) and not candidates.isdisjoint(_WORD.findall(text)):
            found[line] = candidates.intersection(_DEREFERENCED.findall(text))
    return found


_WORD = re.compile(r"\w+")
_DEREFERENCED = re.compile(r"(?<![\w.])(\w+)\s*[.\[]")  # `name.` or `name[`


def holds(found: Spans, name: str, line: int) -> bool:
    """Whether ``name`` is known not None at ``line``."""
    return any(first <= line <= last for first, last in found.get(name, ()))


def _candidates(
    function: ast.FunctionDef | ast.AsyncFunctionDef,
    lines: dict[str, list[int]],
    values: dict[str, list[ast.expr | None]],
    wanted: frozenset[str] | None,
) -> frozenset[str]:
    """The locals worth showing not None: ``wanted`` and the names they are bound from
    (`m = n`), or every local; never `self`, which is never None and in most statements."""
    if wanted is None:
        args = function.args
        names = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg) if a}
        names.update(lines)
    else:
        names = set(wanted)
        for name in wanted:
            names.update(value.id for value in values.get(name, ()) if isinstance(value, ast.Name))
    return frozenset(names.difference(RECEIVERS))


class _Reader:
    """The facts the statements of each block show, to the block's end (see the module)."""

    def __init__(
        self,
        lines: dict[str, list[int]],
        found: Spans,
        candidates: frozenset[str],
        mentions: dict[int, frozenset[str]] | None,
        until: int,
    ) -> None:
        self.lines = lines
        self.found = found
        self.candidates = candidates
        self.mentions = mentions  # None: no source, every statement may name and dereference one
        self.lines_named = sorted(mentions) if mentions is not None else []
        self.until = until

    def block(self, body: list[ast.stmt]) -> None:
        end = body[-1].end_lineno or body[-1].lineno
        for stmt in body:
            if stmt.lineno > self.until:
                return  # nothing asks below: a fact shown here holds only further down
            if not self._names_a_candidate(stmt):
                continue
            after = (stmt.end_lineno or stmt.lineno) + 1
            inner = list(_inner_blocks(stmt))
            for name in _shown_not_none(stmt, self._may_dereference(stmt, inner)):
                self._note(name, (after, end), stmt.lineno)
            alias = _bound_to_present(stmt, self.found)
            if alias is not None:
                self._note(alias, (after, end), after)
            for arm, names in _arms(stmt):
                for name in names:
                    self._note(name, (arm[0].lineno, arm[-1].end_lineno or arm[-1].lineno), arm[0].lineno)
            for block in inner:
                self.block(block)

    def _names_a_candidate(self, stmt: ast.stmt) -> bool:
        """Whether any line of ``stmt`` (its inner blocks included) names a candidate."""
        if self.mentions is None:
            return True
        at = bisect.bisect_left(self.lines_named, stmt.lineno)
        return at < len(self.lines_named) and self.lines_named[at] <= (stmt.end_lineno or stmt.lineno)

    def _may_dereference(self, stmt: ast.stmt, inner: list[list[ast.stmt]]) -> bool:
        """Whether the text of ``stmt``'s own expressions (a compound statement's header) may
        dereference a candidate not already known not None there."""
        if self.mentions is None:
            return True
        last = min(block[0].lineno for block in inner) - 1 if inner else stmt.end_lineno or stmt.lineno
        for line in range(stmt.lineno, max(last, stmt.lineno) + 1):
            if any(not holds(self.found, name, stmt.lineno) for name in self.mentions.get(line, ())):
                return True
        return False

    def _note(self, name: str, span: tuple[int, int], unbound_from: int) -> None:
        """Record ``span`` for ``name`` unless something binds it between ``unbound_from`` and the span's end."""
        if name not in self.candidates:
            return
        bound = self.lines.get(name, ())
        if sys.maxsize in bound:
            return  # a global or nonlocal: bound elsewhere, at any time
        if span[0] <= span[1] and not any(unbound_from <= line <= span[1] for line in bound):
            self.found.setdefault(name, []).append(span)


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


def _declared_not_none(
    function: ast.FunctionDef | ast.AsyncFunctionDef, lines: dict[str, list[int]], source: Sequence[str] = ()
) -> Iterator[str]:
    """Parameters the signature declares never None and the body never rebinds:
    `metadata: VisionMetadata`, `values: dict[str, Tensor]`. A type checker holds every caller
    to that. An annotation that admits None (`Optional[...]`, `X | None`, `Any`, `object`, a bare
    type variable) or a None default (`x: Tensor = None`) declares nothing, and neither does a
    signature whose own body tests the parameter against None: its author does not rely on it."""
    args = function.args
    positional = [*args.posonlyargs, *args.args]
    defaults: dict[str, ast.expr | None] = dict(
        zip([a.arg for a in positional[::-1]], args.defaults[::-1], strict=False)
    )
    defaults.update((a.arg, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True))
    declared = {
        arg.arg
        for arg in (*positional, *args.kwonlyargs)
        if arg.arg not in lines
        and not is_none(defaults.get(arg.arg))
        and arg.annotation is not None
        and _excludes_none(arg.annotation)
    }
    if declared:
        yield from sorted(declared.difference(_compared_with_none(function, source)))


def _compared_with_none(function: ast.FunctionDef | ast.AsyncFunctionDef, source: Sequence[str] = ()) -> set[str]:
    """The names the function's own body compares with None (`p is None`, `None != p`). The
    module's lines, when given, spare the walk of a body whose text never spells `None`."""
    found: set[str] = set()
    if source and not _spells_none(function, source):
        return found
    for node in ast.walk(function):
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            pair = (node.left, node.comparators[0])
            if any(map(is_none, pair)):
                found.update(side.id for side in pair if isinstance(side, ast.Name))
    return found


def _spells_none(function: ast.FunctionDef | ast.AsyncFunctionDef, source: Sequence[str]) -> bool:
    """Whether a line of the function's body has `None` in it (the decorators of a nested
    definition that opens it included; the signature left out: its `x=None` defaults are no
    comparison, and would make most functions spell it)."""
    first = function.body[0]
    start = min([first.lineno, *(d.lineno for d in getattr(first, "decorator_list", ()))])
    last = min(function.end_lineno or function.lineno, len(source))
    return any("None" in source[line - 1] for line in range(start, last + 1))


_ADMITS_NONE = frozenset({"Any", "object", "Optional", "None", "NoneType", "TypeVar"})


def _excludes_none(annotation: ast.expr) -> bool:
    """Whether a value of this annotation is never None (three-valued readings err to False)."""
    node = unquoted_annotation(annotation)  # a forward reference, `"Meta"`
    if node is None or isinstance(node, ast.Constant):
        return False  # unparsable, `None`, or a number
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _excludes_none(node.left) and _excludes_none(node.right)
    if isinstance(node, ast.Subscript):
        if (dotted_parts(node.value) or [""])[-1] == "Union":
            parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            return all(map(_excludes_none, parts))
        return _excludes_none(node.value)  # `dict[str, Tensor]`, `Optional[X]` (no)
    name = (dotted_parts(node) or [""])[-1]
    return bool(name) and name not in _ADMITS_NONE and not (len(name) == 1 and name.isupper())


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


def _shown_not_none(stmt: ast.stmt, may_dereference: bool) -> Iterator[str]:
    """The names ``stmt`` shows are not None once it completes."""
    if isinstance(stmt, ast.Assert):
        yield from _tested_not_none(stmt.test)
    if isinstance(stmt, ast.If) and not stmt.orelse and exits(stmt.body):
        yield from _tested_none(stmt.test)
    if not may_dereference:
        return
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
    """Every line a statement of the function's own scope binds or deletes each name on, and
    what each binding gives where it is a plain `name = value` (None otherwise). Statements
    only, as `syntax.first_assignments` reads them: a walrus inside an expression is not seen."""
    lines: dict[str, list[int]] = {}
    values: dict[str, list[ast.expr | None]] = {}
    for stmt in statements(function.body):
        for name, value in _bound_by(stmt):
            lines.setdefault(name, []).append(sys.maxsize if value is _ANYTIME else stmt.lineno)
            values.setdefault(name, []).append(value if isinstance(value, ast.expr) else None)
    return lines, values


_ANYTIME = object()  # a global or nonlocal name: bound elsewhere, at any time


def _bound_by(stmt: ast.stmt) -> Iterator[tuple[str, object]]:
    """(name, the value a plain `name = value` gives it, else None) for each name ``stmt`` binds."""
    if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] if stmt.value is not None else []
        for target in targets:
            if isinstance(target, ast.Name):
                yield target.id, stmt.value
            else:
                yield from ((name, None) for name in bound_names(target))
    elif isinstance(stmt, (ast.AugAssign, ast.For, ast.AsyncFor)):
        yield from ((name, None) for name in bound_names(stmt.target))
    elif isinstance(stmt, (ast.With, ast.AsyncWith)):
        for item in stmt.items:
            if item.optional_vars is not None:
                yield from ((name, None) for name in bound_names(item.optional_vars))
    elif isinstance(stmt, ast.Delete):
        for target in stmt.targets:
            yield from ((name, None) for name in bound_names(target))
    elif isinstance(stmt, (*FUNCTION_NODES, ast.ClassDef)):
        yield stmt.name, None
    elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
        yield from (((alias.asname or alias.name).split(".")[0], None) for alias in stmt.names)
    elif isinstance(stmt, (ast.Global, ast.Nonlocal)):
        yield from ((name, _ANYTIME) for name in stmt.names)
    else:
        yield from _handler_and_pattern_names(stmt)


def _handler_and_pattern_names(stmt: ast.stmt) -> Iterator[tuple[str, object]]:
    """`except E as name:` and the names a `match` statement's patterns capture."""
    for handler in getattr(stmt, "handlers", ()):
        if handler.name:
            yield handler.name, None
    for case in getattr(stmt, "cases", ()):
        for node in ast.walk(case.pattern):
            name = getattr(node, "name", None) or getattr(node, "rest", None)
            if isinstance(name, str):
                yield name, None
