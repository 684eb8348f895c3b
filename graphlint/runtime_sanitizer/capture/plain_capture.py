"""The ordering check (GL504) for graphs the program captures itself with `torch.cuda.graph`
(needs CUDA and cuda-bindings).

While the capture runs, a dispatch mode records which graph nodes each ATen operator added
and what it read and wrote (from its schema, as for graphed callables). Just before the
capture ends, the graph being captured is read from the capturing stream (the driver allows
reading it then), its nodes are attributed to the operators, and the dependency edges are
checked. The program's graph is only read, never changed. When the sanitizer cannot be
sure (the graph cannot be read, or nodes were launched outside ATen operators, whose
accesses are unknown), it refuses and says why instead of calling the graph ordered.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from graphlint.runtime_sanitizer.analysis.snapshot import GraphSnapshot
from graphlint.runtime_sanitizer.capture.triton_launches import PREFIX


class Refused(Exception):
    """The graph was not analysed; the message says why."""


class CaptureOrdering:
    """Started when a capture begins (``start``), read when it is about to end (``finish``)."""

    def __init__(self) -> None:
        self._recorder: Any = None
        self._recording = False
        self._why_not = ""

    def start(self) -> None:
        try:
            from graphlint.runtime_sanitizer import driver
            from graphlint.runtime_sanitizer.capture.two_captures import _OpRecorder

            driver.bindings()  # cuda-bindings present: reading the graph will be possible
        except Exception as error:
            self._why_not = f"{type(error).__name__}: {error}"
            return
        self._recorder = _OpRecorder().__enter__()
        self._recording = True

    def stop(self) -> None:
        """Leave the recording mode: every capture that ``start``ed must ``stop``, even on error,
        before any dispatch mode entered earlier is left (modes nest)."""
        if self._recording:
            self._recording = False
            self._recorder.__exit__(None, None, None)

    def triton_writes(self) -> list[tuple[int, int]]:
        """(address, bytes) of the memory the Triton kernels launched in the capture write, by
        their signature (an Inductor kernel that appends to a KV cache in place): the writes a
        dispatch mode never sees. An unknown pointer argument counts as written. ATen operators
        are left out: the guard's own mode has their schema writes, and an operator's outputs,
        which the recording also lists, may be views of what it only read."""
        if self._recorder is None:
            return []
        return [span for name, *_, writes in self._recorder.ops if name.startswith(PREFIX) for span in writes]

    def finish(self, stream: int) -> GraphSnapshot:
        """The attributed snapshot of the graph the stream is capturing; raises `Refused`."""
        from graphlint.runtime_sanitizer.capture.two_captures import capturing_graph

        return self._finish(lambda: capturing_graph(stream), "the capture stream reports no graph being captured")

    def finish_captured(self, graph: Callable[[], Any]) -> GraphSnapshot:
        """The same for a capture that has just ended, its graph still alive (torch's capture-end
        hook): ``graph`` gives its handle, or raises when torch does not show it."""
        return self._finish(graph, "torch's capture-end hook gave no graph to read")

    def _finish(self, graph_handle: Callable[[], Any], no_graph: str) -> GraphSnapshot:
        from graphlint.runtime_sanitizer.analysis.graph_bodies import flatten, unread, where
        from graphlint.runtime_sanitizer.analysis.two_capture import unattributed_nodes
        from graphlint.runtime_sanitizer.capture.introspection import snapshot_graph
        from graphlint.runtime_sanitizer.driver import IntrospectionError

        self.stop()
        if self._recorder is None:
            raise Refused(f"the capture could not be recorded ({self._why_not})")
        if self._recorder.unreadable:
            raise Refused(f"the capture graph could not be read during {self._recorder.unreadable} operators")
        try:
            graph = graph_handle()
            if graph is None:
                raise Refused(no_graph)
            snapshot = snapshot_graph(int(graph))
        except IntrospectionError as error:
            raise Refused(f"the graph could not be read: {error}") from None
        self._recorder.attribute(snapshot)
        blind = unread(snapshot)
        if blind:
            raise Refused(f"node {blind[0].index} is a conditional node: {blind[0].note}")
        snapshot = flatten(snapshot)  # child-graph and conditional bodies are checked like the rest
        unknown = unattributed_nodes(snapshot)
        if unknown:
            shown = ", ".join(f"{where(n)} ({n.name[:40] or n.type})" for n in unknown[:3])
            raise Refused(
                f"{len(unknown)} of {len(snapshot.nodes)} nodes were launched outside ATen operators ({shown}): "
                "their memory accesses are unknown, so the ordering was not checked"
            )
        return snapshot
