"""Capture predicates: a file's helpers that return the capture state, and what is not one.

The binder skips the branch a capture-state test rules out. These tests pin which helpers
count as that test (so wrapping the query does not hide a guard) and, as much, which do not
(so a helper that may return either value while capturing never hides a finding).
"""

from __future__ import annotations

import ast

import pytest

from graphlint.checkers.machinery.core.capture_state import (
    GUARD_CALLS,
    CaptureFlags,
    capture_predicates,
    capture_value,
    in_guarded_code,
    short_circuited,
)
from graphlint.checkers.machinery.core.model import FunctionSummary
from graphlint.checkers.machinery.core.names import dotted_parts


def _predicates(source: str) -> dict[str, bool]:
    tree = ast.parse(source)
    defs = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}

    def resolve(node: ast.expr) -> str | None:
        parts = dotted_parts(node)
        if parts is None:
            return None
        return ".".join(parts) if parts[0] in defs | {"torch", "bool"} else None

    functions = [(node.name, node) for node in tree.body if isinstance(node, ast.FunctionDef)]
    return capture_predicates(functions, resolve)


PREFIX = "import torch\n\n"


@pytest.mark.parametrize(
    ("body", "value"),
    [
        ("return torch.cuda.is_current_stream_capturing()", True),
        ("return bool(torch.cuda.is_current_stream_capturing())", True),
        ("return not torch.cuda.is_current_stream_capturing()", False),
        # CUDA is present whenever a capture runs: the conjunction is still the capture state
        ("return torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()", True),
        # the handler runs only if the query failed, which it cannot while capturing
        (
            "try:\n        return torch.cuda.is_current_stream_capturing()\n    except Exception:\n        return False",
            True,
        ),
        # a branch the capture state rules out is not a path that runs while capturing
        (
            "if not torch.cuda.is_available():\n        return False\n    return torch.cuda.is_current_stream_capturing()",
            True,
        ),
        # every path returns false while capturing, whichever way the other test goes
        (
            "if torch.compiler.is_compiling():\n        return False\n    return not torch.cuda.is_current_stream_capturing()",
            False,
        ),
    ],
)
def test_a_helper_that_returns_the_capture_state_on_every_path_is_a_predicate(body: str, value: bool) -> None:
    assert _predicates(f"{PREFIX}def helper():\n    {body}\n") == {"helper": value}


@pytest.mark.parametrize(
    "body",
    [
        # Dynamo's query is false in a raw stream capture
        "return torch.compiler.is_compiling()",
        # a caller's argument decides: unknown here
        'return device.type == "cuda" and torch.cuda.is_current_stream_capturing()',
        # one path returns true while capturing, another false
        "if flag:\n        return True\n    return not torch.cuda.is_current_stream_capturing()",
        # the handler may run: the try does more than ask
        "try:\n        prepare()\n        return torch.cuda.is_current_stream_capturing()\n    except Exception:\n        return False",
        # something else happens first
        'print("asked")\n    return torch.cuda.is_current_stream_capturing()',
        # a validator that returns None on every path says nothing about the capture state
        "if flag:\n        raise ValueError(flag)",
    ],
)
def test_a_helper_that_may_return_either_value_while_capturing_is_not(body: str) -> None:
    assert _predicates(f"{PREFIX}def helper(device=None, flag=False):\n    {body}\n") == {}


def test_a_helper_of_a_helper_is_found_and_a_name_that_is_rebound_locally_is_not() -> None:
    source = (
        f"{PREFIX}def inner():\n    return torch.cuda.is_current_stream_capturing()\n\n"
        "def outer():\n    return not inner()\n\n"
        "def shadowed(torch):\n    return torch.cuda.is_current_stream_capturing()\n"
    )
    assert _predicates(source) == {"inner": True, "outer": False}


def test_a_decorated_helper_is_not_trusted() -> None:
    source = f"{PREFIX}@cache\ndef helper():\n    return torch.cuda.is_current_stream_capturing()\n"
    assert _predicates(source) == {}


@pytest.mark.parametrize(
    ("test", "value"),
    [
        ("not torch.compiler.is_compiling() and other", False),  # the binder's reading of Dynamo
        ("torch.cuda.is_current_stream_capturing() or other", True),
        ("other and torch.cuda.is_current_stream_capturing()", None),
        ("helper()", None),
    ],
)
def test_the_binder_reads_tests_with_the_library_queries(test: str, value: bool | None) -> None:
    expr = ast.parse(test, mode="eval").body

    def resolve(node: ast.expr) -> str | None:
        parts = dotted_parts(node)
        return ".".join(parts) if parts else None

    assert capture_value(expr, resolve, GUARD_CALLS) is value


def _function(source: str) -> ast.FunctionDef:
    node = ast.parse(source).body[0]
    assert isinstance(node, ast.FunctionDef)
    return node


@pytest.mark.parametrize(
    ("source", "kept"),
    [
        ("def f():\n    check = x\n    return check\n", True),
        ("def f():\n    check = x\n    check = y\n", False),  # bound twice
        ("def f():\n    check = x\n    for check in xs:\n        pass\n", False),  # a loop rebinds it
        ("def f():\n    check = x\n    def g():\n        nonlocal check\n        check = 1\n", False),
        ("def f():\n    check = x\n    try:\n        pass\n    except E as check:\n        pass\n", False),
    ],
)
def test_a_flag_is_only_a_name_the_function_binds_once(source: str, kept: bool) -> None:
    flags = CaptureFlags(_function(source))
    name = ast.Name("check", ast.Store())
    flags.note(name, False, ())
    assert flags.value(ast.Name("check", ast.Load()), ()) is (False if kept else None)


def test_a_flag_says_nothing_under_other_capture_regions_or_at_module_level() -> None:
    flags = CaptureFlags(_function("def f():\n    check = x\n"))
    flags.note(ast.Name("check", ast.Store()), True, ())
    assert flags.value(ast.Name("check", ast.Load()), (0,)) is None  # a capture opened after it was read
    module = CaptureFlags(ast.parse("check = x\n"))
    module.note(ast.Name("check", ast.Store()), True, ())
    assert module.value(ast.Name("check", ast.Load()), ()) is None  # evaluated at import


@pytest.mark.parametrize(
    ("test", "skipped"),
    [
        ("not capturing() and a and b", ["a", "b"]),
        ("a and not capturing() and b", ["b"]),
        ("capturing() or a", ["a"]),
        ("a or capturing()", []),
        ("capturing() and a", []),  # true does not stop an `and`
        ("unknown() and a", []),
    ],
)
def test_the_operands_after_the_one_that_stops_a_capture_are_not_evaluated(test: str, skipped: list[str]) -> None:
    expr = ast.parse(test, mode="eval").body
    assert isinstance(expr, ast.BoolOp)

    def value(operand: ast.expr) -> bool | None:
        return capture_value(operand, lambda node: ast.unparse(node), {"capturing": True})

    assert [ast.unparse(operand) for operand in short_circuited(expr, value)] == skipped


def test_a_position_is_guarded_only_inside_a_recorded_span() -> None:
    function = FunctionSummary("m.f", "f", 1, guarded_spans=[(3, 9, 5, 20)])
    assert in_guarded_code(function, 4, 1)
    assert in_guarded_code(function, 3, 9) and in_guarded_code(function, 5, 20)
    assert not in_guarded_code(function, 3, 8)  # the test before the guarded operand, on the same line
    assert not in_guarded_code(function, 5, 21)
    assert not in_guarded_code(FunctionSummary("m.g", "g", 1), 4, 1)
