"""What the stream rules (GL3xx) share: the `record_stream` fix, and where it goes.

`x.record_stream(s)` only has to run between the side stream's use and the release: the
allocator waits, at the release, for the work queued on `s` by then. So the fix goes right
after the statement that used `x` on `s`, moved out of the loops that neither bind `x` (or
the stream) nor release it: a record inside a timing loop would run (and be timed) in every
iteration; and out of an `if` whose other arm uses `x` too, where a record in one arm would
leave the other unrecorded. Where `x` may be None at that point (an attribute the class sets to None, a
parameter that defaults to it, a test the code makes), the record is guarded. No fix is
offered where it would record something else than the memory in use: a use that rebinds
the name in the same statement, a name that holds a container, a stream that is not an
expression here.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from graphlint.checkers.machinery.core.binder import FunctionWalker
from graphlint.checkers.machinery.core.names import source_text
from graphlint.checkers.machinery.core.syntax import FUNCTION_NODES, bound_names, is_none, walk_no_defs
from graphlint.checkers.machinery.flows.stream.stream_flow import MAIN
from graphlint.findings import Fix
from graphlint.fixing.ops import InsertStatementAfter

_LOOPS = (ast.For, ast.AsyncFor, ast.While)
_CONTAINERS = (ast.Tuple, ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp)


def record_stream_fix(
    w: FunctionWalker, statement: ast.stmt, name: str, stream: str, release: ast.AST | None = None
) -> Fix | None:
    """Insert `name.record_stream(stream)` after ``statement`` (the use of `name` on ``stream``,
    or the hand-off to it), out of the loops that allow it; ``release``: the statement that
    frees the memory, when it is in the function (None: at its end)."""
    if stream == MAIN:
        stream = "torch.cuda.current_stream()"
    if statement.end_lineno is None or not _is_expression(stream) or not _is_expression(name):
        return None
    if _holds_a_container(w, name) or _records_already(w, name, stream):
        return None
    anchor, tests = _placement(w.body, statement, name, {name, *_names_in(stream)}, release)
    record = f"{name}.record_stream({stream})"
    # Right after a use of `name` as a tensor it is one; a hand-off binds it from what may be None
    guard = (rebinds(statement, name) or bool(tests)) and _may_be_none(w, name, tests, statement.lineno)
    code = f"if {name} is not None:\n    {record}" if guard else record
    return Fix(
        "unsafe",
        f"tell the allocator `{stream}` uses `{name}`: `{record}`" + (" where it is not None" if guard else ""),
        (InsertStatementAfter(w.st.span(anchor), code),),
    )


def _placement(
    body: list[ast.stmt], statement: ast.stmt, name: str, names: set[str], release: ast.AST | None
) -> tuple[ast.stmt, list[ast.expr]]:
    """The statement to insert after: ``statement``, or the outermost loop around it that
    neither binds ``names`` nor holds ``release``, with nothing between that does, or the `if`
    whose other arm uses ``name`` too, inside the same `with` (one record after both arms, not
    one in each); and the
    tests of the `if`s the record is moved out of."""
    anchor = statement
    tests: list[ast.expr] = []
    passed: list[ast.expr] = []
    in_block = True  # no `with` passed yet: an `if` here has both arms on the use's stream
    for outer in reversed(_enclosing(body, statement) or []):
        movable = not (release is not None and _contains(outer, release)) and not names & _bound_by(outer)
        if isinstance(outer, _LOOPS):
            if not movable:
                break
            anchor = outer
            tests.extend(passed)
            passed = []
        elif isinstance(outer, ast.If):
            passed.append(outer.test)
            other = outer.orelse if any(_contains(stmt, anchor) for stmt in outer.body) else outer.body
            if movable and in_block and any(_names(stmt, name) for stmt in other):
                anchor = outer
                tests.extend(passed)
                passed = []
        elif isinstance(outer, (ast.With, ast.AsyncWith)):
            in_block = False
    return anchor, tests


def _names(stmt: ast.stmt, name: str) -> bool:
    return any(isinstance(node, (ast.Name, ast.Attribute)) and source_text(node) == name for node in walk_no_defs(stmt))


def _enclosing(body: list[ast.stmt], target: ast.stmt) -> list[ast.stmt] | None:
    """The compound statements around ``target`` in ``body``, outermost first (None: not there)."""
    for stmt in body:
        if stmt is target:
            return []
        if isinstance(stmt, (*FUNCTION_NODES, ast.ClassDef)):
            continue
        for block in _blocks(stmt):
            found = _enclosing(block, target)
            if found is not None:
                return [stmt, *found]
    return None


def _blocks(stmt: ast.stmt) -> Iterator[list[ast.stmt]]:
    for field in ("body", "orelse", "finalbody"):
        block = getattr(stmt, field, None)
        if isinstance(block, list):
            yield block
    for handler in getattr(stmt, "handlers", ()):
        yield handler.body
    for case in getattr(stmt, "cases", ()):
        yield case.body


def _contains(outer: ast.AST, node: ast.AST) -> bool:
    return any(inner is node for inner in ast.walk(outer))


def rebinds(stmt: ast.stmt, name: str) -> bool:
    """`x = x * 2` on the side stream: the old `x` is released by its own use, and a record
    after the statement would name the new tensor."""
    return name in _bound_by(stmt)


def _bound_by(stmt: ast.stmt) -> set[str]:
    """The names ``stmt`` (with its blocks) binds or deletes: targets, loop and `with` variables."""
    names: set[str] = set()
    for node in walk_no_defs(stmt):
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor, ast.NamedExpr)):
            targets = [node.target]
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            targets = [node.optional_vars]
        elif isinstance(node, ast.Delete):
            targets = node.targets
        else:
            continue
        for target in targets:
            names.update(bound_names(target))
            if isinstance(target, (ast.Attribute, ast.Subscript)):
                names.add(source_text(target))
    return names


def _names_in(expression: str) -> set[str]:
    return {node.id for node in ast.walk(ast.parse(expression, mode="eval")) if isinstance(node, ast.Name)}


def _is_expression(text: str) -> bool:
    try:
        ast.parse(text, mode="eval")
    except SyntaxError:
        return False
    return True


def _assignments(w: FunctionWalker) -> Iterator[tuple[str, ast.expr]]:
    """(target text, value) of every plain assignment in the function."""
    for node in walk_no_defs(w.node):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                yield source_text(target), node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            yield source_text(node.target), node.value


def _holds_a_container(w: FunctionWalker, name: str) -> bool:
    """`pair = (x, n)`: the name holds the tensor, it is not one (`record_stream` would fail)."""
    return any(target == name and isinstance(value, _CONTAINERS) for target, value in _assignments(w))


def _records_already(w: FunctionWalker, name: str, stream: str) -> bool:
    """The very record is in the function: inserting it again would not make anything new."""
    wanted = f"{name}.record_stream({stream})"
    return any(
        isinstance(node, ast.Call) and source_text(node) == wanted
        for node in walk_no_defs(w.node)
        if isinstance(node, ast.Call)
    )


def _may_be_none(w: FunctionWalker, name: str, tests: list[ast.expr], line: int) -> bool:
    """Can ``name`` be None where the record runs (``tests``: of the `if`s it was moved out
    of; ``line``: where the name got its value)? Where the code says so: one of those tests
    names it, the function compares it with None, assigns it None before ``line``, or has it
    as a parameter defaulting to None, or it was read from an attribute its class sets to
    None (a prefetcher's `self.next_input = None` after the last batch)."""
    if any(_tests_name(test, name) for test in tests) or any(
        isinstance(node, ast.Compare) and _none_compare(node, name) for node in walk_no_defs(w.node)
    ):
        return True
    sources = {name}
    for target, value in _assignments(w):
        if target == name:
            sources.add(source_text(value))
            none = is_none(value) or (isinstance(value, ast.IfExp) and (is_none(value.body) or is_none(value.orelse)))
            if none and value.lineno <= line:
                return True
    if _parameter_may_be_none(w.node, name):
        return True
    attributes = {source[len("self.") :] for source in sources if source.startswith("self.")}
    return bool(attributes) and _class_sets_none(w, attributes)


def _tests_name(test: ast.expr, name: str) -> bool:
    return any(source_text(node) == name for node in ast.walk(test) if isinstance(node, (ast.Name, ast.Attribute)))


def _none_compare(node: ast.Compare, name: str) -> bool:
    sides = [node.left, *node.comparators]
    return any(source_text(side) == name for side in sides) and any(is_none(side) for side in sides)


def _parameter_may_be_none(function: ast.AST, name: str) -> bool:
    if not isinstance(function, FUNCTION_NODES):
        return False
    arguments = function.args
    positional = [*arguments.posonlyargs, *arguments.args]
    defaults: dict[str, ast.expr | None] = dict(
        zip([a.arg for a in positional][len(positional) - len(arguments.defaults) :], arguments.defaults, strict=True)
    )
    defaults.update((a.arg, d) for a, d in zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True))
    for argument in [*positional, *arguments.kwonlyargs]:
        if argument.arg != name:
            continue
        default = defaults.get(argument.arg)
        annotation = source_text(argument.annotation) if argument.annotation is not None else ""
        return (default is not None and is_none(default)) or "None" in annotation or "Optional" in annotation
    return False


def _class_sets_none(w: FunctionWalker, attributes: set[str]) -> bool:
    """Does a method of the function's class (or its body) set one of ``attributes`` to None?"""
    cls = w.st.class_nodes.get(w.class_qualname) if w.class_qualname else None
    if cls is None:
        return False
    for node in ast.walk(cls):
        if isinstance(node, ast.Assign) and is_none(node.value):
            for target in node.targets:
                text = source_text(target)
                if text in attributes or (text.startswith("self.") and text[len("self.") :] in attributes):
                    return True
    return False
