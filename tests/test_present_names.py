"""Names a function has shown are not None decide its callees' `is None` tests: vLLM's encoder
graphs pass `encoder_metadata=metadata` after `metadata = values` and `values.pop(...)`, so
the callee's eager `if encoder_metadata is None:` sizing never runs under the capture. Shown
means on every path to the call: a dereference in a branch, or a name bound again after it,
shows nothing."""

from __future__ import annotations

import ast
import textwrap

import pytest

from graphlint.checkers.machinery.constants import param_tests
from graphlint.checkers.machinery.constants.call_constants import _handed_on
from graphlint.checkers.machinery.constants.present_names import NOT_NONE, holds, present_names


def _known_at_call(source: str, name: str) -> bool:
    """Whether ``name`` is known not None at the call of `g` in the function ``source`` defines;
    the same with the source text's filter, and with only the names the call passes asked for."""
    text = textwrap.dedent(source)
    function = ast.parse(text).body[0]
    assert isinstance(function, ast.FunctionDef)
    call = next(n for n in ast.walk(function) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "g")
    known = holds(present_names(function), name, call.lineno)
    passed = [*call.args, *(k.value for k in call.keywords)]
    wanted = frozenset(arg.id for arg in passed if isinstance(arg, ast.Name)) | {name}
    filtered = present_names(function, text.splitlines(), wanted, call.lineno)
    assert holds(filtered, name, call.lineno) == known
    return known


@pytest.mark.parametrize(
    ("source", "name"),
    [
        ("def f(v):\n    p = v.pop('x')\n    g(m=v)\n", "v"),
        ("def f(v):\n    n = v['k']\n    g(m=v)\n", "v"),
        ("def f(v):\n    v.x = 1\n    g(m=v)\n", "v"),
        ("def f(v):\n    assert v is not None\n    g(m=v)\n", "v"),
        ("def f(v, w):\n    assert v and w\n    g(m=v)\n", "w"),
        ("def f(v):\n    if v is None:\n        return\n    g(m=v)\n", "v"),
        ("def f(v):\n    if not v:\n        raise ValueError\n    g(m=v)\n", "v"),
        ("def f(v):\n    v.pop('x')\n    m = v\n    g(m=m)\n", "m"),
        ("def f():\n    m = {'a': 1}\n    g(m=m)\n", "m"),  # every binding never None: anywhere
        ("def f(v):\n    if v is not None:\n        g(m=v)\n", "v"),
        ("def f(v, c):\n    if v is None or c:\n        pass\n    else:\n        g(m=v)\n", "v"),
        ("def f(v):\n    while v:\n        g(m=v)\n", "v"),
        ("def f(v, c):\n    for x in c:\n        v.pop(x)\n        g(m=v)\n", "v"),
        ("def f(c):\n    if c:\n        m = True\n    else:\n        m = bool(c) and c > 1\n    g(m=m)\n", "m"),
        ("def f(v: Meta):\n    g(m=v)\n", "v"),  # declared never None
        ("def f(v: mod.Meta):\n    g(m=v)\n", "v"),
        ("def f(v: dict[str, int]):\n    g(m=v)\n", "v"),
        ("def f(v: 'Meta'):\n    g(m=v)\n", "v"),  # a forward reference
        ("def f(*, v: Union[Meta, Other]):\n    g(m=v)\n", "v"),
        ("def f(v: Meta | Other = Meta()):\n    g(m=v)\n", "v"),
    ],
)
def test_what_shows_a_name_is_not_none(source: str, name: str) -> None:
    assert _known_at_call(source, name)


