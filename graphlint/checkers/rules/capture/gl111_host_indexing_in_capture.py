"""GL111 host-indexing-in-capture."""

from __future__ import annotations

import ast

from graphlint.checkers.machinery.core import kinds as T
from graphlint.checkers.machinery.core.binder import FunctionWalker
from graphlint.checkers.machinery.core.model import COMPILE, GRAPH
from graphlint.checkers.machinery.detectors import Detector
from graphlint.checkers.rules.capture.common import arg_is_tensor, maybe_tensor, short
from graphlint.registry import Rule, declare

RULE = declare(
    Rule(
        code="GL111",
        name="host-indexing-in-capture",
        summary=(
            "Indexing or slicing a CUDA tensor with a Python list, a CPU tensor, or slice bounds "
            "that are tensors (`x[[0, 2]]`, `x[idx_cpu]`, `x[:n_gpu]`) in capture."
        ),
        why=(
            "A list or CPU index is copied to the device on every use (captured once, frozen); "
            "a tensor used as a slice bound is read on the host (a sync), and the slice length "
            "seen at capture is frozen."
        ),
        example="""
            import torch

            with torch.cuda.graph(g):
                head = x[[0, 2, 4]]
                prefix = x[: lengths.max()]
        """,
        use_instead="""
            import torch

            index = torch.tensor([0, 2, 4], device="cuda")  # built once, before capture
            with torch.cuda.graph(g):
                head = x.index_select(0, index)
                prefix = x[:max_len]  # a Python int fixed for this graph
        """,
        consequences={
            GRAPH: "the index is copied or read on the host once at capture and frozen",
            COMPILE: "the host index forces a sync or graph break under torch.compile",
        },
    )
)


class HostIndexing(Detector):
    rule = RULE

    def on_Subscript(self, w: FunctionWalker, node: ast.Subscript) -> None:
        if not isinstance(node.ctx, ast.Load):
            return
        receiver_ty = w.ty(node.value)
        if not maybe_tensor(receiver_ty):
            return
        index = node.slice
        index_ty = w.ty(index)
        if index_ty is not None and index_ty.kind in T.MASKS:
            return  # a boolean mask: GL103's data-dependent size, not a host index
        if isinstance(index, ast.List) or (
            isinstance(index, ast.Tuple) and any(isinstance(e, ast.List) for e in index.elts)
        ):
            w.hazard(RULE.code, node, f"`{short(node)}` indexes with a Python list")
        elif (
            index_ty is not None and index_ty.kind == T.HOST and receiver_ty is not None and receiver_ty.kind != T.HOST
        ):
            w.hazard(RULE.code, node, f"`{short(node)}` indexes a device tensor with a CPU tensor")
        else:
            _check_slice_bounds(w, node, index)


def _check_slice_bounds(w: FunctionWalker, node: ast.Subscript, index: ast.expr) -> None:
    for part in index.elts if isinstance(index, ast.Tuple) else [index]:
        if isinstance(part, ast.Slice):
            for bound in (part.lower, part.upper, part.step):
                if bound is not None and arg_is_tensor(w, bound):
                    w.hazard(RULE.code, node, f"slice bound `{short(bound)}` is a tensor read on the host")
                    return
