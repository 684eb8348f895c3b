"""Conditions on a function's own parameters, read so the project phase can decide them.

A capture often runs a function whose branches its caller chooses with a constant:
`forward(x, in_capture=True)`, `init_graphs(capture_decode=False)`, `attend(q, mask=None)`.
The branch the constant rules out never runs under that capture, and what it calls is not
what the capture records. The file phase cannot know the constant, so it keeps the test in a
small form (`Test`) beside the code it guards; the project phase (`call_constants`)
evaluates it with the constants the capturing call sites pass.

Only parameters the function never rebinds are read, and only tests whose meaning is plain
Python on constants: truth (`if p:`, `if not p:`), identity with `None`/`True`/`False`
(`p is None`), equality and membership against literals (`p == "decode"`, `p in (1, 2)`),
and `and`/`or`/`not` of those. A field of a parameter's object (`p.ready`) and what one of its
methods returns without arguments (`p.needs_init()`) are read like parameters, by their dotted
names: the project phase knows them when the caller set those fields before the call
(`object_marks`). Any other operand is unknown, so `p and self.ready` can still
be decided false by `p` alone. Evaluation is three-valued: a parameter that may hold several
constants decides a test only if every one of them gives the same answer.

Constants are kept as their `repr` (plain data in the cache) and read back with
`ast.literal_eval`; a value known only to be not None is `NOT_NONE` (`present_names`).
"""

from __future__ import annotations

import ast
import math
from collections.abc import Mapping

from graphlint.checkers.machinery.constants.present_names import NOT_NONE, is_display

# ("p", name): bool(name) | ("not", t) | ("and", t, ...) | ("or", t, ...)
# ("is", name, literal) | ("==", name, literal) | ("in", name, (literal, ...)) | ("?",): unknown
Test = tuple
Constants = Mapping[str, frozenset[str]]  # parameter -> the reprs of the constants it may hold
UNKNOWN: Test = ("?",)
_SINGLETONS = frozenset({"None", "True", "False"})
_LARGEST = 10**18  # constants kept: integers up to this size, strings up to this length
_LONGEST = 200