@pytest.mark.parametrize(
    ("source", "name"),
    [
        ("def f(v, c):\n    if c:\n        v.pop('x')\n    g(m=v)\n", "v"),  # one arm only
        ("def f(v, c):\n    n = c and v.x\n    g(m=v)\n", "v"),  # `and`'s later operand may not run
        ("def f(v, c):\n    n = v.x if c else 0\n    g(m=v)\n", "v"),  # an arm of a conditional
        ("def f(v):\n    n = [x.y for x in v]\n    g(m=v)\n", "v"),  # a comprehension: not counted
        ("def f(v, c):\n    s = v['k']\n    v = c.get(s)\n    g(m=v)\n", "v"),  # bound again after
        (
            "def f(v):\n    v.pop('x')\n    for _ in range(2):\n        g(m=v)\n        v = None\n",
            "v",
        ),  # bound in a loop
        ("def f(v):\n    if v is not None:\n        v = h()\n        g(m=v)\n", "v"),  # bound in the arm
        ("def f(v, c):\n    for x in c:\n        v.pop(x)\n    g(m=v)\n", "v"),  # a loop may not run
        ("def f(v):\n    n = v.__class__\n    g(m=v)\n", "v"),  # None has its dunders
        ("def f():\n    global v\n    v.pop('x')\n    g(m=v)\n", "v"),  # anyone may bind a global
        ("def f(v):\n    if v is None:\n        log()\n    g(m=v)\n", "v"),  # the check does not leave
        ("def f(v):\n    if v is None:\n        return\n    else:\n        pass\n    g(m=v)\n", "v"),
        ("def f(v, c):\n    m = v if c else None\n    g(m=m)\n", "m"),
        ("def f(v, c):\n    v.pop('x')\n    try:\n        c()\n    except E as v:\n        pass\n    g(m=v)\n", "v"),
        ("def f(v, c):\n    v.pop('x')\n    match c:\n        case [v]:\n            pass\n    g(m=v)\n", "v"),
        ("def f(v, c):\n    v.pop('x')\n    with c as v:\n        pass\n    g(m=v)\n", "v"),
        ("def f(v):\n    v.pop('x')\n    import v\n    g(m=v)\n", "v"),
        ("def f(c):\n    m = None\n    if c:\n        m = True\n    g(m=m)\n", "m"),
        ("def f(c):\n    for m in c:\n        pass\n    g(m=m)\n", "m"),
        ("def f(c):\n    m = True\n    m += c\n    g(m=m)\n", "m"),
        ("def f(m=True):\n    m = False\n    g(m=m)\n", "m"),  # a parameter may hold what is passed
        ("def f(v: Optional[Meta]):\n    g(m=v)\n", "v"),  # declarations that admit None
        ("def f(v: Meta | None):\n    g(m=v)\n", "v"),
        ("def f(v: 'Meta | None'):\n    g(m=v)\n", "v"),
        ("def f(v: Union[Meta, None]):\n    g(m=v)\n", "v"),
        ("def f(v: Any):\n    g(m=v)\n", "v"),
        ("def f(v: T):\n    g(m=v)\n", "v"),  # a type variable may be bound to None
        ("def f(v: Meta = None):\n    g(m=v)\n", "v"),  # an implicit Optional
        ("def f(*, v: Meta = None):\n    g(m=v)\n", "v"),
        ("def f(v: Meta):\n    v = h()\n    g(m=v)\n", "v"),  # bound again: the declaration no longer speaks
        ("def f(v: Meta):\n    if v is None:\n        log()\n    g(m=v)\n", "v"),  # its author doubts it
    ],
)
def test_what_shows_nothing(source: str, name: str) -> None:
    assert not _known_at_call(source, name)


def _passed(source: str) -> dict[str, str]:
    """What the one call in the function passes, keyword by keyword."""
    function = ast.parse(textwrap.dedent(source)).body[0]
    assert isinstance(function, ast.FunctionDef)
    call = next(node for node in ast.walk(function) if isinstance(node, ast.Call) and node.keywords)
    found = present_names(function)
    present = frozenset(name for name in found if holds(found, name, call.lineno))
    fixed = frozenset(arg.arg for arg in function.args.args)
    return dict(param_tests.passed(call, fixed - {"m"}, present))


def test_a_call_passes_not_none_for_a_shown_local_and_a_display() -> None:
    given = _passed("def f(v):\n    v.pop('x')\n    m = v\n    g(m=m, d={}, s=f'{m}', u=unknown)\n")
    assert given == {"m": NOT_NONE, "d": NOT_NONE, "s": NOT_NONE, "u": ""}


def test_a_shown_parameter_is_handed_on_without_none() -> None:
    assert _passed("def f(v):\n    assert v is not None\n    g(x=v)\n")["x"] == "@v!"
    assert _handed_on("@v!", {"v": frozenset({"None", "'decode'"})}) == {"'decode'"}
    assert _handed_on("@v!", {}) == {NOT_NONE}
    assert _handed_on("@v", {}) is None


@pytest.mark.parametrize(
    ("test", "answer"),
    [("m is None", False), ("m is not None", True), ("not m", None), ("m == 'a'", None), ("m is True", None)],
)
def test_not_none_decides_identity_with_none_only(test: str, answer: bool | None) -> None:
    read = param_tests.read_test(ast.parse(test, mode="eval").body, frozenset({"m"}))
    assert read is not None
    assert param_tests.evaluate(read, {"m": frozenset({NOT_NONE})}) is answer
