"""GL113 hooks-on-graphed-callable."""

from __future__ import annotations

import ast

from graphlint.checkers.machinery.core.binder import FunctionWalker
from graphlint.checkers.machinery.detectors import Detector
from graphlint.checkers.rules.capture.common import method_of
from graphlint.registry import Rule, declare

RULE = declare(
    Rule(
        code="GL113",
        name="hooks-on-graphed-callable",
        summary=(
            "`register_forward_hook`, `register_forward_pre_hook`, `register_full_backward_hook` "
            "(and their variants) on a module that is passed to `make_graphed_callables`, "
            "before or after."
        ),
        why=(
            "Hooks are Python: they run once while the graph is captured and never on replay, "
            "so whatever they compute or record is silently stale. make_graphed_callables "
            "requires modules without hooks."
        ),
        example="""
            import torch

            layer.register_forward_hook(record_activation)
            graphed = torch.cuda.make_graphed_callables(layer, (x,))
        """,
        use_instead="""
            import torch

            graphed = torch.cuda.make_graphed_callables(layer, (x,))
            out = graphed(x)
            record_activation(layer, (x,), out)  # outside the graph, explicitly
        """,
    )
)

_HOOK_METHODS = frozenset(
    {
        "register_forward_hook",
        "register_forward_pre_hook",
        "register_full_backward_hook",
        "register_full_backward_pre_hook",
        "register_backward_hook",
    }
)


class HooksOnGraphedCallable(Detector):
    rule = RULE

    def on_Call(self, w: FunctionWalker, call: ast.Call, name: str | None) -> None:
        method, receiver = method_of(call)
        func = call.func
        if method in _HOOK_METHODS and isinstance(func, ast.Attribute) and w.is_graphed_module(func.value):
            w.hazard(
                RULE.code,
                call,
                f"`{receiver}` is passed to make_graphed_callables: its {method.replace('register_', '')} "
                "runs once at capture and never on replay",
                always=True,
            )
