"""Strong updates in straight-line code: a read right after a store sees only what was stored.

The value flow is flow-insensitive: `d["a"] = g` adds `g` to what `d["a"]` holds, beside the
`f` of `d = {"a": f}`. Within one block of one function, though, a read of the same access
path (`d["a"]`, `self.fn`, `d["a"]["b"]`: a name, then constant keys and attributes) with
nothing in between that could change it sees exactly the stored value. The recorder keeps
those paths while it walks the block and forgets them all at anything that could run other
code or alias the path: a call (from the point its arguments are evaluated), `await`,
`yield`, any other store into a container or attribute, any statement but a simple
assignment or expression (loops, branches, definitions, imports, `del`), and, for one name,
its rebinding. The solver (`value_flow`) still checks that the receiver is a plain
container, or an instance whose class defines neither the attribute nor `__setattr__`,
before it trusts the stored value over the flow-insensitive one.
"""

from __future__ import annotations

import ast

from graphlint.checkers.machinery.values.value_keys import constant_key

# Statements after which what the block stored is still what it holds.
STRAIGHT = (ast.Assign, ast.AnnAssign, ast.Expr, ast.Return, ast.Pass)


def access_path(node: ast.expr) -> tuple[str, ...] | None:
    """``d["a"].f`` as ``("d", "['a'", ".f")``; None unless every step is a constant."""
    steps: list[str] = []
    while True:
        if isinstance(node, ast.Attribute):
            steps.append("." + node.attr)
            node = node.value
        elif isinstance(node, ast.Subscript) and not isinstance(node.slice, ast.Slice):
            key = constant_key(node.slice)
            if key is None:
                return None
            steps.append("[" + key)
            node = node.value
        elif isinstance(node, ast.Name):
            steps.append(node.id)
            return tuple(reversed(steps))
        else:
            return None


def forget_name(memory: dict[tuple[str, ...], tuple | None], name: str) -> None:
    """A rebound name: the paths through it start from another object now."""
    for path in [p for p in memory if p[0] == name]:
        del memory[path]
