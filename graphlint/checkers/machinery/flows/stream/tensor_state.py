"""Which device memory the local names of a function hold, along statement order.

Releasing a name (`del x`, rebinding `x`, the end of `x`'s scope) frees memory only when
nothing else still holds it, so the stream flow asks this state, not the name:

- a view shares its base's storage: `k = qkv[..., :d]`, `q_nope, q_pe = q.split(...)`,
  `x = x.flatten(2).permute(1, 0, 2)` (the old `x` lives on in the new one);
- a view of memory the function does not own (a parameter, an attribute, a slice of
  `self.buffers[i]`) frees nothing when dropped;
- a holder keeps what it holds: `pair = (x, y)`, `Chunk(x)`, `partial(kernel, x)`;
- what escapes (returned, stored in an attribute or a container, appended to a list, saved for
  backward) lives on, and so does what a call was given when its result escapes (the result
  may be that argument, or keep it).

Uses are recorded per storage (a use of a view is a use of its base); producers per name.
Alternatives fork the state and join it after (a may-analysis: what either branch left), so
a use in the `else` branch is never judged against the `if` branch's side-stream work.
"""

from __future__ import annotations

import ast
import itertools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field


@dataclass
class Use:
    stream: str
    position: int
    statement: ast.stmt
    node: ast.AST


@dataclass(eq=False)
class Storage:
    """One allocation (or one holder object), shared by the names that view or alias it."""

    ident: int
    alloc_stream: str
    name: str  # the name it was first bound to (messages)
    owned: bool = True  # allocated by this function; False: memory held elsewhere
    holder: bool = False  # a tuple, object or partial that keeps tensors, not device memory
    uses: list[Use] = field(default_factory=list)
    escaped: bool = False
    contents: list[Storage] = field(default_factory=list)  # what a holder keeps alive
    sources: list[Storage] = field(default_factory=list)  # arguments of the call that made it
    names: set[str] = field(default_factory=set)  # every name that held it (record_stream)
    made_here: bool = True  # written during this call (here or by a callee); False: before it


@dataclass(eq=False)
class Binding:
    """What one name may hold: storages (more than one after a join) and who last wrote it."""

    storages: list[Storage]
    producers: list[tuple[str, int]]
    local: bool = True
    # Some path that reaches here bound the name to a value this flow does not track (a
    # branch that assigned it something else): what it holds is a tensor on some paths only.
    partial: bool = False
    # Alternatives bound the name to different memory (`if fmt == "a": x = f(q)` / `elif`): a
    # use of it is a use of one of them, not of each.
    joined: bool = False

    @property
    def holder(self) -> bool:
        return all(storage.holder for storage in self.storages)

    @property
    def produced(self) -> tuple[str, int] | None:
        return self.producers[-1] if self.producers else None

    @produced.setter
    def produced(self, value: tuple[str, int]) -> None:
        self.producers = [value]


def written(binding: Binding, stream: str, now: int) -> None:
    """The name's memory is written on ``stream`` at ``now`` (`x.add_(1)`, `x /= n`, a
    collective into it): its data is made during this call, wherever the memory came from."""
    binding.produced = (stream, now)
    for storage in binding.storages:
        storage.made_here = True


_IDENTS = itertools.count(1)


def ident_mark() -> int:
    """An ident below every storage made from now on: which memory a later pass made."""
    return next(_IDENTS)


def new_storage(name: str, stream: str, owned: bool = True, holder: bool = False, made_here: bool = True) -> Storage:
    return Storage(next(_IDENTS), stream, name, owned=owned, holder=holder, made_here=made_here, names={name})


def closure(storages: Iterable[Storage], with_sources: bool = False) -> Iterator[Storage]:
    """The storages and everything they hold (and, ``with_sources``, the arguments that made
    them), each once."""
    seen: set[int] = set()
    stack = list(storages)
    while stack:
        storage = stack.pop()
        if storage.ident in seen:
            continue
        seen.add(storage.ident)
        yield storage
        stack.extend(storage.contents)
        if with_sources:
            stack.extend(storage.sources)


def escape(storages: Iterable[Storage]) -> None:
    """They outlive the function, and so do what they hold and the arguments that made them."""
    for storage in closure(storages, with_sources=True):
        storage.escaped = True


