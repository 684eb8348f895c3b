"""GL103 dynamic-shape-op-in-capture."""

from __future__ import annotations

import ast

from graphlint.checkers.machinery.core import kinds as T
from graphlint.checkers.machinery.core.binder import FunctionWalker
from graphlint.checkers.machinery.core.model import COMPILE, GRAPH
from graphlint.checkers.machinery.detectors import Detector
from graphlint.checkers.rules.capture.common import arg_is_tensor, maybe_device_tensor, method_of, receiver_kind, short
from graphlint.registry import Rule, declare

RULE = declare(
    Rule(
        code="GL103",
        name="dynamic-shape-op-in-capture",
        summary=(
            "Operations whose output size depends on the data: `nonzero`, `torch.unique`, "
            "`masked_select`, boolean-mask indexing `x[mask]`, one-argument `torch.where`, "
            "`repeat_interleave` with tensor repeats and no `output_size`, in capture."
        ),
        why=(
            "The output shape must be known on the host to allocate it, so these sync; a graph "
            "also freezes the size seen at capture, so later replays silently drop or invent "
            "elements."
        ),
        example="""
            import torch

            with torch.cuda.graph(g):
                idx = scores.nonzero()
                kept = x[scores > 0]
        """,
        use_instead="""
            import torch

            with torch.cuda.graph(g):
                idx = scores.nonzero_static(size=max_items)
                kept = torch.where(scores > 0, x, 0)
        """,
        consequences={
            GRAPH: "the output size needs a host sync, and the size seen at capture is frozen into the graph",
            COMPILE: "a data-dependent output shape makes torch.compile break the graph or skip cudagraphs",
        },
    )
)

_DYNAMIC_SHAPE_FUNCTIONS = frozenset(
    {"torch.nonzero", "torch.unique", "torch.unique_consecutive", "torch.masked_select", "torch.argwhere"}
)
_DYNAMIC_SHAPE_METHODS = frozenset({"nonzero", "unique", "unique_consecutive", "masked_select", "argwhere"})


class DynamicShapeOp(Detector):
    rule = RULE

    def on_Call(self, w: FunctionWalker, call: ast.Call, name: str | None) -> None:
        method, receiver = method_of(call)
        if (name in _DYNAMIC_SHAPE_FUNCTIONS and _data_may_be_on_device(w, call)) or (
            name is None and method in _DYNAMIC_SHAPE_METHODS and maybe_device_tensor(receiver_kind(w, call))
        ):
            shown = name or f"{receiver}.{method}"
            w.hazard(RULE.code, call, f"`{shown}()` has a data-dependent output size")
        elif name == "torch.where" and len(call.args) == 1 and not call.keywords:
            w.hazard(RULE.code, call, "one-argument `torch.where(cond)` is `nonzero`: a data-dependent output size")
        elif (name == "torch.repeat_interleave" or (name is None and method == "repeat_interleave")) and (
            T.keyword(call, "output_size") is None and _repeats_are_tensor(w, call, name is not None)
        ):
            w.hazard(
                RULE.code,
                call,
                "`repeat_interleave` with tensor repeats and no `output_size` has a data-dependent size",
            )

    def on_Subscript(self, w: FunctionWalker, node: ast.Subscript) -> None:
        """Boolean-mask indexing: the number of selected elements is data."""
        if not isinstance(node.ctx, ast.Load) or not maybe_device_tensor(w.ty(node.value)):
            return
        index_ty = w.ty(node.slice)
        if index_ty is not None and index_ty.kind in T.MASKS:
            w.hazard(RULE.code, node, f"boolean-mask indexing `{short(node)}` has a data-dependent output size")


def _data_may_be_on_device(w: FunctionWalker, call: ast.Call) -> bool:
    """`torch.nonzero(x)` on a tensor known to be in host memory sizes its output on the host:
    no device sync, and no kernel of the graph depends on it."""
    data = call.args[0] if call.args else T.keyword(call, "input")
    return data is None or maybe_device_tensor(w.ty(data))


def _repeats_are_tensor(w: FunctionWalker, call: ast.Call, function_form: bool) -> bool:
    repeats = T.keyword(call, "repeats")
    if repeats is None:
        if function_form:
            if len(call.args) == 1:
                return True  # torch.repeat_interleave(counts): the counts decide the size
            repeats = call.args[1] if len(call.args) > 1 else None
        else:
            repeats = call.args[0] if call.args else None
    return repeats is not None and arg_is_tensor(w, repeats)
