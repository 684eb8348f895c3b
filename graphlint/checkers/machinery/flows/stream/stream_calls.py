"""The stream flow at calls of this file's functions, and the summary it leaves for its callers.

A part `stream_flow.StreamFlow` owns (its ``calls``), reading and extending the flow's state
through `CallsHost`, the view of the flow it needs. At a call of a same-file function it applies the
callee's `stream_effects.Effects`: the waits and synchronisations the callee ends with order
the caller after the call, a value it returns is a pending host copy, a host buffer or a
tensor last produced on one of its streams, and a pending host copy handed to it is read
unsynchronised if the callee reads that parameter on the host first. Run quietly over a
callee (``quiet``), the same flow collects those facts instead of reporting.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from graphlint.checkers.machinery.core import kinds as T
from graphlint.checkers.machinery.flows.stream import stream_effects as E
from graphlint.checkers.machinery.flows.stream.stream_identity import MAIN, UNKNOWN
from graphlint.checkers.machinery.flows.stream.tensor_state import Binding, TensorState, new_storage

if TYPE_CHECKING:
    from graphlint.checkers.machinery.core.module_state import Binder

HOST = "<host>"  # a consumer only host synchronisations order (see `ordered`)


class CallsHost(Protocol):
    """The stream flow as its calls see it: the walker, the clock, the current stream, and the
    tensors, waits, synchronisations and pending host copies they read and extend."""

    w: Binder
    quiet: bool
    current: list[str]
    position: int
    tensors: TensorState
    waits: list[tuple[str, str, int, int]]
    host_syncs: list[tuple[str | None, int, int]]
    pending_host: dict[str, tuple[ast.AST, int, str]]
    last_work: dict[str, int]  # stream -> position of the last work queued on it

    def stream_of(self, node: ast.AST | None) -> str: ...

    def ordered(self, producer: str, cutoff: int, consumer: str, now: int) -> bool: ...


class StreamCalls:
    """Calls into this file's functions, and this function's own effects (module docstring).
    ``summarise``: runs the stream flow quietly over a callee (the flow knows how to make one)."""

    def __init__(self, flow: CallsHost, summarise: E.Summarise) -> None:
        self.flow = flow
        self.summarise = summarise
        self.exits: list[tuple[frozenset[str], frozenset[str]]] = []  # (joined, synced) per exit
        self.host_reads: set[str] = set()  # (quiet) parameters read on the host before a sync
        self.returns: list[ast.expr] = []  # (quiet) returned values
        self.returns_pending = False  # (quiet) a pending host copy is returned
        self.returns_from: str | None = None  # (quiet) a tensor returned while its stream is not joined
        self.returns_on: str | None = None  # (quiet) a tensor returned from a side stream, joined
        self.call_positions: dict[int, int] = {}  # id(call) -> its position, for what it returns
        self.unordered_entries: set[str] = set()  # streams entered before any `s.wait_stream(current)`
        for stream in E.entry_waits(flow.w):  # every caller here made `stream` wait right before
            flow.waits.append((stream, MAIN, 0, 0))
        if flow.quiet:  # a parameter may be a non-blocking copy the caller made: is it read unsynced?
            for param in flow.w.summary.params:
                if param not in ("self", "cls"):
                    flow.pending_host[param] = (flow.w.node, 0, MAIN)

    # -- the callee, and running the flow over it -------------------------------------------
    def enter_stream(self, stream: str) -> None:
        """``stream`` becomes current: unordered unless it waited for the entry stream first."""
        if not any(waiter == stream and waited == MAIN for waiter, waited, _, _ in self.flow.waits):
            self.unordered_entries.add(stream)

    def callee(self, call: ast.Call) -> Binder | None:
        return E.callee_walker(self.flow.w, call)

    def effects(self, callee: Binder) -> E.Effects:
        return E.effects_of(callee, self.summarise)

    def _denote(self, call: ast.Call) -> Callable[[ast.AST], str]:
        return lambda node: self.flow.current[-1] if node is call else self.flow.stream_of(node)

    # -- at the call ----------------------------------------------------------------------
    def callee_effects(self, call: ast.Call, now: int) -> None:
        """What a same-file callee leaves behind: the waits and synchronisations it ends with."""
        callee = self.callee(call)
        if callee is None:
            return
        self.call_positions[id(call)] = now
        effects = self.effects(callee)
        current = self.flow.current[-1]
        denote = self._denote(call)
        for stream in sorted(effects.joined):
            mapped = E.caller_name(stream, callee, self.flow.w, call, denote)
            if mapped is not None and mapped not in (current, UNKNOWN, E.ALL):
                self.flow.waits.append((current, mapped, now, now))
        for stream in sorted(effects.synced):
            mapped = E.caller_name(stream, callee, self.flow.w, call, denote)
            if mapped == E.ALL:
                self.flow.host_syncs.append((None, now, now))
                self.flow.pending_host.clear()
            elif mapped is not None and mapped != UNKNOWN:
                self.flow.host_syncs.append((mapped, now, now))

    def callee_result(self, value: ast.AST | None) -> tuple[str, str] | None:
        """What `name = helper(...)` holds when this file's `helper` says: a pending host copy
        ("pending"), a host tensor ("host"), or a tensor last produced on a stream ("tensor")."""
        if not isinstance(value, ast.Call):
            return None
        callee = self.callee(value)
        if callee is None:
            return None
        effects = self.effects(callee)
        if effects.returns_pending:
            return ("pending", "")
        if effects.returns_host:
            return ("host", "")
        current = self.flow.current[-1]
        for produced, joined in ((effects.returns_from, False), (effects.returns_on, True)):
            if produced is None:
                continue
            stream = E.caller_name(produced, callee, self.flow.w, value, self._denote(value))
            if stream is not None and stream not in (current, UNKNOWN, E.ALL):
                if joined:  # made on `stream`, which the current stream waited for before the return
                    at = self.call_positions.get(id(value), self.flow.position)
                    self.flow.waits.append((current, stream, at, at))
                return ("tensor", stream)
        return None

    def returned_binding(self, value: ast.AST | None, name: str) -> Binding | None:
        """A tensor a callee made on one of its streams: produced there, memory held elsewhere."""
        result = self.callee_result(value)
        if result is None or result[0] != "tensor":
            return None
        made = self.call_positions.get(id(value), self.flow.position)
        return Binding([new_storage(name, self.flow.current[-1], owned=False)], [(result[1], made)])

    def passed_to_callees(self, expr: ast.AST) -> dict[int, bool]:
        """Pending host copies passed to a function of this file: read on the host there
        before any synchronisation (its summary says), or not."""
        decided: dict[int, bool] = {}
        if not self.flow.pending_host:
            return decided
        for node in ast.walk(expr):
            if not isinstance(node, ast.Call):
                continue
            arguments = [*node.args, *(k.value for k in node.keywords)]
            pending = [a for a in arguments if isinstance(a, ast.Name) and a.id in self.flow.pending_host]
            callee = self.callee(node) if pending else None
            if callee is None:
                continue
            reads = self.effects(callee).host_reads
            for argument in pending:
                param = E.passed_parameter(callee, node, argument)
                if param is not None:
                    decided[id(argument)] = param in reads
        return decided

    # -- this function's effects, for its callers (quiet flows) ------------------------------
    def note_return(self, value: ast.expr) -> None:
        """A returned value; a tuple's elements are bound by position and not followed."""
        self.returns.append(value)
        pending = self.flow.pending_host.get(value.id) if isinstance(value, ast.Name) else None
        if pending is not None and pending[0] is not self.flow.w.node:  # a copy made here, not a parameter's
            self.returns_pending = True
        if isinstance(value, ast.Call) and is_host_copy(value):
            self.returns_pending = True
        binding = self.flow.tensors.get(value.id) if isinstance(value, ast.Name) else None
        produced = binding.produced if binding is not None else None
        if produced is None or produced[0] in (MAIN, UNKNOWN):
            return
        producer, produced_at = produced
        if self.flow.ordered(producer, produced_at, MAIN, self.flow.position):
            self.returns_on = self.returns_on or producer
        else:
            self.returns_from = producer

    def note_exit(self, now: int) -> None:
        """At an exit: the streams the entry stream has waited for, and those the host has."""
        streams = {waited for _, waited, _, _ in self.flow.waits} | set(self.flow.last_work)
        streams |= {stream for stream, _, _ in self.flow.host_syncs if stream is not None}
        streams -= {UNKNOWN}
        joined = {
            s for s in streams if s != MAIN and self.flow.ordered(s, max(1, self.flow.last_work.get(s, 0)), MAIN, now)
        }
        synced = {s for s in streams if self.flow.ordered(s, max(1, self.flow.last_work.get(s, 0)), HOST, now)}
        latest = max(self.flow.last_work.values(), default=1)
        if any(stream is None and cutoff >= latest and at <= now for stream, cutoff, at in self.flow.host_syncs):
            synced.add(E.ALL)
        self.exits.append((frozenset(joined), frozenset(synced)))

    def summary(self) -> E.Effects:
        joined = frozenset.intersection(*(j for j, _ in self.exits)) if self.exits else frozenset()
        synced = frozenset.intersection(*(s for _, s in self.exits)) if self.exits else frozenset()
        host = bool(self.returns) and all(_is_host_value(self.flow.w, value) for value in self.returns)
        return E.Effects(
            joined=joined,
            synced=synced,
            unordered_entries=frozenset(self.unordered_entries),
            host_reads=frozenset(self.host_reads),
            returns_pending=self.returns_pending,
            returns_host=host,
            returns_from=self.returns_from,
            returns_on=None if self.returns_from else self.returns_on,
        )


def is_host_copy(value: ast.Call) -> bool:
    """`x.to("cpu", non_blocking=True)`, `x.cpu(non_blocking=True)`: filled later."""
    if not isinstance(value.func, ast.Attribute) or not T.is_true(T.keyword(value, "non_blocking")):
        return False
    method = value.func.attr
    return method == "cpu" or (method == "to" and T.call_targets_host(value))


def _is_host_value(w: Binder, value: ast.expr) -> bool:
    ty = w.ty(value)
    return ty is not None and ty.kind == T.HOST