class TensorState(dict):
    """name -> Binding, with the queries a release needs and fork/join for alternatives."""

    def held(self) -> set[int]:
        """Storages some live name holds (directly, through a view or through a holder)."""
        return {storage.ident for storage in closure(s for binding in self.values() for s in binding.storages)}

    def freed(self, dropped: Binding) -> list[Storage]:
        """``dropped`` was released: its device memory that no live name holds any more."""
        still = self.held()
        return [
            storage
            for storage in closure(dropped.storages)
            if storage.ident not in still and storage.owned and not storage.escaped and not storage.holder
        ]

    def freed_at_scope_end(self) -> list[Storage]:
        """Every local storage the function owns and does not hand on, at its end."""
        kept = {
            storage.ident
            for storage in closure(s for binding in self.values() if not binding.local for s in binding.storages)
        }
        roots = [storage for binding in self.values() if binding.local for storage in binding.storages]
        return [
            storage
            for storage in closure(roots)
            if storage.ident not in kept and storage.owned and not storage.escaped and not storage.holder
        ]

    def copy(self) -> TensorState:  # type: ignore[override]
        """A copy whose storages are new objects (shared between names as before)."""
        memo: dict[int, Storage] = {}
        result = TensorState()
        for name, binding in self.items():
            storages = [_copy(s, memo) for s in binding.storages]
            result[name] = Binding(storages, list(binding.producers), binding.local, binding.partial, binding.joined)
        return result

    @staticmethod
    def join(states: list[TensorState], untracked: list[set[str]] | None = None) -> TensorState:
        """What either alternative left: a name holds any storage it holds in one of them.
        ``untracked``: per alternative, the names it bound to values the flow does not track
        (the joined binding of such a name is `partial`)."""
        memo: dict[int, Storage] = {}
        done: set[int] = set()
        result = TensorState()
        for state in states:
            for name, binding in state.items():
                storages = [_merge(s, memo, done) for s in binding.storages]
                if name not in result:
                    result[name] = Binding(
                        storages, list(binding.producers), binding.local, binding.partial, binding.joined
                    )
                    continue
                merged = result[name]
                before = {storage.ident for storage in merged.storages}
                merged.storages = _union(merged.storages, storages)
                merged.joined = merged.joined or binding.joined or before != {s.ident for s in storages}
                merged.producers = list(dict.fromkeys([*merged.producers, *binding.producers]))
                merged.local = merged.local or binding.local
                merged.partial = merged.partial or binding.partial
        for names in untracked or ():
            for name in names & result.keys():
                result[name].partial = True
        return result


def _copy(storage: Storage, memo: dict[int, Storage]) -> Storage:
    found = memo.get(storage.ident)
    if found is not None:
        return found
    clone = memo[storage.ident] = Storage(
        storage.ident,
        storage.alloc_stream,
        storage.name,
        storage.owned,
        storage.holder,
        list(storage.uses),
        storage.escaped,
        names=set(storage.names),
        made_here=storage.made_here,
    )
    clone.contents = [_copy(s, memo) for s in storage.contents]
    clone.sources = [_copy(s, memo) for s in storage.sources]
    return clone


def _merge(storage: Storage, memo: dict[int, Storage], done: set[int]) -> Storage:
    """Fold the copies of one storage (one per alternative) into one."""
    merged = memo.get(storage.ident)
    if merged is None:
        merged = memo[storage.ident] = Storage(
            storage.ident,
            storage.alloc_stream,
            storage.name,
            storage.owned,
            storage.holder,
            names=set(),
            made_here=storage.made_here,
        )
    if id(storage) in done:
        return merged
    done.add(id(storage))
    merged.uses = list({id(use): use for use in [*merged.uses, *storage.uses]}.values())
    merged.escaped = merged.escaped or storage.escaped
    merged.names |= storage.names
    merged.contents = _union(merged.contents, [_merge(s, memo, done) for s in storage.contents])
    merged.sources = _union(merged.sources, [_merge(s, memo, done) for s in storage.sources])
    return merged


def _union(first: list[Storage], second: list[Storage]) -> list[Storage]:
    seen = {storage.ident for storage in first}
    return [*first, *(storage for storage in second if storage.ident not in seen)]
