"""GL106 non-capturable-optimizer-step."""

from __future__ import annotations

import ast

from graphlint.checkers.machinery.core import kinds as T
from graphlint.checkers.machinery.core.binder import FunctionWalker
from graphlint.checkers.machinery.core.model import COMPILE, GRAPH
from graphlint.checkers.machinery.detectors import Detector
from graphlint.checkers.rules.capture.common import keyword_fix, method_of, receiver_kind
from graphlint.findings import Fix
from graphlint.registry import Rule, declare

RULE = declare(
    Rule(
        code="GL106",
        name="non-capturable-optimizer-step",
        fix="unsafe",
        summary=(
            "`opt.step()` in capture where `opt` is a torch optimizer built without "
            "`capturable=True`; `GradScaler.step()`/`update()`; `clip_grad_norm_(..., "
            "error_if_nonfinite=True)`."
        ),
        why=(
            "These keep step counters on the host or read tensors to decide what to do. "
            "PyTorch refuses to capture a non-capturable optimizer step; GradScaler and the "
            "non-finite check sync on every call."
        ),
        example="""
            import torch

            opt = torch.optim.Adam(model.parameters(), lr=1e-3)
            with torch.cuda.graph(g):
                loss = model(x).sum()
                loss.backward()
                opt.step()
        """,
        use_instead="""
            import torch

            opt = torch.optim.Adam(model.parameters(), lr=1e-3, capturable=True)
            with torch.cuda.graph(g):
                loss = model(x).sum()
                loss.backward()
                opt.step()
        """,
        consequences={
            GRAPH: "it reads or updates host-side state on every step, which a graph cannot replay",
            COMPILE: "it syncs with the host, so torch.compile breaks the graph and skips cudagraphs",
        },
    )
)


class NonCapturableOptimizerStep(Detector):
    rule = RULE

    def on_Call(self, w: FunctionWalker, call: ast.Call, name: str | None) -> None:
        method, receiver = method_of(call)
        kind = receiver_kind(w, call)
        if name is None and method == "step" and kind is not None:
            if kind.kind == T.OPTIMIZER and not kind.capturable:
                message = f"`{receiver}.step()` on an optimizer built without `capturable=True`"
                w.hazard(RULE.code, call, message, fix=_capturable_fix(w, kind))
            elif kind.kind == T.SCALER:
                w.hazard(RULE.code, call, f"`{receiver}.step()` of a GradScaler checks for infs on the host")
        elif name is None and method == "update" and kind is not None and kind.kind == T.SCALER:
            w.hazard(RULE.code, call, f"`{receiver}.update()` of a GradScaler reads the found-inf flag on the host")
        elif name == "torch.nn.utils.clip_grad_norm_" and T.is_true(T.keyword(call, "error_if_nonfinite")):
            w.hazard(RULE.code, call, "`clip_grad_norm_(..., error_if_nonfinite=True)` checks the norm on the host")


def _capturable_fix(w: FunctionWalker, kind: T.Ty) -> Fix | None:
    """Add `capturable=True` to the optimizer's constructor, when this file built it."""
    call = w.st.calls_by_span.get(kind.fixable_at) if kind.fixable_at else None
    if call is None:
        return None
    return keyword_fix(w.st, call, "capturable", "True", "construct the optimizer with `capturable=True`")
