"""The guard's watch on graphs that share a memory pool (GL510; needs torch).

It tells `analysis.pool_order` what it needs and nothing more: each graph's pool id and its
memory at the end of its capture, the stream of each replay, and the program's
synchronisations and waits (torch.cuda.synchronize, Stream/Event synchronize, wait_stream,
wait_event, Event.wait), which it counts by wrapping those calls while installed.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable
from typing import Any

from graphlint.runtime_sanitizer.analysis.pool_order import PoolGraph, PoolOrder, Violation

# (owner path under torch.cuda, attribute, what calling it means for the streams)
_SYNCS = (("", "synchronize"), ("Stream", "synchronize"), ("Event", "synchronize"))
_WAITS = (("Stream", "wait_stream"), ("Stream", "wait_event"), ("Event", "wait"))


class PoolWatch:
    def __init__(self) -> None:
        self.order = PoolOrder()
        self._saved: list[tuple[Any, str, Any]] = []
        self._pending: list[tuple[Any, str, list[tuple[int, int]], list[tuple[int, int]]]] = []

    def install(self, torch: Any) -> None:
        for path, name in _SYNCS:
            self._wrap(_owner(torch, path), name, self.order.synchronized)
        for path, name in _WAITS:
            self._wrap(_owner(torch, path), name, self.order.waited)

    def uninstall(self) -> None:
        for owner, name, original in reversed(self._saved):
            setattr(owner, name, original)
        self._saved = []

    def _wrap(self, owner: Any, name: str, note: Any) -> None:
        original = getattr(owner, name)

        @functools.wraps(original)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            result = original(*args, **kwargs)
            note()  # after the call: what it orders is what was queued before it
            return result

        self._saved.append((owner, name, original))
        setattr(owner, name, wrapper)

    def captured(
        self, graph: Any, label: str, reads: list[tuple[int, int]], made_ranges: list[tuple[int, int]]
    ) -> None:
        """A capture is ending: the memory it allocated (its replays write it) and the memory of
        its inputs, those the program deleted during the capture included (`e = c + 3; del c`:
        the graph still reads c's block). Its pool id is known only once the capture has ended:
        it is read at the next replay."""
        self._pending.append((weakref.ref(graph), label, list(made_ranges), list(reads)))

    def replayed(self, graph: Any, stream_of: Callable[[], int]) -> list[Violation]:
        """The violations this replay makes; ``stream_of`` gives the replaying stream, asked only
        for a graph whose pool is known."""
        self._settle()
        if id(graph) not in self.order.graphs:
            return []
        return self.order.replayed(id(graph), stream_of())

    def _settle(self) -> None:
        """The graphs captured since the last replay, in capture order, with their pools."""
        for ref, label, writes, reads in self._pending:
            graph = ref()
            try:
                pool = tuple(graph.pool()) if graph is not None else None
            except Exception:
                pool = None  # a failed capture, or a torch without pool ids: nothing to compare it with
            if pool is not None:
                self.order.captured(PoolGraph(id(graph), label, pool, writes, reads))
        self._pending = []


def _owner(torch: Any, path: str) -> Any:
    return getattr(torch.cuda, path) if path else torch.cuda
