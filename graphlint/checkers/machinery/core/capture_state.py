"""What a test of the capture state says: the library's queries, the facts that hold while
capturing, and the project's own helpers that wrap them.

A branch the code skips while capturing (`if torch.cuda.is_current_stream_capturing(): return`)
is never captured, and the binder leaves its calls and hazards out. Projects rarely spell the
query out at every use: they wrap it once,

    def _capturing() -> bool:
        try:
            return torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()
        except Exception:
            return False

and test the helper (`elif t.is_cuda and _capturing(): skip`). Such a helper is a *capture
predicate*: on every path that can run while capturing it returns true (or, for
`return not capturing()`, false), so testing it is testing the capture state itself.

What this module proves, for a module-level function of the file (the file phase sees no other
file):
  - a return of a query of `CAPTURE_STATE_QUERIES` is true while capturing, `not` turns it,
    `and`/`or` combine as in `capture_value`, a constant is what it is (`return None` and
    falling off the end are false);
  - `HOLDS_WHILE_CAPTURING` are true while capturing (a capture needs CUDA present and
    initialised), so `is_available() and capturing()` is still the capture state;
  - an `if` whose test is decided by the capture state runs one branch only; any other `if`
    runs either;
  - the handlers of a `try` whose calls are all such queries never run while capturing: the
    queries cannot fail while a capture is running (it needed CUDA to start);
  - anything else the body does (loops, other calls, assignments read later) leaves the
    function unproven. A parameter never decides: what a caller passes is unknown here, so a
    device test (`device.type == "cuda" and capturing()`) does not make a predicate.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable, Mapping

from graphlint.checkers.machinery.core.model import FunctionSummary
from graphlint.checkers.machinery.core.names import dotted_parts
from graphlint.checkers.machinery.core.syntax import FUNCTION_NODES, assigned_names

# What a call returns while capturing. The stream query is true in every CUDA graph capture;
# CUDA is then present and initialised.
STREAM_CAPTURE_CALLS: Mapping[str, bool] = {
    "torch.cuda.is_current_stream_capturing": True,
    "torch.cuda.is_available": True,
    "torch.cuda.is_initialized": True,
}
# Dynamo's queries are true while torch.compile traces, not in a raw stream capture: the binder
# takes them as guards (a compile region's tracing), a capture predicate is never built on them.
GUARD_CALLS: Mapping[str, bool] = {
    **STREAM_CAPTURE_CALLS,
    "torch.compiler.is_compiling": True,
    "torch._dynamo.is_compiling": True,
    "torch.compiler.is_dynamo_compiling": True,
}

Resolve = Callable[[ast.expr], "str | None"]
_ANY = "any"  # a return value the capture state does not decide


def guard_calls(predicates: Mapping[str, bool]) -> dict[str, bool]:
    """The calls the binder reads as guards of a branch: the library's and the file's helpers."""
    return {**predicates, **GUARD_CALLS}


def stream_capture_calls(predicates: Mapping[str, bool]) -> dict[str, bool]:
    """The calls whose value is known in every stream capture: the stream query, the file's
    helpers (built on it alone), not Dynamo's queries."""
    return {**predicates, **STREAM_CAPTURE_CALLS}


def short_circuited(test: ast.BoolOp, value: Callable[[ast.expr], bool | None]) -> list[ast.expr]:
    """The operands of ``test`` never evaluated while capturing: those after an operand that
    ends the evaluation then (false for `and`, true for `or`), by ``value``."""
    stop = isinstance(test.op, ast.Or)
    for index, operand in enumerate(test.values[:-1]):
        if value(operand) is stop:
            return test.values[index + 1 :]
    return []


