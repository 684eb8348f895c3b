"""GL510: graphs that share a memory pool, replayed out of capture order or at once (pure).

Graphs captured into one pool (`pool=`, `graph_pool_handle()`, another graph's `pool()`, a
`MemPool`, `make_graphed_callables`' shared pool) reuse each other's memory: a block freed
while one graph was captured is handed to the next capture. That is sound only while the
replays keep the capture order, one at a time. Two ways to break it:

- out of order: graph R read memory at capture time that an earlier graph P wrote; since P's
  last replay, another graph W of the pool, whose memory overlaps, was replayed and wrote
  there, so R reads W's values instead of P's (PyTorch's `test_graph_three_successive`);
- at once: two graphs of the pool replayed on two streams with nothing ordering them, while
  one writes memory the other touches (`test_graph_concurrent_replay`).

The guard feeds this module what it measured (each graph's pool, the memory it allocated
during capture, which its replays write, and the ranges of its static inputs; each replay's
stream; each synchronisation the program made) and gets back the violations to report. It
knows no CUDA: tested on recorded ranges.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field

Range = tuple[int, int]  # (device address, bytes)


@dataclass
class PoolGraph:
    key: int  # the guard's id of the graph
    label: str  # "graph captured at file.py:12"
    pool: Hashable  # the pool id torch reports (graph.pool())
    writes: list[Range]  # the memory it allocated during its capture: its replays write it
    reads: list[Range]  # its static inputs' storages
    order: int = 0  # its place among the pool's captures (set by PoolOrder)


@dataclass
class Violation:
    reader: PoolGraph  # the graph replayed now
    other: PoolGraph  # the graph whose replay broke the order (or runs at once)
    producer: PoolGraph | None  # out of order: the graph that wrote the memory at capture time
    overlap: Range  # the memory both touch
    concurrent: bool  # at once on two streams (else: out of order)


@dataclass
class _Replay:
    tick: int
    stream: int


@dataclass
class PoolOrder:
    graphs: dict[int, PoolGraph] = field(default_factory=dict)
    _producers: dict[int, list[tuple[Range, int]]] = field(default_factory=dict)
    _last: dict[int, _Replay] = field(default_factory=dict)
    _tick: int = 0
    _synced: int = 0  # tick of the last synchronisation that orders every stream's past work
    _waited: int = 0  # tick of the last stream or event wait (which streams it orders is not known)
    _reported: set[tuple[int, int, bool]] = field(default_factory=set)

    def captured(self, graph: PoolGraph) -> None:
        """A capture ended: which earlier graph of its pool wrote each memory range it reads."""
        same_pool = [g for g in self.graphs.values() if g.pool == graph.pool]
        graph.order = len(same_pool)
        producers = []
        for read in graph.reads:
            for earlier in sorted(same_pool, key=lambda g: g.order, reverse=True):
                if _overlap_any(read, earlier.writes) is not None:
                    producers.append((read, earlier.key))
                    break
        self.graphs[graph.key] = graph
        self._producers[graph.key] = producers

    def synchronized(self) -> None:
        """The host waited for the device (torch.cuda.synchronize, a stream's or event's
        synchronize): everything replayed so far is ordered before what comes next."""
        self._synced = self._tick

    def waited(self) -> None:
        """A stream waited for another stream or an event: replays before it may be ordered."""
        self._waited = self._tick

    def replayed(self, key: int, stream: int) -> list[Violation]:
        """A replay of graph ``key`` on ``stream`` is about to run: what it breaks."""
        graph = self.graphs.get(key)
        self._tick += 1
        if graph is None:
            return []
        found = self._out_of_order(graph) + self._at_once(graph, stream)
        self._last[key] = _Replay(self._tick, stream)
        fresh = []
        for violation in found:
            mark = (violation.reader.key, violation.other.key, violation.concurrent)
            if mark not in self._reported:
                self._reported.add(mark)
                fresh.append(violation)
        return fresh

    def _out_of_order(self, reader: PoolGraph) -> list[Violation]:
        found = []
        for read, producer_key in self._producers.get(reader.key, []):
            produced = self._last.get(producer_key)
            if produced is None:
                continue  # the producer never replayed: nothing the reader relies on was there yet
            for other in self._pool_mates(reader):
                if other.key == producer_key:
                    continue
                since = self._last.get(other.key)
                overlap = _overlap_any(read, other.writes)
                if since is not None and since.tick > produced.tick and overlap is not None:
                    found.append(Violation(reader, other, self.graphs[producer_key], overlap, False))
                    break
        return found

    def _at_once(self, graph: PoolGraph, stream: int) -> list[Violation]:
        found = []
        for other in self._pool_mates(graph):
            last = self._last.get(other.key)
            if last is None or last.stream == stream or last.tick <= max(self._synced, self._waited):
                continue  # same stream, or a sync or wait since: ordered (or not ours to judge)
            overlap = _conflict(graph, other)
            if overlap is not None:
                found.append(Violation(graph, other, None, overlap, True))
        return found

    def _pool_mates(self, graph: PoolGraph) -> list[PoolGraph]:
        return [g for g in self.graphs.values() if g.pool == graph.pool and g.key != graph.key]


def _overlap(a: Range, b: Range) -> Range | None:
    start, end = max(a[0], b[0]), min(a[0] + a[1], b[0] + b[1])
    return (start, end - start) if start < end else None


def _overlap_any(a: Range, ranges: list[Range]) -> Range | None:
    for b in ranges:
        found = _overlap(a, b)
        if found is not None:
            return found
    return None


def _conflict(a: PoolGraph, b: PoolGraph) -> Range | None:
    """Memory one graph writes and the other reads or writes."""
    for write in a.writes:
        found = _overlap_any(write, b.writes + b.reads)
        if found is not None:
            return found
    for write in b.writes:
        found = _overlap_any(write, a.reads)
        if found is not None:
            return found
    return None


def violation_message(violation: Violation, replay: int) -> str:
    start, size = violation.overlap
    where = f"{size} bytes at {start:#x}"
    reader, other = violation.reader, violation.other
    if violation.concurrent:
        return (
            f"replay {replay} of the {reader.label} runs on another stream than the last replay of the "
            f"{other.label}, with nothing ordering the two, and the graphs share a memory pool in which they "
            f"touch the same memory ({where}, written by at least one): the replays corrupt each other. "
            "Order them (`wait_stream`, an event) or give each its own pool"
        )
    producer = violation.producer
    made = f"the {producer.label}" if producer is not None else "an earlier graph"
    return (
        f"replay {replay} of the {reader.label} reads memory ({where}) that {made} wrote when it was "
        f"captured, but the {other.label}, captured later into the same memory pool, was replayed since and "
        "wrote its own values there: graphs that share a pool must replay in their capture order"
    )
