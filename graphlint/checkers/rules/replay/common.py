"""What the replay rules (GL2xx) share: the `.clone()` fix that keeps a copy."""

from __future__ import annotations

import ast

from graphlint.checkers.machinery.core.binder import FunctionWalker
from graphlint.checkers.machinery.core.names import source_text
from graphlint.findings import Fix
from graphlint.fixing.ops import AppendMethodCall


def clone_fix(w: FunctionWalker, value: ast.AST) -> Fix | None:
    """Append `.clone()` to the kept expression (safe: a copy never changes what is computed)."""
    if not isinstance(value, (ast.Name, ast.Attribute, ast.Subscript, ast.Call)):
        return None
    return Fix("safe", f"keep a copy: `{source_text(value)}.clone()`", (AppendMethodCall(w.st.span(value), "clone"),))


def clone_fix_at(span: tuple[int, int, int, int]) -> Fix:
    """The same fix for a span recorded in a summary (0-based columns)."""
    line, col, end_line, end_col = span
    return Fix(
        "safe", "keep a copy: append `.clone()`", (AppendMethodCall((line, col + 1, end_line, end_col + 1), "clone"),)
    )
