"""Tensors kept in the elements of a local list, one name per element the flow can index.

Pipelined code keeps one tensor per step in a list and reads the previous step's entry in
the next iteration, on another stream (context-parallel attention: `out[i]` written under
`torch.cuda.stream(streams[i])`, `out[i - 1]` read on the current stream one pass later).
The stream flow tracks names, so each element whose index is known on a pass (a constant,
or the loop counter plus a constant) is the name `out[1]`; a read whose index is unknown
reads every element. A loop whose body indexes by its counter minus a constant runs one
more pass, so that the last element written on the second pass meets the read that comes
one iteration after it.
"""

from __future__ import annotations

import ast

from graphlint.checkers.machinery.flows.stream.stream_identity import int_value

_LIST_CALLS = frozenset({"list"})


def is_list_value(value: ast.AST | None) -> bool:
    """`[None, None]`, `[None] * n`, `[]`, `[f(x) for x in xs]`, `list()`: a fresh list."""
    if isinstance(value, (ast.List, ast.ListComp)):
        return True
    if isinstance(value, ast.BinOp) and isinstance(value.op, ast.Mult):
        return isinstance(value.left, ast.List) or isinstance(value.right, ast.List)
    return isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in _LIST_CALLS


def element_name(container: str, index: int) -> str:
    """The flow's name of one element: brackets keep it apart from every Python name."""
    return f"{container}[{index}]"


def elements_of(container: str, names: list[str]) -> list[str]:
    """The element names of ``container`` among ``names``."""
    prefix = container + "["
    return [name for name in names if name.startswith(prefix)]


def element_index(subscript: ast.Subscript, counters: dict[str, int]) -> int | None:
    """The index of `xs[i - 1]` on this pass (counters known), or None."""
    index = subscript.slice
    return int_value(index, counters) if isinstance(index, ast.expr) else None


def indexes_back(loop: ast.For | ast.AsyncFor) -> bool:
    """Does the body index something by the loop counter minus a constant (`xs[i - 1]`)?"""
    if not isinstance(loop.target, ast.Name):
        return False
    counter = loop.target.id
    for node in ast.walk(ast.Module(body=loop.body, type_ignores=[])):
        if isinstance(node, ast.Subscript) and _counter_minus(node.slice, counter):
            return True
    return False


def _counter_minus(index: ast.AST, counter: str) -> bool:
    return (
        isinstance(index, ast.BinOp)
        and isinstance(index.op, ast.Sub)
        and isinstance(index.left, ast.Name)
        and index.left.id == counter
        and isinstance(index.right, ast.Constant)
        and isinstance(index.right.value, int)
    )
