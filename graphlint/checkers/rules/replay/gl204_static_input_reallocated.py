"""GL204 static-input-reallocated."""

from __future__ import annotations

from graphlint.checkers.machinery.core.binder import FunctionWalker
from graphlint.checkers.machinery.detectors import Detector
from graphlint.checkers.machinery.flows.replay.replay_flow import InputReallocated
from graphlint.registry import Rule, declare

RULE = declare(
    Rule(
        code="GL204",
        name="static-input-reallocated",
        summary="`resize_`, `set_` or `.data =` on a static input after its capture.",
        why=(
            "The captured kernels keep the old address. Reallocating the tensor frees or moves "
            "its storage, and replays read and write freed or reused memory."
        ),
        example="""
            import torch

            with torch.cuda.graph(g):
                out = model(static_x)
            static_x.resize_(new_batch, dim)
        """,
        use_instead="""
            import torch

            static_x = torch.empty(max_batch, dim, device="cuda")
            with torch.cuda.graph(g):
                out = model(static_x[:batch])
            # one graph per shape: capture again for another batch size
        """,
    )
)


class StaticInputReallocated(Detector):
    rule = RULE

    def on_InputReallocated(self, w: FunctionWalker, event: InputReallocated) -> None:
        if event.method is None:
            message = f"`{event.text}` swaps the storage of a static input of graph `{event.graph}`"
        else:
            message = f"`{event.text}` reallocates a static input of graph `{event.graph}`"
        w.hazard(RULE.code, event.node, message + ": the graph keeps its old address", always=True)
