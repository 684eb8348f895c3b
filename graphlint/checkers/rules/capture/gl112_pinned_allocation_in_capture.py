"""GL112 pinned-allocation-in-capture."""

from __future__ import annotations

import ast

from graphlint.checkers.machinery.core import kinds as T
from graphlint.checkers.machinery.core.binder import FunctionWalker
from graphlint.checkers.machinery.core.model import COMPILE, GRAPH
from graphlint.checkers.machinery.detectors import Detector
from graphlint.checkers.rules.capture.common import method_of
from graphlint.registry import Rule, declare

RULE = declare(
    Rule(
        code="GL112",
        name="pinned-allocation-in-capture",
        summary=(
            "`pin_memory()` and pinned host allocations (`torch.empty(..., pin_memory=True)` and "
            "other factories with `pin_memory=True`) in capture."
        ),
        why=(
            "Allocating page-locked host memory synchronises the device (cudaHostAlloc), which "
            "is illegal during stream capture."
        ),
        example="""
            import torch

            with torch.cuda.graph(g):
                host_buf = torch.empty(n, pin_memory=True)
        """,
        use_instead="""
            import torch

            host_buf = torch.empty(n, pin_memory=True)  # allocated once, before capture
            with torch.cuda.graph(g):
                out = model(static_x)
        """,
        consequences={
            GRAPH: "pinned allocation synchronises the device, which is illegal during capture",
            COMPILE: "pinned allocation synchronises the device and breaks the cudagraph",
        },
    )
)


class PinnedAllocation(Detector):
    rule = RULE

    def on_Call(self, w: FunctionWalker, call: ast.Call, name: str | None) -> None:
        method, _ = method_of(call)
        if name is None and method == "pin_memory":
            w.hazard(RULE.code, call, "`.pin_memory()` allocates page-locked host memory")
        elif T.is_true(T.keyword(call, "pin_memory")):
            w.hazard(RULE.code, call, f"`{name or method}(..., pin_memory=True)` allocates page-locked host memory")
