"""GL203 replay-without-input-update."""

from __future__ import annotations

from graphlint.checkers.machinery.core.binder import FunctionWalker
from graphlint.checkers.machinery.core.names import source_text
from graphlint.checkers.machinery.detectors import Detector
from graphlint.checkers.machinery.flows.replay.replay_flow import StaleReplay
from graphlint.registry import Rule, declare

RULE = declare(
    Rule(
        code="GL203",
        name="replay-without-input-update",
        summary=(
            "A loop that calls `g.replay()` with fresh per-iteration data (a loop target, "
            "`next(it)`) that never reaches any static input (`copy_`, slice assignment, "
            "`index_copy_`, ...) before the replay."
        ),
        why="The graph recomputes on the inputs it already had: every iteration returns the same result.",
        example="""
            import torch

            with torch.cuda.graph(g):
                static_out = model(static_x)
            for batch in loader:
                g.replay()
                outputs.append(static_out.clone())
        """,
        use_instead="""
            import torch

            with torch.cuda.graph(g):
                static_out = model(static_x)
            for batch in loader:
                static_x.copy_(batch)
                g.replay()
                outputs.append(static_out.clone())
        """,
    )
)


class ReplayWithoutInputUpdate(Detector):
    rule = RULE

    def on_StaleReplay(self, w: FunctionWalker, event: StaleReplay) -> None:
        w.hazard(
            RULE.code,
            event.node,
            f"`{source_text(event.node.func)}()` replays on stale inputs: the loop's fresh data "
            f"({', '.join(event.fresh)}) never reaches a static input of graph `{event.graph}`",
            always=True,
        )
