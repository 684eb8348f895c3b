"""GL102 data-dependent-control-flow."""

from __future__ import annotations

import ast

from graphlint.checkers.machinery.core import kinds as T
from graphlint.checkers.machinery.core.binder import FunctionWalker
from graphlint.checkers.machinery.core.model import COMPILE, GRAPH
from graphlint.checkers.machinery.detectors import Detector
from graphlint.checkers.rules.capture.common import short
from graphlint.registry import Rule, declare

RULE = declare(
    Rule(
        code="GL102",
        name="data-dependent-control-flow",
        summary=(
            "`if`, `while`, `assert` or a conditional expression whose test is a tensor "
            "(`if x.sum() > 0:`, `if torch.any(m):`, `while err > tol:`) in capture."
        ),
        why=(
            "Python must read the tensor to choose a branch: a host sync that fails the "
            "capture. Where it does not fail, the branch taken at capture is frozen into the "
            "graph and every replay takes it, whatever the data says."
        ),
        example="""
            import torch

            with torch.cuda.graph(g):
                y = model(x)
                if y.abs().max() > 10:
                    y = y / 10
        """,
        use_instead="""
            import torch

            with torch.cuda.graph(g):
                y = model(x)
                scale = torch.where(y.abs().amax() > 10, 0.1, 1.0)
                y = y * scale
        """,
        consequences={
            GRAPH: "deciding the branch needs a host sync, and the branch taken at capture is frozen into the graph",
            COMPILE: "torch.compile breaks the graph on data-dependent control flow (cudagraphs skipped for this part)",
        },
    )
)


class DataDependentControlFlow(Detector):
    rule = RULE

    def on_test(self, w: FunctionWalker, test: ast.expr, what: str) -> None:
        """A tensor-valued test of ``if``/``while``/``assert``/conditional expressions."""
        if T.may_be_on_device(w.ty(test)):  # a host tensor's value is read without the device
            w.hazard(RULE.code, test, f"`{what}` on a tensor-valued condition `{short(test)}`")
