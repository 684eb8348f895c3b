"""What the capture rules (GL1xx) share: is a value possibly a tensor (on the device), a short
display, and the fix that adds a keyword argument to a call."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from graphlint.checkers.machinery.core import kinds as T
from graphlint.checkers.machinery.core.names import source_text
from graphlint.findings import Fix
from graphlint.fixing.ops import SetKeyword

if TYPE_CHECKING:
    from graphlint.checkers.machinery.core.binder import FunctionWalker
    from graphlint.checkers.machinery.core.module_state import ModuleState

NOT_A_TENSOR = frozenset(
    {T.PY, T.STREAM, T.EVENT, T.GRAPH, T.GENERATOR, T.OPTIMIZER, T.SCALER, T.MODULE, T.GRAPHED, T.INSTANCE, T.FUNCTION}
)


def maybe_tensor(ty: T.Ty | None) -> bool:
    """Could this receiver be a tensor? Unknown receivers count; known non-tensors do not."""
    return ty is None or ty.kind not in NOT_A_TENSOR


def arg_is_tensor(w: FunctionWalker, node: ast.expr) -> bool:
    ty = w.ty(node)
    return ty is not None and ty.tensorish


def maybe_device_tensor(ty: T.Ty | None) -> bool:
    """Could reading this receiver on the host wait for the device? Unknown receivers count;
    non-tensors, host tensors and values the code names as host data (`lens_cpu`) do not."""
    return ty is None or (ty.kind not in NOT_A_TENSOR and ty.kind not in T.ON_HOST)


def arg_on_device(w: FunctionWalker, node: ast.expr) -> bool:
    """A tensor argument that may live on the device: printing or testing it reads the device."""
    return T.may_be_on_device(w.ty(node))


def method_of(call: ast.Call) -> tuple[str | None, str]:
    """``(method, receiver text)`` of `receiver.method(...)`; ``(None, "")`` for other calls."""
    func = call.func
    if isinstance(func, ast.Attribute):
        return func.attr, source_text(func.value)
    return None, ""


def receiver_kind(w: FunctionWalker, call: ast.Call) -> T.Ty | None:
    """The kind of the receiver of `receiver.method(...)`. One the binder does not know but the
    code names as host data (`batch.seq_lens_cpu.tolist()`) is that: the name is a reason not to
    report a host sync, as it is for a tensor of unknown place (`maybe_device_tensor`)."""
    func = call.func
    if not isinstance(func, ast.Attribute):
        return None
    kind = w.ty(func.value)
    if kind is None and T.named_as_host(func.value):
        return T.T_HOST_NAMED
    return kind


def short(node: ast.AST, limit: int = 40) -> str:
    text = source_text(node)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def keyword_fix(state: ModuleState, call: ast.Call, keyword: str, value: str, message: str) -> Fix:
    """Add ``keyword=value`` to ``call`` (or set it, if the call already passes it)."""
    applicability = "safe" if keyword == "cache_enabled" else "unsafe"
    return Fix(applicability, message, (SetKeyword(state.span(call), keyword, value),))