def capture_value(
    test: ast.expr,
    resolve: Resolve,
    known: Mapping[str, bool],
    leaf: Callable[[ast.expr], bool | None] | None = None,
) -> bool | None:
    """The truth of ``test`` while capturing (None: not decided by it). ``known`` says what a
    call returns then; `not` turns a value, `a and b` is false if a part is and true if all
    are, `a or b` the reverse; ``leaf`` decides the other parts (the binder's device tests)."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = capture_value(test.operand, resolve, known, leaf)
        return None if inner is None else not inner
    if isinstance(test, ast.BoolOp):
        parts = [capture_value(value, resolve, known, leaf) for value in test.values]
        if isinstance(test.op, ast.And):
            return False if False in parts else (True if all(p is True for p in parts) else None)
        return True if True in parts else (False if all(p is False for p in parts) else None)
    if isinstance(test, ast.Call):
        name = resolve(test.func)  # once: the binder asks this of every assignment's value
        if name == "bool" and len(test.args) == 1 and not test.keywords:
            return capture_value(test.args[0], resolve, known, leaf)
        if name is not None and name in known:
            return known[name]
    return None if leaf is None else leaf(test)


def capture_predicates(functions: Iterable[tuple[str, ast.AST]], resolve: Resolve) -> dict[str, bool]:
    """The capture predicates among ``functions`` (qualname, definition): qualname -> what each
    returns while capturing. Helpers that test helpers are found by iterating to a fixed point
    (a round only ever proves more, so it ends)."""
    candidates = [(qualname, node) for qualname, node in functions if isinstance(node, FUNCTION_NODES)]
    found: dict[str, bool] = {}
    while True:
        known = stream_capture_calls(found)
        proven = {}
        for qualname, node in candidates:
            value = _Returns(_local_resolver(node, resolve), known).of(node)
            if value is not None:
                proven[qualname] = value
        if proven == found:
            return found
        found = proven


def _local_resolver(node: ast.FunctionDef | ast.AsyncFunctionDef, resolve: Resolve) -> Resolve:
    """The module's names, except those the function binds itself (its parameters included)."""
    args = node.args
    local = assigned_names(node) | {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]}
    local |= {a.arg for a in (args.vararg, args.kwarg) if a is not None}

    def resolve_local(expr: ast.expr) -> str | None:
        parts = dotted_parts(expr)
        if parts is None or parts[0] in local:
            return None
        return resolve(expr)

    return resolve_local


class _Returns:
    """What one function may return on the paths that run while capturing."""

    def __init__(self, resolve: Resolve, known: Mapping[str, bool]) -> None:
        self.resolve = resolve
        self.known = known
        self.values: set[object] = set()  # True, False, _ANY
        self.queried = False  # some return is the capture state, not only constants

    def of(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool | None:
        """True or False if every such path returns it, and one returns a capture-state test;
        None otherwise (a validator that only raises or returns None is no predicate)."""
        if node.decorator_list or isinstance(node, ast.AsyncFunctionDef):
            return None  # a decorator may change what a call returns; a coroutine is always truthy
        if self._block(node.body):
            self.values.add(False)  # falls off the end: returns None
        if self.queried and len(self.values) == 1 and _ANY not in self.values:
            return bool(next(iter(self.values)))
        return None

    def _block(self, body: list[ast.stmt]) -> bool:
        """Note what ``body`` may return while capturing; True if it may fall through."""
        for stmt in body:
            if isinstance(stmt, ast.Return):
                self._returned(stmt.value)
                return False
            if isinstance(stmt, ast.Raise):
                return False
            if isinstance(stmt, ast.If):
                if not self._if(stmt):
                    return False
            elif isinstance(stmt, ast.Try) and not stmt.finalbody:
                if not self._try(stmt):
                    return False
            elif not _inert(stmt):
                self.values.add(_ANY)
                return False
        return True

    def _if(self, stmt: ast.If) -> bool:
        decided = capture_value(stmt.test, self.resolve, self.known)
        through = False
        if decided is not False:
            through |= self._block(stmt.body)
        if decided is not True:
            through |= self._block(stmt.orelse)
        return through

    def _try(self, stmt: ast.Try) -> bool:
        through = self._block(stmt.body) and self._block(stmt.orelse)
        if not self._only_queries(stmt.body):
            for handler in stmt.handlers:
                through |= self._block(handler.body)
        return through

    def _returned(self, value: ast.expr | None) -> None:
        if value is None or (isinstance(value, ast.Constant) and isinstance(value.value, (bool, type(None)))):
            self.values.add(bool(value.value) if value is not None else False)
            return
        decided = capture_value(value, self.resolve, self.known)
        self.values.add(_ANY if decided is None else decided)
        self.queried |= decided is not None

    def _only_queries(self, body: list[ast.stmt]) -> bool:
        """Are all the calls in ``body`` capture-state queries (which cannot fail while capturing)?"""
        calls = [node for stmt in body for node in ast.walk(stmt) if isinstance(node, ast.Call)]
        return bool(calls) and all(
            _is_bool_call(call, self.resolve) or self.resolve(call.func) in self.known for call in calls
        )


def _inert(stmt: ast.stmt) -> bool:
    """A docstring or `pass`: it changes nothing the return depends on."""
    return isinstance(stmt, ast.Pass) or (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant))


