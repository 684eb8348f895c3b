"""GL202 static-input-rebound."""

from __future__ import annotations

import ast

from graphlint.checkers.machinery.core.binder import FunctionWalker
from graphlint.checkers.machinery.core.names import source_text
from graphlint.checkers.machinery.detectors import Detector
from graphlint.checkers.machinery.flows.replay.replay_flow import InputRebound
from graphlint.findings import Fix
from graphlint.fixing.ops import ReplaceAssignWithCopy
from graphlint.registry import Rule, declare

RULE = declare(
    Rule(
        code="GL202",
        name="static-input-rebound",
        fix="unsafe",
        summary=(
            "A name read in a capture (a static input) rebound after the capture "
            "(`static_x = batch`, `self.static_x = batch`, `static_x = static_x.to(...)`) "
            "before a `replay()`."
        ),
        why=(
            "The graph holds the address of the tensor it captured. Rebinding the Python name "
            "points the name at new memory and leaves the graph reading the old buffer: the new "
            "data is ignored without any error."
        ),
        example="""
            import torch

            for batch in loader:
                static_x = batch
                g.replay()
        """,
        use_instead="""
            import torch

            for batch in loader:
                static_x.copy_(batch)
                g.replay()
        """,
    )
)


class StaticInputRebound(Detector):
    rule = RULE

    def on_InputRebound(self, w: FunctionWalker, event: InputRebound) -> None:
        w.hazard(
            RULE.code,
            event.node,
            f"static input `{event.name}` of graph `{event.graph}` is rebound before `replay()`: the graph keeps "
            "reading the old buffer",
            fix=_copy_fix(w, event.node, event.value),
            always=True,
        )


def _copy_fix(w: FunctionWalker, stmt: ast.AST, value: ast.AST) -> Fix | None:
    """`static_x = batch` -> `static_x.copy_(batch)` (unsafe: the shapes may differ)."""
    if not isinstance(stmt, ast.Assign) or len(stmt.targets) != 1:
        return None
    new = f"{source_text(stmt.targets[0])}.copy_({source_text(value)})"
    return Fix(
        "unsafe", f"copy into the static input: `{new}` (shapes must match)", (ReplaceAssignWithCopy(w.st.span(stmt)),)
    )
