"""Which writes and uses one path can run together: the branch facts the stream flow reads.

A crossing between a write and a use is no crossing when the tests around them cannot hold at
once, and a crossing is certain only where they can (or no flag ties them). These are the
answers a maintainer relies on when a wait sits in one arm of an `if`.
"""

from __future__ import annotations

import ast

import pytest

from graphlint.checkers.machinery.core.syntax import statements
from graphlint.checkers.machinery.flows.stream.stream_certainty import exclusive, may_run_both, never_both


def _body(source: str) -> tuple[list[ast.stmt], dict[str, ast.stmt]]:
    """The function's body and its statements marked `# <name>`, by name."""
    tree = ast.parse(source)
    function = tree.body[0]
    assert isinstance(function, ast.FunctionDef)
    lines = source.splitlines()
    marked = {}
    for stmt in statements(function.body):
        line = lines[stmt.lineno - 1]
        if "# " in line:
            marked[line.rsplit("# ", 1)[1].strip()] = stmt
    return function.body, marked


LAYOUTS = """
def f(fmt, flag, x):
    if fmt == "thd":
        x = reorder(x)  # write
    else:
        wait()  # wait
    if fmt in ("bshd", "sbhd"):
        use(x)  # use-other-layout
    else:
        use(x)  # use-same-layout
    if flag:
        use(x)  # use-flag
"""


@pytest.mark.parametrize(
    ("use", "together"),
    [("use-other-layout", False), ("use-same-layout", True), ("use-flag", True)],
)
def test_facts_on_a_parameter_decide_whether_one_path_runs_both(use: str, together: bool) -> None:
    body, marked = _body(LAYOUTS)
    assert may_run_both(body, marked["write"], marked[use]) is together
    assert never_both(body, marked["write"], marked[use]) is not together


def test_a_rebound_name_says_nothing() -> None:
    body, marked = _body(
        """
def f(fmt, x):
    if fmt == "thd":
        x = reorder(x)  # write
    fmt = next_format(fmt)
    if fmt != "thd":
        use(x)  # use
"""
    )
    assert not never_both(body, marked["write"], marked["use"])  # `fmt` changed in between
    assert not may_run_both(body, marked["write"], marked["use"])  # and the same name is tested


def test_negation_and_conjunction_are_read() -> None:
    body, marked = _body(
        """
def f(packed, fp8, x):
    if packed and not fp8:
        x = reorder(x)  # write
    if fp8:
        use(x)  # use
"""
    )
    assert never_both(body, marked["write"], marked["use"])


def test_arms_of_one_statement_are_exclusive_but_a_try_body_and_its_handler_are_not() -> None:
    body, marked = _body(
        """
def f(flag, x):
    if flag:
        x = a(x)  # then
    else:
        wait()  # else
    try:
        x = b(x)  # body
    except RuntimeError:
        wait()  # handler
"""
    )
    assert exclusive(body, marked["then"], marked["else"])
    assert not exclusive(body, marked["body"], marked["handler"])
