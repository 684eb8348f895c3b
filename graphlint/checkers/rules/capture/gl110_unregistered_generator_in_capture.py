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
        default_set_note=(
            "it reported nothing on the real-code corpus (benchmarks/corpus, 10,640 files of nine frameworks), so there is no false alarm to weigh; what it reports is pinned by 3 positive fixture cases and their negatives (the nearest legal look-alikes), and its recall on real code by the corpus's injected hazards (benchmarks/corpus/injections.toml)."
        ),
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
            gen = torch.Generator(device="cuda")
            with torch.cuda.graph(g):
                mask = torch.rand(x.shape, device="cuda", generator=gen) > p
        """,
        use_instead="""
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
