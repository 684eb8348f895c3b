"""What an expression is to the memory the stream flow tracks, by its syntax.

A view (`x[..., :d]`, `x.view(n, -1)`, `x.T`, `q.split(...)`, `x.add_(1)` which returns `x`)
holds its base's memory; an empty allocation (`torch.empty`, `x.new_empty`) holds memory no
kernel has written yet; a tuple, list or dict display, a constructor call or a
`functools.partial` holds what it is given. These are questions about syntax and names
only; `stream_flow` turns the answers into storages (`tensor_state`).
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from graphlint.checkers.machinery.core import kinds as T

# Tensor methods whose result shares the receiver's memory (or may: reshape, flatten and
# contiguous return a view whenever they can; when unsure, a view frees nothing).
VIEW_METHODS = frozenset(
    {
        "view",
        "view_as",
        "reshape",
        "reshape_as",
        "flatten",
        "unflatten",
        "transpose",
        "permute",
        "unsqueeze",
        "squeeze",
        "expand",
        "expand_as",
        "narrow",
        "select",
        "t",
        "movedim",
        "moveaxis",
        "swapaxes",
        "swapdims",
        "as_strided",
        "diagonal",
        "detach",
        "contiguous",
        "unfold",
        "view_as_real",
        "view_as_complex",
        "numpy",
        "__getitem__",
    }
)
# Methods and torch functions giving several views of their receiver / first argument.
SPLITTING_METHODS = frozenset(
    {"split", "chunk", "unbind", "tensor_split", "split_with_sizes", "hsplit", "vsplit", "dsplit"}
)
VIEW_ATTRS = frozenset({"T", "mT", "H", "mH", "data", "real", "imag"})
TORCH_VIEW_FUNCTIONS = frozenset(
    {f"torch.{name}" for name in VIEW_METHODS | SPLITTING_METHODS if not name.startswith("_")}
)
# Allocations that launch no kernel: the memory holds nothing any stream produced.
EMPTY_FUNCTIONS = frozenset({"torch.empty", "torch.empty_like", "torch.empty_strided"})
EMPTY_METHODS = frozenset({"new_empty", "new_empty_strided"})
PARTIALS = frozenset({"functools.partial", "partial"})
# Builtins that make views or containers of a tensor's rows without reading them.
ROW_ITERATORS = frozenset({"zip", "enumerate", "list", "tuple", "iter", "reversed"})


def view_root(node: ast.expr, resolve: Callable[[ast.AST], str | None]) -> ast.expr:
    """The expression a chain of views starts from: `x[..., :d].view(n, -1).T` -> `x`."""
    while True:
        if isinstance(node, ast.Subscript) or (isinstance(node, ast.Attribute) and node.attr in VIEW_ATTRS):
            node = node.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and returns_receiver(node.func.attr):
            func = node.func
            if resolve(func) is not None:
                if resolve(func) in TORCH_VIEW_FUNCTIONS and node.args:
                    node = node.args[0]
                    continue
                return node
            node = func.value
        else:
            return node


def returns_receiver(method: str) -> bool:
    """`x.view(...)`, `x.add_(1)`: the result is (a view of) the receiver."""
    return method in VIEW_METHODS or method in SPLITTING_METHODS or is_in_place(method)


def is_in_place(method: str) -> bool:
    return method.endswith("_") and not method.endswith("__")


def splits(value: ast.expr, resolve: Callable[[ast.AST], str | None]) -> ast.expr | None:
    """`q.split(...)`, `torch.chunk(x, 2)`: the tensor whose views a tuple unpacking gets."""
    if not isinstance(value, ast.Call):
        return None
    name = resolve(value.func)
    if name is not None:
        if name.startswith("torch.") and name.split(".")[-1] in SPLITTING_METHODS and value.args:
            return value.args[0]
        return None
    if isinstance(value.func, ast.Attribute) and value.func.attr in SPLITTING_METHODS:
        return value.func.value
    return None


def is_empty_allocation(value: ast.expr, resolve: Callable[[ast.AST], str | None]) -> bool:
    if not isinstance(value, ast.Call):
        return False
    name = resolve(value.func)
    if name is not None:
        return name in EMPTY_FUNCTIONS
    return isinstance(value.func, ast.Attribute) and value.func.attr in EMPTY_METHODS


def is_holder_call(call: ast.Call, resolve: Callable[[ast.AST], str | None], ty: T.Ty | None) -> bool:
    """A constructor of a class (not torch's) or a partial: it keeps what it is given."""
    name = resolve(call.func)
    if name in PARTIALS:
        return True
    if ty is not None and ty.kind == T.INSTANCE:
        return True
    if name is None:
        func = call.func
        tail = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        return _camel(tail) and not isinstance(func, ast.Attribute)
    tail = name.rsplit(".", 1)[-1]
    if name.startswith("torch."):  # torch.distributed.P2POp(op, t) keeps t; torch.Tensor(...) is a tensor
        return _camel(tail) and not tail.endswith(_TORCH_TENSOR_CLASSES)
    return _camel(tail)


_TORCH_TENSOR_CLASSES = ("Tensor", "Parameter", "Buffer")


def _camel(name: str) -> bool:
    return name[:1].isupper() and not name.isupper()


def is_str_expr(node: ast.AST) -> bool:
    """A string built here: `fmt + "_" + fmt`, f-strings, `"%s" % x`, `"{}".format(x)`."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, ast.JoinedStr):
        return True
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mod)):
        return is_str_expr(node.left) or (isinstance(node.op, ast.Add) and is_str_expr(node.right))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return node.func.attr in ("format", "join") and isinstance(node.func.value, ast.Constant)
    return False


def argument_names(call: ast.Call) -> list[str]:
    """The names passed to a call, directly or starred, positionally or by keyword."""
    names = []
    for arg in [*call.args, *(kw.value for kw in call.keywords)]:
        if isinstance(arg, ast.Starred):
            arg = arg.value
        if isinstance(arg, ast.Name):
            names.append(arg.id)
    return names
