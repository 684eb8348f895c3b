"""GL107 autocast-cache-with-graphs."""

from __future__ import annotations

import ast

from graphlint.checkers.machinery.core import kinds as T
from graphlint.checkers.machinery.core.binder import FunctionWalker, WithInside
from graphlint.checkers.machinery.core.model import COMPILE, GRAPH, Hazard, ModuleSummary
from graphlint.checkers.machinery.detectors import Detector, ProjectFacts
from graphlint.checkers.rules.capture.common import keyword_fix
from graphlint.registry import Rule, declare

RULE = declare(
    Rule(
        code="GL107",
        name="autocast-cache-with-graphs",
        fix="safe",
        summary=(
            "`torch.autocast`, `torch.amp.autocast` or `torch.cuda.amp.autocast` without "
            "`cache_enabled=False` inside a capture, around a capture, or around a call of a "
            "`make_graphed_callables` result."
        ),
        why=(
            "Autocast caches the low-precision casts of weights for the life of the context. "
            "A graph captured under that cache reads cast tensors the cache owns; once the "
            "context exits they are freed and replays read freed or stale memory."
        ),
        example="""
            import torch

            with torch.autocast("cuda", dtype=torch.bfloat16):
                with torch.cuda.graph(g):
                    out = model(static_x)
        """,
        use_instead="""
            import torch

            with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False):
                with torch.cuda.graph(g):
                    out = model(static_x)
        """,
        consequences={
            GRAPH: "the graph reads casts that autocast's cache owns and frees when the context exits",
            COMPILE: "cudagraph replays read casts that autocast's cache owns and frees when the context exits",
        },
    )
)


_AROUND = "the graph reads casts that autocast's cache owns and frees on exit"


class AutocastCacheWithGraphs(Detector):
    rule = RULE

    def on_autocast(self, w: FunctionWalker, stmt: ast.stmt, context: ast.Call, inside: WithInside) -> None:
        if _autocast_is_cpu(context) or T.is_false(T.keyword(context, "cache_enabled")):
            return
        if T.is_false(T.keyword(context, "enabled")):
            return  # autocast switched off: nothing is cast, so nothing is cached or freed
        fix = keyword_fix(w.st, context, "cache_enabled", "False", "pass `cache_enabled=False` to autocast")
        w.hazard(RULE.code, context, "autocast without `cache_enabled=False` inside a capture", fix=fix)
        if inside.graphed_calls:
            message = (
                f"autocast without `cache_enabled=False` around a call of a make_graphed_callables result: {_AROUND}"
            )
            w.hazard(RULE.code, context, message, fix=fix, always=True)
        elif inside.regions:
            message = f"autocast without `cache_enabled=False` around a capture: {_AROUND}"
            w.hazard(RULE.code, context, message, fix=fix, always=True, condition=(inside.regions[0],))

    def holds(self, project: ProjectFacts, summary: ModuleSummary, hazard: Hazard, kind: str | None) -> bool:
        """Around a `with` whose target may be a capture wrapper defined in another file: a
        finding only where the project says that region is a capture."""
        return not hazard.condition or project.region_active(summary, int(hazard.condition[0]))


def _autocast_is_cpu(call: ast.Call) -> bool:
    device = T.keyword(call, "device_type") or (call.args[0] if call.args else None)
    return isinstance(device, ast.Constant) and device.value == "cpu"
