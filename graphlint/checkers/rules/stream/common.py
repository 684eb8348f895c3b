"""What the stream rules (GL3xx) share: the `record_stream` fix."""

from __future__ import annotations

import ast

from graphlint.checkers.machinery.core.binder import FunctionWalker
from graphlint.checkers.machinery.flows.stream.stream_flow import MAIN
from graphlint.findings import Fix
from graphlint.fixing.ops import InsertStatementAfter


def record_stream_fix(w: FunctionWalker, statement: ast.stmt, name: str, stream: str) -> Fix | None:
    """Insert `x.record_stream(s)` after the last statement that used `x` on `s`."""
    if statement.end_lineno is None:
        return None
    if stream == MAIN:
        stream = "torch.cuda.current_stream()"
    return Fix(
        "unsafe",
        f"tell the allocator `{stream}` uses `{name}`: `{name}.record_stream({stream})`",
        (InsertStatementAfter(w.st.span(statement), f"{name}.record_stream({stream})"),),
    )
