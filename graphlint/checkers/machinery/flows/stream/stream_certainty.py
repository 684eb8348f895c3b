"""When the stream flow's "unordered" holds for the function as written: the default set's
share of its cross-stream findings.

The flow finds a side stream's work unordered with the current stream's by following the
orderings it can read. Its false findings on real code (benchmarks/corpus/labels.jsonl) are
orderings it cannot read: a join through a helper or the caller, an event handed to the
consumer, a `record_stream` on another name of the same memory, flags that tie two branches.
A finding is certain when none of those can be there:

- the function spells no ordering the flow may have misread: only forks (`s.wait_stream(
  torch.cuda.current_stream())`) before the use, no join, event, sync or `record_stream`;
- no call is handed a stream (a helper that waits or records for the caller);
- for a tensor made here and read in a side stream's block, no stream but the current one
  waits anywhere in the function: no caller can have ordered work queued after the call
  began, and no fork, event or sync here orders it.

Each answer is syntactic and local, so it can only make a finding certain where the
function itself shows the whole story; everything else stays a preview behaviour.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import cached_property
from typing import TYPE_CHECKING

from graphlint.checkers.machinery.core import kinds as T
from graphlint.checkers.machinery.core import tensor_values as V
from graphlint.checkers.machinery.core.branch_arms import arms_around, exclusive, path_to
from graphlint.checkers.machinery.core.names import source_text
from graphlint.checkers.machinery.core.syntax import own_expressions, statements
from graphlint.checkers.machinery.flows.stream.stream_identity import names_current_stream

if TYPE_CHECKING:
    from graphlint.checkers.machinery.core.module_state import Binder

# The calls that order streams (waits, events, syncs), which the stream flow reads.
ORDERING_METHODS = frozenset({"wait_stream", "wait_event", "record", "record_event", "wait", "synchronize"})
# Those, and the calls that hold memory for a stream or block the host: a finding near any of
# them is the flow's reading of an ordering, which is where its false findings come from.
_ORDERING = ORDERING_METHODS | {"record_stream", "barrier", "query"}
_BUILTINS = V.ROW_ITERATORS | {"len", "range", "isinstance"}  # calls that pass a stream list on to no helper


def _calls(nodes: list[ast.stmt] | list[ast.AST]) -> Iterator[ast.Call]:
    for stmt in nodes:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Call):
                yield node


def calls_any(nodes: list[ast.stmt] | list[ast.AST], methods: frozenset[str] | set[str]) -> bool:
    """Does ``nodes`` call a method (or a function) of one of these names anywhere?"""
    return any(_method(call) in methods for call in _calls(nodes))


def _method(call: ast.Call) -> str:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def is_fork(walker: Binder, call: ast.Call) -> bool:
    """`s.wait_stream(torch.cuda.current_stream())` for a stream `s` other than the current one."""
    func = call.func
    return (
        isinstance(func, ast.Attribute)
        and func.attr == "wait_stream"
        and len(call.args) == 1
        and names_current_stream(walker, call.args[0])
        and not names_current_stream(walker, func.value)
    )


def side_streams_never_wait(walker: Binder, body: list[ast.stmt]) -> bool:
    """Does no stream but the current one wait in ``body``? Every ordering call is a join
    (`torch.cuda.current_stream().wait_stream(s)`): no fork, event, sync or `record_stream`."""
    return all(_method(call) not in _ORDERING or is_current_join(walker, call) for call in _calls(body))


def is_current_join(walker: Binder, call: ast.Call) -> bool:
    """`torch.cuda.current_stream().wait_stream(s)`: the current stream waits for another."""
    func = call.func
    return isinstance(func, ast.Attribute) and func.attr == "wait_stream" and names_current_stream(walker, func.value)


def orders_by_forks_only(walker: Binder, nodes: list[ast.stmt] | list[ast.AST]) -> bool:
    """Is every ordering call in ``nodes`` a fork? No join, event, sync or `record_stream`."""
    return all(_method(call) not in _ORDERING or is_fork(walker, call) for call in _calls(nodes))


def hands_a_stream(walker: Binder, nodes: list[ast.stmt] | list[ast.AST]) -> bool:
    """Is any call in ``nodes`` passed a stream (`helper(x, stream=s)`, `f(current_stream())`),
    other than a stream context (`torch.cuda.stream(s)`) and the ordering calls themselves?
    Such a helper may wait or record for its caller."""
    for call in _calls(nodes):
        if walker.is_stream_context(call) or _method(call) in _ORDERING | _BUILTINS:
            continue
        for argument in [*call.args, *(keyword.value for keyword in call.keywords)]:
            if _is_stream_argument(walker, argument):
                return True
    return False


def _is_stream_argument(walker: Binder, node: ast.AST) -> bool:
    if names_current_stream(walker, node):
        return True
    ty = walker.ty(node)
    if ty is not None and ty.kind == T.STREAM:
        return True
    text = source_text(node) if isinstance(node, (ast.Name, ast.Attribute)) else ""
    return "stream" in text.lower()


def between(body: list[ast.stmt], first: int, last: int) -> list[ast.AST]:
    """What runs between a use and a release written after it: the statements of ``body``
    (nested ones too, definitions not entered) that start on lines ``first``..``last``,
    compound ones by their header only."""
    return [part for stmt in statements(body) if first <= stmt.lineno <= last for part in own_expressions(stmt)]


def on_every_path_after(body: list[ast.stmt], first: ast.stmt, second: ast.stmt) -> bool:
    """Does every branch that holds ``first`` hold ``second`` too (the same arm of each `if`,
    `match` case and `try` clause)? Then no flag can make the two exclusive: whenever the
    first ran, the second runs after it (a loop or `with` around the first alone is fine)."""
    outer = arms_around(body, first)
    inner = arms_around(body, second)
    return outer is not None and inner is not None and set(outer) <= set(inner)


class FunctionOrderings:
    """The whole-function answers above, each computed once per walk: a function with many
    crossings or releases asks them for every one, and each is a scan of the whole body."""

    def __init__(self, walker: Binder) -> None:
        self.w = walker

    @cached_property
    def forks_only(self) -> bool:
        return orders_by_forks_only(self.w, self.w.body)

    @cached_property
    def joins_only(self) -> bool:
        return side_streams_never_wait(self.w, self.w.body)

    @cached_property
    def hands_a_stream(self) -> bool:
        return hands_a_stream(self.w, self.w.body)

    @cached_property
    def records(self) -> bool:
        return records_anywhere(self.w.body)

    @cached_property
    def rebound(self) -> set[str]:
        return rebound_names(self.w.body)


def records_anywhere(body: list[ast.stmt]) -> bool:
    """Does the function call `record_stream` at all (on any name of any memory)?"""
    return any(_method(call) == "record_stream" for call in _calls(body))


def may_return_itself(value: ast.AST | None, name: str) -> bool:
    """`x = x.to(dtype)`, `x = x.float()`: the call returns `x` itself when it has nothing to
    do, so the rebinding may free nothing (`x.contiguous()` is a view: tensor_values)."""
    return (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute)
        and value.func.attr in _MAYBE_SELF
        and isinstance(value.func.value, ast.Name)
        and value.func.value.id == name
    )


_MAYBE_SELF = frozenset(
    {
        "to",
        "type",
        "float",
        "half",
        "bfloat16",
        "double",
        "int",
        "long",
        "cuda",
        "contiguous",
        "type_as",
        "requires_grad_",
    }
)


def waits_in_class(walker: Binder, stream: str) -> bool:
    """Does a method of the walker's class make ``stream`` wait (`self.s.wait_stream(...)`,
    `self.s.wait_event(...)`) or synchronise? A stream that waits for the current one before
    it allocates again cannot hand a block on while the current stream still reads it."""
    node = walker.st.class_nodes.get(walker.class_qualname or "")
    if node is None:
        return True
    for call in _calls(node.body):
        method, func = _method(call), call.func
        receiver = source_text(func.value) if isinstance(func, ast.Attribute) else ""
        if (method in ("wait_stream", "wait_event") and receiver == stream) or method in ("synchronize", "barrier"):
            return True
    return False


def orderings_before(
    walker: Binder, use: ast.stmt, producer: ast.stmt | None, rebound: set[str] | None = None
) -> list[ast.Call]:
    """The ordering calls that can run on a path from ``producer`` to ``use``: those written
    before the use or in a loop around it, and on a path with each (`_apart`). Anything else
    runs after the use or on another path, however the flow reads it."""
    body = walker.body
    around = path_to(body, use) or ()
    looped = {id(s) for loop, _ in around if isinstance(loop, _LOOPS) for s in statements(loop.body)}
    found: list[ast.Call] = []
    for stmt in statements(body):
        if stmt.lineno >= use.lineno and id(stmt) not in looped:
            continue
        calls = [call for call in _calls(own_expressions(stmt)) if _method(call) in _ORDERING]
        if not calls or any(_apart(body, stmt, end, rebound) for end in (use, producer) if end is not None):
            continue
        found.extend(calls)
    return found


def _apart(body: list[ast.stmt], one: ast.stmt, other: ast.stmt, rebound: set[str] | None) -> bool:
    """No path runs both: different arms of one statement, or arms whose tests contradict."""
    return exclusive(body, one, other) or never_both(body, one, other, rebound)


def may_run_both(body: list[ast.stmt], producer: ast.stmt, use: ast.stmt, rebound: set[str] | None = None) -> bool:
    """Can one path run both ``producer`` and ``use``, when alternatives bound the name
    differently? The tests of the arms around each (those not around both) are read as facts
    on names the function never rebinds (`fmt == "thd"`, `fmt not in ("a", "b")`, `flag`,
    `x is None`): a path runs both when those facts agree (`if fmt == "thd": k = reorder(k)`
    then, in the `else` of `if fmt in ("bshd", "sbhd"):`, a use of `k`), and the tests not
    read so share no name with the other side's tests (no flag ties them)."""
    sides = _arm_sides(body, producer, use)
    if sides is None:
        return False
    facts, unread = _facts([*sides[0], *sides[1]], rebound_names(body) if rebound is None else rebound)
    if not _consistent(facts):
        return False
    names = [_test_names(stmt for stmt, _ in side) for side in sides]
    for arm in unread:
        tested = _test_names(iter([arm[0]]))
        if tested & names[1 if arm in sides[0] else 0]:
            return False  # a flag this side tests is tested on the other side too
    return True


