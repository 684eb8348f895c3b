"""GL503's kept-static-output case (pure logic on plain Python objects, no torch; the replay
guard feeds it each graph's static output tensors before every replay).

`kept.append(static_out)` in a replay loop keeps the static output tensor itself, not a copy:
every entry is the same object, so after the loop all of them show the newest replay's values.
No read of an old handle happens (the object is the graph's own output, which always holds the
newest replay), so the stale-handle check cannot see it. What it can see is the container: one
list, dict or deque whose entries are that very tensor (or tuples holding it, `(step, out)`)
and whose count of them grows from one replay to a later one, reaching two or more.

The check is precise rather than complete (a false alarm is worse than a miss):

- only the tensor object the capture made, held by the program after the capture; a view, a
  `detach()` or a `.clone()` is another object (views are the stale-handle check's);
- only lists, dicts (values) and deques, directly or through tuples they hold; not a single
  kept reference (it always shows the newest values: GL201 finds that in the source), not
  attributes or module globals (names, not collections the program fills), not references
  held only in C++ or in other objects;
- the same container must be seen holding it once at one replay and more often at a later
  one: a structure built once (`pair = (out, out)`) never grows, so it is never reported;
- the heap scan (`gc.get_referrers`) runs only when the tensor's reference count reached a new
  high since the previous replay, at most `MAX_SCANS` times per output, and never again for an
  output once it was reported: normal replays pay one `sys.getrefcount` per live output.
"""

from __future__ import annotations

import gc
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

KEEPERS = (list, dict, deque)  # mutable: they can grow across replays (a tuple cannot)
MAX_SCANS = 8  # heap scans per static output without a finding


def is_module_namespace(container: Any) -> bool:
    """A module's globals: names the program binds, not a collection it fills."""
    return isinstance(container, dict) and "__builtins__" in container


def kept_count(container: Any, target: Any) -> int:
    """How many entries of a list, deque or dict (its values) are `target` itself, or a tuple
    holding it (`kept.append((step, out))`)."""
    entries = container.values() if isinstance(container, dict) else container
    return sum(1 for item in entries if item is target or (isinstance(item, tuple) and any(x is target for x in item)))


def holders(target: Any, referrers: Iterable[Any], skip: Iterable[int] = ()) -> list[tuple[Any, int]]:
    """The lists, dicts and deques among `referrers` (not module globals, not those whose id is
    in `skip`) that hold `target` at least once, each once, with the count."""
    found: list[tuple[Any, int]] = []
    seen = set(skip)
    for container in referrers:
        if id(container) in seen or not isinstance(container, KEEPERS) or is_module_namespace(container):
            continue
        seen.add(id(container))
        count = kept_count(container, target)
        if count:
            found.append((container, count))
    return found


def scan(target: Any, get_referrers: Callable[..., list[Any]] = gc.get_referrers) -> list[tuple[Any, int]]:
    """The containers holding `target`, directly or through a tuple: two heap scans, one for
    the object and one for the tuples that hold it."""
    direct = get_referrers(target)
    records = [r for r in direct if isinstance(r, tuple)]
    outer = get_referrers(*records) if records else []
    return holders(target, [*direct, *outer], skip=(id(direct), id(records), id(outer)))


def is_attribute_dict(container: Any, get_referrers: Callable[..., list[Any]] = gc.get_referrers) -> bool:
    """Some object's (or module's) `__dict__`: attributes, not a collection the program fills."""
    if not isinstance(container, dict):
        return False
    for owner in get_referrers(container):
        try:
            if object.__getattribute__(owner, "__dict__") is container:
                return True
        except Exception:
            continue
    return False


@dataclass
class KeptWatch:
    """One static output across replays: the high-water mark of its reference count, and how
    many entries each container held at the last scan (by the container's id)."""

    high_water: int | None = None
    counts: dict[int, int] = field(default_factory=dict)
    scans: int = 0
    done: bool = False  # reported: not scanned again

    def wants_scan(self, refcount: int) -> bool:
        """Whether to scan before this replay: references were added (a new high) since the
        previous replay. The first replay only sets the mark."""
        if self.high_water is not None and refcount <= self.high_water:
            return False
        first, self.high_water = self.high_water is None, refcount
        if first:
            return False
        if self.done or self.scans >= MAX_SCANS:
            return False
        self.scans += 1
        return True

    def check(self, target: Any, refcount: int) -> list[tuple[Any, int]]:
        """Before a replay: the containers to report for `target` (whose reference count, taken
        by the caller, is `refcount`); attribute dicts are left out."""
        if not self.wants_scan(refcount):
            return []
        return [(c, n) for c, n in self.judge(scan(target)) if not is_attribute_dict(c)]

    def judge(self, found: list[tuple[Any, int]]) -> list[tuple[Any, int]]:
        """The containers seen at the previous scan whose count grew since then to two or more."""
        before, self.counts = self.counts, {id(c): n for c, n in found}
        grown = [(c, n) for c, n in found if n >= 2 and 0 < before.get(id(c), 0) < n]
        if grown:
            self.done = True
        return grown


def kept_output_message(graph: str, output: str, container: Any, count: int, replay: int) -> str:
    """The GL503 message for a kept static output: the graph, the container, how many entries
    alias the output, and the fix."""
    kind = type(container).__name__
    return (
        f"the static output of the {graph} ({output}) is kept {count} times in one {kind} across replays: "
        "each entry is that very tensor, not a copy, so all of them show the newest replay's values "
        f"(replay {replay} overwrites them all); keep a copy instead, e.g. `kept.append(out.clone())`"
    )
