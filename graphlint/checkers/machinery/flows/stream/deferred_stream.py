"""A stream read when a deferred call is made, not when it runs.

`functools.partial(kernel, ..., stream=torch.cuda.current_stream())` evaluates the stream now.
Called at once, that is the stream it runs under anyway; handed on to run later (queued for a
delayed weight-gradient pass, stored for an overlap scheduler), it runs under whatever stream is
current then, while its kernels launch on the old one, which nothing orders with the new one
(TransformerEngine 23a3f543: a delayed wgrad GEMM closure kept the backward stream and ran on
MoE's wgrad stream, and FSDP saw its gradients as done too early). A lambda reads the stream
when it runs and is fine; a partial only called in the function that made it is fine too.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import TYPE_CHECKING

from graphlint.checkers.machinery.core.tensor_values import PARTIALS
from graphlint.checkers.machinery.flows.stream.stream_identity import names_current_stream

if TYPE_CHECKING:
    from graphlint.checkers.machinery.core.module_state import Binder


@dataclass
class DeferredStream:
    stream: ast.expr  # the current-stream expression bound into the partial
    name: str  # the name the partial is bound to
    escape_line: int  # where it is handed on


def deferred_stream(walker: Binder, stmt: ast.Assign) -> DeferredStream | None:
    """The current stream bound into a partial assigned here, when the function hands the partial
    on (an argument of another call, an element, a stored or returned value)."""
    call = stmt.value
    if len(stmt.targets) != 1 or not isinstance(stmt.targets[0], ast.Name) or not isinstance(call, ast.Call):
        return None
    if not call.args or walker.resolve(call.func) not in PARTIALS:  # every assignment asks: cheap tests first
        return None
    stream = next((v for v in [*call.args[1:], *(k.value for k in call.keywords)] if _is_current(walker, v)), None)
    if stream is None:
        return None
    name = stmt.targets[0].id
    line = _escape(walker.node, name)
    return None if line is None else DeferredStream(stream, name, line)


def _is_current(walker: Binder, value: ast.expr) -> bool:
    """The current stream in any spelling, or its `.cuda_stream` handle."""
    if isinstance(value, ast.Attribute) and value.attr == "cuda_stream":
        value = value.value
    return names_current_stream(walker, value)


def _escape(function: ast.AST, name: str) -> int | None:
    """The first line where ``name`` is handed on rather than called."""
    for node in ast.walk(function):
        if isinstance(node, ast.Call):
            values = [*node.args, *(k.value for k in node.keywords)]
            if any(_holds(v, name) for v in values):
                return node.lineno
        elif isinstance(node, (ast.Return, ast.Yield)) and node.value is not None and _holds(node.value, name):
            return node.lineno
        elif isinstance(node, ast.Assign) and _holds(node.value, name):
            if any(isinstance(t, (ast.Attribute, ast.Subscript)) for t in node.targets):
                return node.lineno
    return None


def _holds(value: ast.expr, name: str) -> bool:
    """The value is the name, or a list, tuple or dict literal with it as an element."""
    if isinstance(value, ast.Name):
        return value.id == name
    if isinstance(value, (ast.List, ast.Tuple, ast.Set)):
        return any(_holds(v, name) for v in value.elts)
    if isinstance(value, ast.Dict):
        return any(v is not None and _holds(v, name) for v in value.values)
    return False