def never_both(body: list[ast.stmt], first: ast.stmt, second: ast.stmt, rebound: set[str] | None = None) -> bool:
    """Do the tests around the two say no path runs both (`if fmt == "thd":` around one, `if
    fmt in ("bshd", "sbhd"):` around the other, `fmt` never rebound)? Loop passes included:
    the facts hold for the whole call. Tests not read so are left out: if what is read
    cannot hold at once, neither can all of it."""
    sides = _arm_sides(body, first, second)
    if sides is None:
        return False
    facts, _ = _facts([*sides[0], *sides[1]], rebound_names(body) if rebound is None else rebound)
    return not _consistent(facts)


def _arm_sides(body: list[ast.stmt], first: ast.stmt, second: ast.stmt) -> tuple[list, list] | None:
    """The arms around each of the two that are not around both."""
    one, other = arms_around(body, first), arms_around(body, second)
    if one is None or other is None:
        return None
    shared = set(one) & set(other)
    return [arm for arm in one if arm not in shared], [arm for arm in other if arm not in shared]


def _facts(arms: list[tuple[ast.stmt, str]], rebound: set[str]) -> tuple[list[Fact], list[tuple[ast.stmt, str]]]:
    """The facts holding in all these arms, on names the function never rebinds, and the arms
    whose tests are not read so."""
    found: list[Fact] = []
    unread: list[tuple[ast.stmt, str]] = []
    for arm in arms:
        facts = _arm_facts(*arm)
        if facts is None or any(name in rebound for name, _, _ in facts):
            unread.append(arm)
        else:
            found.extend(facts)
    return found, unread