def _is_bool_call(call: ast.Call, resolve: Resolve) -> bool:
    return len(call.args) == 1 and not call.keywords and resolve(call.func) == "bool"


class CaptureFlags:
    """A function's locals that hold the capture state, read back as a guard:

        check_overflow = not torch.cuda.is_current_stream_capturing()
        ...
        if check_overflow and overflow.item():

    A flag counts only if the function binds the name once (no other assignment, loop target,
    `del`, or `nonlocal` rebinding from a nested function), and only where the capture regions
    open in the function are the ones open at the assignment: a flag read before a
    `with torch.cuda.graph(...)` opened says nothing about the capture inside it. A module's
    globals never count: they are evaluated at import.
    """

    def __init__(self, function: ast.AST) -> None:
        self.function = function
        self._once: set[str] | None = None  # computed on the first flag: most functions have none
        self._flags: dict[str, tuple[bool, tuple[int, ...]]] = {}

    def note(self, target: ast.expr, value: bool | None, regions: tuple[int, ...]) -> None:
        """``target = <value>`` was assigned with ``regions`` open."""
        if not isinstance(target, ast.Name) or not isinstance(self.function, FUNCTION_NODES):
            return
        if value is None:
            self._flags.pop(target.id, None)
            return
        if self._once is None:
            self._once = _bound_once(self.function)
        if target.id in self._once:
            self._flags[target.id] = (value, regions)

    def value(self, test: ast.expr, regions: tuple[int, ...]) -> bool | None:
        """What the flag ``test`` holds while capturing, if it is one read under ``regions``."""
        if isinstance(test, ast.Name) and test.id in self._flags:
            value, assigned_under = self._flags[test.id]
            return value if assigned_under == regions else None
        return None


def _bound_once(function: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """The names ``function`` binds exactly once, and no nested function rebinds."""
    counts: dict[str, int] = {}
    rebound: set[str] = set()
    for node in ast.walk(function):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            counts[node.id] = counts.get(node.id, 0) + 1
        elif isinstance(node, (ast.Nonlocal, ast.Global)):
            rebound.update(node.names)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            rebound.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, (*FUNCTION_NODES, ast.ClassDef, ast.ExceptHandler, ast.MatchAs, ast.MatchStar)):
            if node.name and node is not function:  # a handler's or pattern's name may be None
                rebound.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            rebound.add(node.rest)
    return {name for name, count in counts.items() if count == 1 and name not in rebound}


def in_guarded_code(function: FunctionSummary, line: int, column: int) -> bool:
    """Is the position (line, 1-based column) in code of ``function`` that no capture runs
    (the binder's `guarded_spans`: a branch a capture-state test rules out, the rest of a block
    after `if capturing: return`, an operand after one that stops a capture)?"""
    return any((start, first) <= (line, column) <= (end, last) for start, first, end, last in function.guarded_spans)
