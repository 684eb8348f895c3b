"""GL109 unjoined-stream-in-capture."""

from __future__ import annotations

import ast

from graphlint.checkers.machinery.core.binder import FunctionWalker
from graphlint.checkers.machinery.core.model import COMPILE, GRAPH
from graphlint.checkers.machinery.core.names import source_text
from graphlint.checkers.machinery.core.syntax import walk_no_defs
from graphlint.checkers.machinery.detectors import Detector
from graphlint.registry import Rule, declare

RULE = declare(
    Rule(
        code="GL109",
        default_set_note=(
            "it reported nothing on the real-code corpus (benchmarks/corpus, 10,640 files of nine frameworks), so there is no false alarm to weigh; what it reports is pinned by 3 positive fixture cases and their negatives (the nearest legal look-alikes), and its recall on real code by the corpus's injected hazards (benchmarks/corpus/injections.toml)."
        ),
        name="unjoined-stream-in-capture",
        summary=(
            "Inside a capture, `with torch.cuda.stream(s):` where `s` did not first wait on the "
            "capturing stream, or is not joined back (`current_stream().wait_stream(s)` or an "
            "event) before the capture ends."
        ),
        why=(
            "A side stream joins the capture only by waiting on the capturing stream; without "
            "that its work is not in the graph (or the capture fails). A side stream not joined "
            "back leaves the capture unjoined (cudaErrorStreamCaptureUnjoined) or the graph "
            "unordered."
        ),
        example="""
            with torch.cuda.graph(g):
                with torch.cuda.stream(side):
                    b = proj(x)
                out = a + b
        """,
        use_instead="""
            with torch.cuda.graph(g):
                side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(side):
                    b = proj(x)
                torch.cuda.current_stream().wait_stream(side)
                out = a + b
        """,
        consequences={
            GRAPH: "the side stream's work is left out of the graph or the capture fails as unjoined",
            COMPILE: "the side stream's work is not ordered with the captured graph",
        },
    )
)

_ORDERING_METHODS = frozenset({"wait_stream", "wait_event", "wait", "record", "record_event", "synchronize"})
_Ordering = tuple[int, str, str, list[str]]  # line, receiver, method, arguments


class UnjoinedStreamInCapture(Detector):
    rule = RULE

    def on_stream_context(self, w: FunctionWalker, node: ast.With | ast.AsyncWith, stream: ast.expr) -> None:
        """A side stream inside a capture must fork from and join back to the capture."""
        if isinstance(stream, ast.Call):
            return  # with torch.cuda.stream(torch.cuda.current_stream()) and similar: no fork
        text = source_text(stream)
        ordering = _ordering_calls(w)
        forked = _ordering_before(w, ordering, node.lineno, text)
        joined = _joined_after(ordering, node.end_lineno or node.lineno, text)
        if forked and joined:
            return
        missing = []
        if not forked:
            missing.append(f"`{text}` does not wait on the capturing stream first")
        if not joined:
            missing.append(f"`{text}` is not joined back (`torch.cuda.current_stream().wait_stream({text})`)")
        w.hazard(RULE.code, node.items[0].context_expr, "side stream in capture: " + " and ".join(missing))


def _ordering_calls(w: FunctionWalker) -> list[_Ordering]:
    """The function's stream-ordering calls (`s.wait_stream(...)`, `e.record()`, ...)."""
    found = []
    for stmt in w.body:
        for node in walk_no_defs(stmt):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                if node.func.attr in _ORDERING_METHODS:
                    args = [source_text(a) for a in node.args]
                    found.append((node.lineno, source_text(node.func.value), node.func.attr, args))
    return found


def _ordering_before(w: FunctionWalker, ordering: list[_Ordering], line: int, stream: str) -> bool:
    """Did ``stream`` wait on something between the start of the capture and ``line``?"""
    start = w.st.summary.regions[w.regions[-1]].line if w.regions else getattr(w.node, "lineno", 0)
    for at, receiver, method, args in ordering:
        if start <= at < line:
            if receiver == stream and method in ("wait_stream", "wait_event"):
                return True
            if method == "wait" and stream in args:
                return True
    return False


def _joined_after(ordering: list[_Ordering], line: int, stream: str) -> bool:
    for at, receiver, method, args in ordering:
        if at > line:
            if method == "wait_stream" and stream in args and receiver != stream:
                return True
            if method in ("wait_event", "wait") and receiver != stream:
                return True
            if method == "synchronize" and receiver in (stream, "torch.cuda"):
                return True
    return False
