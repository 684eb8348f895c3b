"""GL110 unregistered-generator-in-capture."""

from __future__ import annotations

import ast

from graphlint.checkers.machinery.core import kinds as T
from graphlint.checkers.machinery.core.binder import FunctionWalker
from graphlint.checkers.machinery.core.model import COMPILE, GRAPH
from graphlint.checkers.machinery.core.names import source_text
from graphlint.checkers.machinery.detectors import Detector
from graphlint.registry import Rule, declare

RULE = declare(
    Rule(
        code="GL110",
        name="unregistered-generator-in-capture",
        summary=(
            "A user `torch.Generator(device='cuda')` passed as `generator=` in a capture, with no "
            "`graph.register_generator_state(gen)` for it."
        ),
        why=(
            "The graph captures the generator's seed and offset as they were at capture. Unless "
            "the generator is registered with the graph, every replay draws the same random "
            "numbers."
        ),
        example="""
            import torch

            gen = torch.Generator(device="cuda")
            with torch.cuda.graph(g):
                mask = torch.rand(x.shape, device="cuda", generator=gen) > p
        """,
        use_instead="""
            import torch

            gen = torch.Generator(device="cuda")
            g.register_generator_state(gen)
            with torch.cuda.graph(g):
                mask = torch.rand(x.shape, device="cuda", generator=gen) > p
        """,
        consequences={
            GRAPH: "every replay reuses the generator state of the capture and draws the same numbers",
            COMPILE: "every cudagraph replay reuses the generator state it was recorded with",
        },
    )
)


class UnregisteredGenerator(Detector):
    rule = RULE

    def on_Call(self, w: FunctionWalker, call: ast.Call, name: str | None) -> None:
        generator = T.keyword(call, "generator")
        if generator is None:
            return
        kind = w.ty(generator)
        if kind is not None and kind.kind == T.GENERATOR and not w.generator_registered(generator):
            message = f"generator `{source_text(generator)}` is used without `register_generator_state`"
            w.hazard(RULE.code, generator, message)
