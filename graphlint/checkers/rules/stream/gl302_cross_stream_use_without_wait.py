"""GL302 cross-stream-use-without-wait."""

from __future__ import annotations

from graphlint.checkers.machinery.core.binder import FunctionWalker
from graphlint.checkers.machinery.detectors import Detector
from graphlint.checkers.machinery.flows.stream.stream_flow import MAIN, CrossStreamUse, show_stream
from graphlint.registry import Rule, declare

RULE = declare(
    Rule(
        code="GL302",
        preview=True,
        preview_reason=(
            "The false ones are orderings done by a caller or callee in another file, events handed in by keyword, and streams from helpers in other files."
        ),
        name="cross-stream-use-without-wait",
        summary=(
            "A tensor produced on one stream and used on another with no `wait_stream`, "
            "`wait_event` or event wait between producer and consumer, in either direction (into "
            "a side-stream block, or out of it)."
        ),
        why="Streams run concurrently: the consumer can read the tensor before the producer has written it.",
        example="""
            import torch

            side = torch.cuda.Stream()
            x = torch.randn(8, 64, device="cuda")
            h = model(x)
            with torch.cuda.stream(side):
                summary = h.mean()
        """,
        use_instead="""
            import torch

            side = torch.cuda.Stream()
            x = torch.randn(8, 64, device="cuda")
            h = model(x)
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                summary = h.mean()
        """,
    )
)


class CrossStreamUseWithoutWait(Detector):
    rule = RULE

    def on_CrossStreamUse(self, w: FunctionWalker, event: CrossStreamUse) -> None:
        direction = "into" if event.stream != MAIN else "out of"
        w.hazard(
            RULE.code,
            event.node,
            f"`{event.name}` is produced on `{show_stream(event.producer)}` and used on "
            f"`{show_stream(event.stream)}` ({direction} a side-stream block) with no wait between them",
            always=True,
        )
