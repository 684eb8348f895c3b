"""The constant keys of container accesses, as the value flow names them (`value_containers`).

A key is the `repr` of its value after Python's own equality of keys: `True` and `1.0` are the
key `1`, `"1"` stays `'1'` (so `d[1]` and `d["1"]` are different entries). Only what the
source spells as constants counts: literals, `-1`, and arithmetic or concatenation of them
(`1 + 1`, `"a" + "b"`); anything else is an unknown key, which reads every entry.
"""

from __future__ import annotations

import ast
import operator

_FOLD = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
}
_MAX_FOLDED = 1 << 16  # `"a" * 10**9` is not worth computing


def constant_value(node: ast.expr) -> int | str | None:
    """The int or str an expression is, when the source makes it one; None otherwise."""
    if isinstance(node, ast.Constant):
        value = node.value
        if isinstance(value, bool):
            return int(value)
        if isinstance(value, float) and value.is_integer():
            return int(value)
        return value if isinstance(value, (int, str)) else None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = constant_value(node.operand)
        return -inner if isinstance(inner, int) else None
    if isinstance(node, ast.BinOp) and type(node.op) in _FOLD:
        left, right = constant_value(node.left), constant_value(node.right)
        if left is None or right is None or (isinstance(node.op, ast.Mult) and not isinstance(left, int)):
            return None
        if isinstance(node.op, ast.Mult) and not isinstance(right, int):
            return None
        try:
            folded = _FOLD[type(node.op)](left, right)
        except (TypeError, ValueError, ZeroDivisionError):
            return None
        if isinstance(folded, (int, str)) and len(str(folded)) < _MAX_FOLDED:
            return folded
    return None


def constant_key(node: ast.expr) -> str | None:
    """The key ``node`` names, as the flow writes it; None when it is not a constant."""
    value = constant_value(node)
    return None if value is None else repr(value)


def slice_view(node: ast.Slice) -> str:
    """A slice with constant, non-negative bounds and no step as ``"low:high"`` (high may be
    empty); ``"*"`` for any other slice (its elements, positions unknown)."""
    if node.step is not None:
        return "*"
    low = constant_value(node.lower) if node.lower is not None else 0
    high = constant_value(node.upper) if node.upper is not None else ""
    if not isinstance(low, int) or low < 0 or (high != "" and (not isinstance(high, int) or high < low)):
        return "*"
    return f"{low}:{high}"
