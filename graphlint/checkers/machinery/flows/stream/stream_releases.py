"""Releases judged when their memory can be reused: at the next allocation on their stream.

The caching allocator hands a freed block to the next allocation on the stream it was
allocated on. A release while another stream still uses the block is a race only if that
allocation comes before the other stream's work is ordered: `h = None` followed by
`current.wait_stream(side)` and only then new work on the current stream is safe. So a
release with unordered uses is kept (`Deferred`) and judged at the next work queued on its
stream, at the end of the alternative it was made in (a sibling's waits did not run on its
path), or at the end of the function. At the end, a block of a side stream that every entry
to that stream (here, and in the class's other methods for `self.x`) makes wait for the
current stream first is reused only after such a wait, which follows every use made here.
A release in a loop is reused by the next pass's first work on its stream; when the pass
makes that stream wait for the using stream before that work (`comm.wait_stream(compute)` at
the loop's top), the next pass waits again, after the release, and the reuse is ordered.

A part `stream_flow.StreamFlow` owns (its ``releases``); it reads the flow's waits and clock and
calls back its `ordered` and `report_release` through `ReleasesHost`, the view of the flow it needs.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from graphlint.checkers.machinery.flows.stream import stream_effects as E
from graphlint.checkers.machinery.flows.stream.stream_identity import MAIN
from graphlint.checkers.machinery.flows.stream.tensor_state import Storage, Use, ident_mark

if TYPE_CHECKING:
    from graphlint.checkers.machinery.core.module_state import Binder
    from graphlint.checkers.machinery.flows.stream.stream_calls import StreamCalls


@dataclass(eq=False)
class LoopPass:
    """An open loop: the releases before it, its start, and where its latest pass began."""

    body: list[ast.stmt]
    before: set[int]
    start: int
    pass_start: int = 0
    first_work: dict[str, int] = field(default_factory=dict)  # stream -> its first work in the pass
    passes: int = 0  # passes begun
    start_ident: int = 0  # storages made in the loop have idents from here ...
    pass_ident: int = 0  # ... and those made in the latest pass from here

    def earlier_pass(self, position: int) -> bool:
        """Was ``position`` in an earlier pass of this loop (not before it, not this pass)?"""
        return self.passes > 1 and self.start <= position < self.pass_start

    def earlier_pass_storage(self, ident: int) -> bool:
        return self.passes > 1 and self.start_ident <= ident < self.pass_ident


@dataclass(eq=False)
class Deferred:
    """A release whose hazard is the next allocation on ``storage.alloc_stream``."""

    storage: Storage
    name: str
    node: ast.stmt | None  # None: the end of the function
    uses: list[Use]  # the uses not ordered at the release
    until: int | None = None  # its alternative ended here: later waits are a sibling's


class ReleasesHost(Protocol):
    """The stream flow as its deferred releases see it: its clock, its waits and host
    synchronisations, the last work per stream, and where a release found unordered goes."""

    w: Binder
    calls: StreamCalls  # its streams entered unordered, and how a callee is summarised
    last_work: dict[str, int]
    waits: list[tuple[str, str, int, int]]
    host_syncs: list[tuple[str | None, int, int]]

    def ordered(self, producer: str, cutoff: int, consumer: str, now: int) -> bool: ...

    def report_release(self, release: Deferred, use: Use) -> None: ...

    def tick(self) -> int: ...


class DeferredReleases:
    """Releases kept until their block can be reused (see the module docstring)."""

    def __init__(self, flow: ReleasesHost) -> None:
        self.flow = flow
        self.deferred: list[Deferred] = []
        self.loops: list[LoopPass] = []

    def defer(self, storage: Storage, name: str, stmt: ast.stmt | None, uses: list[Use]) -> None:
        self.deferred.append(Deferred(storage, name, stmt, uses))

    def settle(self, stream: str | None, now: int) -> None:
        """Judge the releases the next allocation on ``stream`` may reuse (None: the function ends)."""
        kept = []
        for release in self.deferred:
            alloc = release.storage.alloc_stream
            if stream is not None and alloc != stream:
                kept.append(release)
            elif stream is None and alloc != MAIN and self._fork_ordered(alloc):
                continue
            else:
                self._judge(release, now)
        self.deferred = kept

    def deferred_before(self) -> set[int]:
        return {id(release) for release in self.deferred}

    def close_branch(self, before: set[int]) -> None:
        """Releases made in an alternative are judged at its end: a sibling's waits (which
        the flow keeps for after the join) did not run on that path."""
        now = self.flow.tick()
        kept = []
        for release in self.deferred:
            if id(release) in before:
                kept.append(release)
            elif release.storage.alloc_stream == MAIN:
                self._judge(release, now)
            else:  # a side stream's block: its next entry may come later
                release.until = now if release.until is None else release.until
                kept.append(release)
        self.deferred = kept

    def loop_entered(self, body: list[ast.stmt]) -> None:
        self.loops.append(LoopPass(body, self.deferred_before(), self.flow.tick(), start_ident=ident_mark()))

    def pass_began(self, body: list[ast.stmt]) -> None:
        """A block starts: when it is the innermost loop's body, a new pass of that loop."""
        if self.loops and self.loops[-1].body is body:
            loop = self.loops[-1]
            loop.pass_start = self.flow.tick()
            loop.first_work = {}
            loop.passes += 1
            loop.pass_ident = ident_mark()

    def worked(self, stream: str, now: int) -> None:
        for loop in self.loops:
            loop.first_work.setdefault(stream, now)

    def loop_left(self) -> None:
        """A release made in a loop whose stream is given work in the loop is reused by the
        next iteration's allocation, before anything after the loop: judge it at the loop's end,
        unless the pass waits for its uses before that allocation (then judge it later)."""
        if not self.loops:
            return
        loop = self.loops.pop()
        now = self.flow.tick()
        kept = []
        for release in self.deferred:
            alloc = release.storage.alloc_stream
            made_before = id(release) in loop.before or self.flow.last_work.get(alloc, -1) <= loop.start
            if made_before or self._waited_at_top(loop, alloc, release.uses):
                kept.append(release)
            else:
                self._judge(release, now)
        self.deferred = kept

    def _waited_at_top(self, loop: LoopPass, alloc: str, uses: list[Use]) -> bool:
        """Does the last pass make ``alloc`` wait for every stream of ``uses`` (or sync the
        host) before its first work on ``alloc``? The next pass does the same after the release."""
        first = loop.first_work.get(alloc)
        if first is None:
            return False
        waited = {
            waited for waiter, waited, _, at in self.flow.waits if waiter == alloc and loop.pass_start <= at < first
        }
        synced = {stream for stream, _, at in self.flow.host_syncs if loop.pass_start <= at < first}
        return None in synced or all(use.stream in waited or use.stream in synced for use in uses)

    def _fork_ordered(self, stream: str) -> bool:
        if stream in self.flow.calls.unordered_entries:
            return False
        return E.class_entries_ordered(self.flow.w, stream, self.flow.calls.summarise)

    def _judge(self, release: Deferred, now: int) -> None:
        alloc = release.storage.alloc_stream
        now = now if release.until is None else min(now, release.until)
        for use in reversed(release.uses):
            if not self.flow.ordered(use.stream, use.position, alloc, now):
                self.flow.report_release(release, use)
                return
