"""What a fix does, as data: the few source transformations graphlint's rules ask for.

A rule says *what* to change (append `.clone()` to this expression, set this keyword on
this call) and names the node by its span; `graphlint.fixing.edits` finds the node in the
file's libcst tree and rewrites it there, so comments, trailing commas, parentheses and
line breaks survive by construction instead of by text offsets.

The operations are small frozen values: summaries that hold them are pickled into the
cache, and two findings that ask for the same change are applied once because their
operations compare equal. A span is (line, column, end_line, end_column), 1-based, columns
in characters, end exclusive: the span the finding itself uses for the node.
"""

from __future__ import annotations

from dataclasses import dataclass

Span = tuple[int, int, int, int]


@dataclass(frozen=True)
class AppendMethodCall:
    """``expr`` -> ``expr.method()`` (parenthesised first when ``expr`` is not an atom)."""

    span: Span  # the expression
    method: str


@dataclass(frozen=True)
class ReplaceAssignWithCopy:
    """``target = value`` -> ``target.copy_(value)``: write into the existing tensor."""

    span: Span  # the assignment statement


@dataclass(frozen=True)
class SetKeyword:
    """Pass ``keyword=value`` to the call: replace the value if passed, else add the argument."""

    span: Span  # the call
    keyword: str
    value: str  # Python source of the value expression


@dataclass(frozen=True)
class InsertStatementAfter:
    """Insert ``code`` right after a statement, in the same block: one simple statement, or an
    `if` guarding simple ones (`if x is not None:` then `x.record_stream(s)`)."""

    span: Span  # the statement
    code: str


@dataclass(frozen=True)
class RenameAttribute:
    """``base.old`` -> ``base.attr``: call the sibling operation (`default_stream` -> `current_stream`)."""

    span: Span  # the attribute expression
    attr: str


FixOperation = AppendMethodCall | ReplaceAssignWithCopy | SetKeyword | InsertStatementAfter | RenameAttribute


def overlaps(a: Span, b: Span) -> bool:
    """Whether two node spans share text (or are the same point): their fixes cannot both go in one pass."""
    start_a, end_a = a[:2], a[2:]
    start_b, end_b = b[:2], b[2:]
    if start_a == end_a == start_b == end_b:
        return True
    return start_a < end_b and start_b < end_a
