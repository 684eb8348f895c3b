"""GL201 static-output-aliased-across-replay."""

from __future__ import annotations

import ast

from graphlint.checkers.machinery.core.binder import FunctionWalker
from graphlint.checkers.machinery.core.names import source_text
from graphlint.checkers.machinery.detectors import Detector
from graphlint.checkers.machinery.flows.replay.kept_state import (
    ClassBuffers,
    bare_beside_copies,
    class_buffers,
    copies_something,
    kept_buffers,
    replays,
)
from graphlint.checkers.machinery.flows.replay.replay_flow import (
    TREE_SUFFIX,
    KeptOutputRead,
    OutputStoredInLoop,
    OutputYieldedInLoop,
)
from graphlint.checkers.machinery.flows.replay.runner_trace import RunnerOutputKept, RunnerOutputStored
from graphlint.checkers.machinery.project.phase import ProjectReporter
from graphlint.checkers.rules.replay.common import clone_fix, clone_fix_at
from graphlint.registry import Rule, declare

RULE = declare(
    Rule(
        code="GL201",
        name="static-output-aliased-across-replay",
        fix="safe",
        summary=(
            "A tensor bound in a capture (a static output), or the output of a graphed callable "
            "or of a function that replays and returns one, kept without `.clone()` (in another "
            "name, a container, an attribute, or yielded from a replay loop) and read after a "
            "later replay or call; or a buffer the class writes in place, passed by reference into "
            "the state object a replaying method returns while its siblings there are copied."
        ),
        why=(
            "Every replay writes its outputs into the same memory. A kept reference is not a "
            "snapshot: after the next replay it silently holds the newest values, so a list of "
            "per-batch results ends up with the last batch repeated."
        ),
        example="""
            import torch

            results = []
            for batch in loader:
                static_x.copy_(batch)
                g.replay()
                results.append(static_out)
        """,
        use_instead="""
            import torch

            results = []
            for batch in loader:
                static_x.copy_(batch)
                g.replay()
                results.append(static_out.clone())
        """,
    )
)


class StaticOutputAliased(Detector):
    rule = RULE

    def on_KeptOutputRead(self, w: FunctionWalker, event: KeptOutputRead) -> None:
        if event.graph.endswith(TREE_SUFFIX):
            function = event.graph.removesuffix(TREE_SUFFIX).strip()
            message = (
                f"`{source_text(event.node)}` keeps an output of `{function}`, compiled in a CUDA-graph mode: "
                "the next call of any such function (or `cudagraph_mark_step_begin()`) starts a new iteration "
                f"of their graph tree and overwrites it before it is read (line {event.read_line})"
            )
        else:
            message = (
                f"`{source_text(event.node)}` keeps a static output of graph `{event.graph}` that a later replay "
                f"overwrites before it is read (line {event.read_line})"
            )
        _kept_output(w, event.node, message)

    def on_OutputYieldedInLoop(self, w: FunctionWalker, event: OutputYieldedInLoop) -> None:
        _kept_output(
            w,
            event.node,
            f"static output `{source_text(event.node)}` of graph `{event.graph}` is yielded from a replay "
            "loop: the consumer's reference is overwritten by the next replay",
        )

    def on_OutputStoredInLoop(self, w: FunctionWalker, event: OutputStoredInLoop) -> None:
        _kept_output(
            w,
            event.node,
            f"static output `{source_text(event.node)}` of graph `{event.graph}` is stored in `{event.holder}` "
            "inside a replay loop: every element ends up holding the last replay's values",
        )

    # -- across files: a runner's result kept by its caller ------------------------------------
    def on_RunnerOutputKept(self, reporter: ProjectReporter, event: RunnerOutputKept) -> None:
        message = (
            f"the result of this call is a static output of graph `{event.graph}`, kept in "
            f"`{event.name}` and read on line {event.read_line} after a later call overwrote it"
        )
        reporter.report(RULE, event.span, message, clone_fix_at(event.span))

    def on_RunnerOutputStored(self, reporter: ProjectReporter, event: RunnerOutputStored) -> None:
        message = (
            f"`{event.name}` is a static output of graph `{event.graph}` stored in a container inside a loop "
            "that calls the runner again: every element ends up holding the last call's values"
        )
        reporter.report(RULE, event.span, message, clone_fix_at(event.span))


class StaticBufferKeptInState(Detector):
    """A state object built after a replay that copies some of a graph's buffers and passes one
    bare (`kept_state`): the caller keeps it across calls, and the next call writes it."""

    rule = RULE

    def __init__(self) -> None:
        self._classes: dict[tuple[str, str], ClassBuffers] = {}

    def on_Call(self, w: FunctionWalker, call: ast.Call, name: str | None) -> None:
        if w.class_qualname is None or len(call.keywords) + len(call.args) < 2 or not copies_something(call):
            return  # every call asks: the cheap tests first
        candidates = bare_beside_copies(call)
        cls = w.st.class_nodes.get(w.class_qualname) if candidates else None
        if cls is None or not replays(w.node):
            return
        key = (w.st.module, w.class_qualname)
        if key not in self._classes:
            self._classes = {key: class_buffers(cls)}  # one class at a time: walkers go class by class
        buffers = self._classes[key]
        for buffer in kept_buffers(candidates, buffers) if buffers.captures else []:
            message = (
                f"`{buffer.text}` is passed by reference into the object this replaying method builds, next to "
                f"a copy of `{buffer.copied_sibling}`: it is a buffer this class writes in place (line "
                f"{buffer.written_line}), so a caller that keeps the object sees it change under the next call's "
                "refill or replay"
            )
            w.hazard(RULE.code, buffer.node, message, fix=clone_fix(w, buffer.node), always=True)


def _kept_output(w: FunctionWalker, node: ast.AST, message: str) -> None:
    """A static output kept where a later replay overwrites it; the fix keeps a copy."""
    w.hazard(RULE.code, node, message, fix=clone_fix(w, node), always=True)