def rebound_names(body: list[ast.stmt]) -> set[str]:
    """Names the function binds or deletes anywhere (its parameters aside): facts on them may
    change during the call. The answers above take it once per walk (FunctionOrderings)."""
    return {
        node.id
        for stmt in body
        for node in ast.walk(stmt)
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del))
    }


_FALSY = object()  # the value a false flag holds, for `if flag:` / `if not flag:`
Fact = tuple[str, bool, frozenset]  # (name, is one of, values): `fmt in {"a"}`, `fmt not in {"b"}`


def _arm_facts(stmt: ast.stmt, field: str) -> list[Fact] | None:
    """What holding in this arm says about names, or None when the test is not read so."""
    if not isinstance(stmt, ast.If) or field not in ("body", "orelse"):
        return None
    return _test_facts(stmt.test, field == "body")


def _test_facts(test: ast.expr, holds: bool) -> list[Fact] | None:
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return _test_facts(test.operand, not holds)
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) == holds:
        parts = [_test_facts(value, holds) for value in test.values]  # all hold / all fail
        return None if any(part is None for part in parts) else [f for part in parts if part for f in part]
    if isinstance(test, ast.Name):
        return [(test.id, not holds, frozenset({_FALSY}))]
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.left, ast.Name)):
        return None
    op, right = test.ops[0], test.comparators[0]
    values = _constants(right)
    if values is None:
        return None
    if isinstance(op, (ast.Eq, ast.Is)) and len(values) == 1:
        return [(test.left.id, holds, values)]
    if isinstance(op, (ast.NotEq, ast.IsNot)) and len(values) == 1:
        return [(test.left.id, not holds, values)]
    if isinstance(op, (ast.In, ast.NotIn)) and isinstance(right, (ast.List, ast.Tuple, ast.Set)):
        return [(test.left.id, holds == isinstance(op, ast.In), values)]
    return None


def _constants(node: ast.expr) -> frozenset | None:
    if isinstance(node, ast.Constant):
        return frozenset({_FALSY if node.value is None else node.value})
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)) and all(isinstance(e, ast.Constant) for e in node.elts):
        return frozenset(_FALSY if e.value is None else e.value for e in node.elts)  # type: ignore[attr-defined]
    return None


def _consistent(facts: list[Fact]) -> bool:
    """Can every name hold a value that meets all its facts at once?"""
    for name in {name for name, _, _ in facts}:
        allowed: frozenset | None = None
        banned: set = set()
        for fact_name, among, values in facts:
            if fact_name != name:
                continue
            if among:
                allowed = values if allowed is None else allowed & values
            else:
                banned |= values
        if allowed is not None and not allowed - banned:
            return False
    return True


_LOOPS = (ast.For, ast.AsyncFor, ast.While)


def _test_names(stmts: Iterator[ast.stmt]) -> set[str]:
    return {
        node.id
        for stmt in stmts
        if isinstance(stmt, (ast.If, ast.While, ast.Match))
        for node in ast.walk(stmt.subject if isinstance(stmt, ast.Match) else stmt.test)
        if isinstance(node, ast.Name)
    }
