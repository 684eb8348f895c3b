"""The statement walker's frames: every flow and the binder ask them where a statement is
(at a body's top level, in which loop, `try` or branch), and `break`/`continue` name the loop
they leave or restart from them, so a wrong frame misplaces every analysis at once."""

from __future__ import annotations

import ast
import textwrap

from graphlint.checkers.machinery.core.flow import FlowState, Loop, walk


class _Recording(FlowState):
    """Records, per simple statement (by its source text), the frames around it, and each
    jump with the loop it names; walks nested functions as their own bodies."""

    loop_passes = 1

    def __init__(self) -> None:
        self.seen: dict[str, tuple[tuple[str, str, int], ...]] = {}
        self.jumps: list[tuple[str, int, int | None]] = []

    def simple(self, stmt: ast.stmt) -> None:
        self.seen[ast.unparse(stmt)] = tuple((f.kind, type(f.node).__name__, f.index) for f in self.frames)

    def jump(self, stmt: ast.Break | ast.Continue, loop: Loop | None) -> None:
        self.jumps.append((type(stmt).__name__, stmt.lineno, None if loop is None else loop.lineno))

    def definition(self, stmt: ast.stmt) -> None:
        if isinstance(stmt, ast.FunctionDef):
            walk(self, stmt.body)


def _walk(source: str) -> _Recording:
    state = _Recording()
    walk(state, ast.parse(textwrap.dedent(source)).body)
    assert state.frames == ()  # nothing left open
    return state


def test_frames_nest_as_the_code_does() -> None:
    state = _walk(
        """
        top()
        with ctx():
            try:
                for x in xs:
                    if c:
                        body()
                    else:
                        other()
            except E:
                handled()
            else:
                fine()
            finally:
                last()
        """
    )
    assert state.seen["top()"] == ()
    assert state.seen["body()"] == (
        ("with", "With", 0),
        ("try", "Try", 0),
        ("loop", "For", 0),
        ("alternative", "If", 0),
    )
    assert state.seen["other()"][-1] == ("alternative", "If", 1)
    assert state.seen["handled()"] == (("with", "With", 0), ("alternative", "Try", 0))
    assert state.seen["fine()"] == (("with", "With", 0), ("alternative", "Try", 1))
    assert state.seen["last()"] == (("with", "With", 0), ("try", "Try", 1))


def test_frames_count_loop_passes_and_match_cases() -> None:
    state = _Recording()
    state.loop_passes = 2
    passes: list[int] = []
    state.simple = lambda stmt: passes.append(state.frames[-1].index)  # type: ignore[method-assign]
    walk(state, ast.parse("while c:\n    step()\n").body)
    assert passes == [0, 1]
    matched = _walk("match v:\n    case 1:\n        one()\n    case _:\n        rest()\n")
    assert matched.seen["one()"] == (("alternative", "Match", 0),)
    assert matched.seen["rest()"] == (("alternative", "Match", 1),)


def test_break_and_continue_name_their_innermost_loop() -> None:
    state = _walk(
        """
        for x in xs:
            while c:
                if d:
                    break
                try:
                    continue
                finally:
                    pass
            continue
        """
    )
    assert state.jumps == [("Break", 5, 3), ("Continue", 7, 3), ("Continue", 10, 2)]


def test_a_continue_in_a_loops_else_belongs_to_the_outer_loop() -> None:
    state = _walk(
        """
        while outer:
            for x in xs:
                pass
            else:
                continue
        break
        """
    )
    assert state.jumps == [("Continue", 6, 2), ("Break", 7, None)]
    assert _walk("for x in xs:\n    pass\nelse:\n    done()\n").seen["done()"] == (("else", "For", 0),)


def test_a_nested_definition_starts_with_no_frames() -> None:
    state = _walk(
        """
        for x in xs:
            with ctx():
                def inner():
                    nested()
                    while c:
                        break
                after()
        """
    )
    assert state.seen["nested()"] == ()
    assert state.jumps == [("Break", 7, 6)]
    assert state.seen["after()"] == (("loop", "For", 0), ("with", "With", 0))


def test_a_jump_is_a_simple_statement_to_a_state_that_does_not_model_it() -> None:
    simple: list[str] = []

    class Plain(FlowState):
        def simple(self, stmt: ast.stmt) -> None:
            simple.append(type(stmt).__name__)

    walk(Plain(), ast.parse("for x in xs:\n    break\nwhile c:\n    continue\n").body)
    assert simple == ["Break", "Break", "Continue", "Continue"]