def literal(node: ast.expr) -> str | None:
    """The repr of a constant the test or call spells (None, a bool, number or string, or a
    member of an enumeration, `Mode.DECODE`, kept as `<Mode.DECODE>`), or None."""
    if isinstance(node, ast.Attribute):
        return _member(node)
    negative = isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub)
    if negative:
        node = node.operand  # type: ignore[attr-defined]  # a UnaryOp, checked above
    if not isinstance(node, ast.Constant):
        return None
    value = node.value
    if isinstance(value, float) and not math.isfinite(value):
        return None  # `1e999` is `inf`, whose repr does not read back
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > _LARGEST:
        return None  # its repr may exceed Python's digit limit (and no branch tests such a number)
    if isinstance(value, str) and len(value) > _LONGEST:
        return None  # kept in every summary that passes it: a flag is short
    if negative:
        return repr(-value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    return repr(value) if isinstance(value, (bool, int, float, str, type(None))) else None


def _member(node: ast.Attribute) -> str | None:
    """`Mode.DECODE`: an enumeration's member, as the code names it (a capitalised class, an
    upper-case member). Two members are the same when they are spelled the same."""
    owner = node.value
    if isinstance(owner, ast.Name) and owner.id[:1].isupper() and node.attr.isupper():
        return f"<{owner.id}.{node.attr}>"
    return None


def read_test(test: ast.expr, params: frozenset[str]) -> Test | None:
    """``test`` in the `Test` form, or None when no part of it is a decidable parameter test."""
    found = _read(test, params)
    return found if parameters_of(found) else None


def subject(node: ast.expr, params: frozenset[str]) -> str | None:
    """The name a test reads: a parameter (`p`), a field of the object it holds (`p.ready`), or
    what a method without arguments of either returns (`p.needs_init()`, `p.mode.is_decode()`),
    whose value the project phase works out from the fields (`object_marks`); None for anything
    else."""
    if isinstance(node, ast.Name):
        return node.id if node.id in params else None
    if isinstance(node, ast.Call):
        if node.args or node.keywords or not isinstance(node.func, ast.Attribute):
            return None
        owner = subject(node.func.value, params)
        return f"{owner}.{node.func.attr}()" if owner is not None and "(" not in owner else None
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in params:
        return f"{node.value.id}.{node.attr}"
    return None


def _read(test: ast.expr, params: frozenset[str]) -> Test:
    if isinstance(test, (ast.Name, ast.Attribute, ast.Call)):
        name = subject(test, params)
        return ("p", name) if name is not None else UNKNOWN
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _read(test.operand, params)
        return UNKNOWN if inner == UNKNOWN else ("not", inner)
    if isinstance(test, ast.BoolOp):
        return ("and" if isinstance(test.op, ast.And) else "or", *(_read(v, params) for v in test.values))
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        return _comparison(test.left, test.ops[0], test.comparators[0], params)
    return UNKNOWN


def _comparison(left: ast.expr, op: ast.cmpop, right: ast.expr, params: frozenset[str]) -> Test:
    """`p is None`, `None is not p`, `p == 3`, `p != "x"`, `p in ("a", "b")`, `p not in (...)`
    (and the same of `p.field` and `p.method()`)."""
    name = subject(left, params)
    if name is None:
        name = subject(right, params)
        if name is None or not isinstance(op, (ast.Is, ast.IsNot, ast.Eq, ast.NotEq)):
            return UNKNOWN
        right = left  # symmetric operators: `None is p`
    if isinstance(op, (ast.In, ast.NotIn)):
        if not isinstance(right, (ast.Tuple, ast.List, ast.Set)):
            return UNKNOWN
        members = [literal(element) for element in right.elts]
        if any(member is None for member in members):
            return UNKNOWN
        found: Test = ("in", name, tuple(members))
        return ("not", found) if isinstance(op, ast.NotIn) else found
    value = literal(right)
    if value is None:
        return UNKNOWN
    if isinstance(op, (ast.Is, ast.IsNot)):
        found = ("is", name, value)
    elif isinstance(op, (ast.Eq, ast.NotEq)):
        found = ("==", name, value)
    else:
        return UNKNOWN
    return ("not", found) if isinstance(op, (ast.IsNot, ast.NotEq)) else found


def parameters_of(test: Test) -> set[str]:
    """The parameters ``test`` reads."""
    tag = test[0]
    if tag in ("p", "is", "==", "in"):
        return {test[1]}
    if tag in ("not", "and", "or"):
        return set().union(*(parameters_of(part) for part in test[1:]))
    return set()


def evaluate(test: Test, constants: Constants) -> bool | None:
    """What ``test`` gives with the parameters holding ``constants``; None when undecided."""
    tag = test[0]
    if tag == "not":
        inner = evaluate(test[1], constants)
        return None if inner is None else not inner
    if tag == "and" or tag == "or":
        return _junction(tag == "and", test[1:], constants)
    if tag == "?":
        return None
    held = constants.get(test[1])
    if not held:
        return None
    answers = {_atom(test, value) for value in held}
    return answers.pop() if len(answers) == 1 else None


def _junction(conjunction: bool, parts: tuple, constants: Constants) -> bool | None:
    """Kleene's `and`/`or`: one decisive operand decides, all decided operands decide."""
    undecided = False
    for part in parts:
        answer = evaluate(part, constants)
        if answer is None:
            undecided = True
        elif answer is not conjunction:
            return answer  # `False and ...`, `True or ...`
    return None if undecided else conjunction


def _atom(test: Test, held: str) -> bool | None:
    tag = test[0]
    if held == NOT_NONE:  # only identity with None is known: an empty dict is falsy, `==` may be anything
        return False if tag == "is" and test[2] == "None" else None
    if held[:1] == "<" or (tag in ("is", "==") and test[2][:1] == "<"):
        return _member_atom(test, held)
    value = ast.literal_eval(held)
    if tag == "p":
        return bool(value)
    if tag == "is":
        if test[2] in _SINGLETONS and held in _SINGLETONS:
            return test[2] == held
        if test[2] in _SINGLETONS or held in _SINGLETONS:
            return False  # a singleton is never the same object as another constant
        return None  # identity of two equal numbers or strings is an implementation detail
    if tag == "==":
        return bool(value == ast.literal_eval(test[2]))
    if tag == "in":
        return value in [ast.literal_eval(member) for member in test[2]]
    return None


def _member_atom(test: Test, held: str) -> bool | None:
    """A test of an enumeration's member: the same member, or another of the same enumeration."""
    tag = test[0]
    others = [test[2]] if tag in ("is", "==") else list(test[2]) if tag == "in" else []
    if not others or held[:1] != "<" or any(other[:1] != "<" for other in others):
        return None  # truth, or a member against a plain constant (an IntEnum equals its value)
    if held in others:
        return True
    same_enumeration = all(other.split(".")[0] == held.split(".")[0] for other in others)
    return False if same_enumeration else None


def describe(test: Test) -> str:
    """The test as Python source, for `graphlint captures`."""
    tag = test[0]
    if tag == "p":
        return test[1]
    if tag == "not":
        inner = test[1]
        negated = {"is": "is not", "==": "!=", "in": "not in"}.get(inner[0])
        if negated is not None:
            return describe(inner).replace(f" {inner[0]} ", f" {negated} ", 1)
        return f"not {describe(inner)}" if inner[0] == "p" else f"not ({describe(inner)})"
    if tag in ("and", "or"):
        return f" {tag} ".join(describe(part) for part in test[1:])
    if tag in ("is", "=="):
        return f"{test[1]} {tag} {shown(test[2])}"
    if tag == "in":
        return f"{test[1]} in ({', '.join(map(shown, test[2]))})"
    return "..."


def shown(held: str) -> str:
    """A constant's repr as the code spells it (an enumeration's member without its marks)."""
    return held[1:-1] if held[:1] == "<" else held


def passed(call: ast.Call, fixed: frozenset[str], present: frozenset[str] = frozenset()) -> tuple[tuple[str, str], ...]:
    """What ``call`` passes, as far as constants go: ("#", count) of its positional arguments,
    (position, repr) for a constant, `@p` for a parameter of the caller's that is never rebound
    (``fixed``; `@p!` where it is also known not None), `NOT_NONE` for a display or a name known
    not None there (``present``, `present_names`), (keyword, "") for a keyword whose value is
    none of these, and ("*", "") once it spreads arguments: a callee parameter the call does not
    name may then receive anything."""
    if not call.args and not call.keywords:
        return ()
    found: list[tuple[str, str]] = []
    count = 0
    for arg in call.args:
        if isinstance(arg, ast.Starred):
            found.append(("*", ""))
            break  # the positions after it are unknown
        value = _argument(arg, fixed, present)
        if value is not None:
            found.append((str(count), value))
        count += 1
    if count:
        found.append(("#", str(count)))
    for keyword in call.keywords:
        if keyword.arg is None:  # `**kwargs`
            if ("*", "") not in found:
                found.append(("*", ""))
            continue
        found.append((keyword.arg, _argument(keyword.value, fixed, present) or ""))
    return tuple(found)


def _argument(node: ast.expr, fixed: frozenset[str], present: frozenset[str]) -> str | None:
    if isinstance(node, ast.Name) and node.id in fixed:
        return f"@{node.id}!" if node.id in present else f"@{node.id}"  # `!`: and not None here
    if (isinstance(node, ast.Name) and node.id in present) or is_display(node):
        return NOT_NONE
    return literal(node)


def defaults(args: ast.arguments, params: list[str]) -> dict[str, str]:
    """The parameters whose default is a constant, with its repr."""
    positional = [*args.posonlyargs, *args.args]
    pairs = list(zip(positional[len(positional) - len(args.defaults) :], args.defaults, strict=True))
    pairs += [
        (arg, default) for arg, default in zip(args.kwonlyargs, args.kw_defaults, strict=True) if default is not None
    ]
    found = {}
    for arg, default in pairs:
        value = literal(default)
        if value is not None and arg.arg in params:
            found[arg.arg] = value
    return found
