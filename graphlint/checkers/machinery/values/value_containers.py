"""Containers in the value flow: one abstract container per creation site, its values per key.

A list, tuple, set or dict display (`[f, g]`, `{"a": f}`) is a value of its own,
``%<kind>@<site>`` (kind ``l`` list, ``t`` tuple, ``s`` set, ``d`` dict), and what it holds
lives in one location per constant key: ``%d@site['a']``, ``%l@site[0]``, with ``[*]`` for
what was stored under a key the flow cannot name. So `d["a"]()` calls what was put under
"a" (or under an unknown key), not everything in `d`; a read under an unknown key, an
iteration or `d.values()` reads every key (sound). A list's indices stop counting once
anything may shift them (`pop`, `insert`, `sort`, `del`, a slice store, passing it to code
outside the project): from then on every read is the union. A slice of a list with constant
bounds is a view, ``%l@site|1:3``, whose index 0 is the list's index 1; a view ``|*`` reads
the union (what `list(xs)`, `sorted(xs)` return).

A value that is not a container keeps the flow's older reading, in which a container is its
elements: indexing or iterating it gives the value itself (`*args` holds the arguments).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

_EMPTY: frozenset[str] = frozenset()
_UNKNOWN = "*"
_SHIFTABLE = "l"  # the kinds whose keys are positions a mutation can shift
_POSITIONAL = "lt"


def is_container(value: str) -> bool:
    return value[0] == "%"


class ContainerFlow:
    """The solver's containers (see the module docstring): a part `value_flow.ValueFlow` owns
    (its ``containers``). It keeps each container's keys and which lists no longer count
    positions, and reads and stores the solver's locations through the functions it is handed."""

    def __init__(
        self,
        values: dict[str, set[str]],
        constants: dict[str, str | None],
        evaluate: Callable[[tuple | None], set[str] | frozenset[str]],
        read: Callable[[str], set[str] | frozenset[str]],
        add: Callable[[str, set[str] | frozenset[str]], None],
        touch: Callable[[str], None],
        assign: Callable[[tuple, set[str] | frozenset[str]], None],
        locations_of: Callable[[tuple], tuple[str, ...]],
        iteration: Callable[[str], set[str] | None],
    ) -> None:
        self.values = values  # the solver's locations -> what they hold
        self._constants = constants  # module-level constants (key -> repr), the solver's
        self.evaluate = evaluate
        self._read = read
        self._add = add
        self._touch = touch
        self._assign = assign
        self._locations_of = locations_of  # the locations a name read reads
        self._iteration = iteration  # what iterating a project instance gives (None: not defined here)
        self._keys: dict[str, set[str]] = {}  # container -> its keys
        self.collapsed: set[str] = set()  # lists whose positions no longer count

    # -- building --------------------------------------------------------------------------------
    def display(self, expr: tuple) -> set[str]:
        """`[f, *gs]`, `{"a": f, **d}`: the container value, its entries stored per key."""
        _, site, entries = expr
        for key, part, splat in entries:
            values = self.evaluate(part)
            if splat == 2:
                self._merge(site, values)
            elif splat == 1:
                self._store(site, None, self.elements(values))
            else:
                self._store(site, key if key is None or isinstance(key, str) else self._constant(key), values)
        return {site}

    def _store(self, container: str, key: str | None, values: Iterable[str]) -> None:
        values = values if isinstance(values, (set, frozenset)) else set(values)
        if not values:
            return
        base, _, view = container.partition("|")
        key = self._through_view(view, key)
        slot = key if key is not None and (base[1] not in _POSITIONAL or key[0] != "-") else _UNKNOWN
        keys = self._keys.setdefault(base, set())
        location = f"{base}[{slot}]"
        held = self.values.get(location)
        before = len(held) if held is not None else -1
        keys.add(slot)
        self._add(location, values)
        held = self.values.get(location)
        if (len(held) if held is not None else -1) != before:
            self._touch(f"{base}[#]")  # what reads the container reads it again

    def _merge(self, container: str, sources: Iterable[str]) -> None:
        """`d.update(other)`, `{**other}`: ``other``'s keys copied key by key."""
        loose = set()
        for source in tuple(sources):
            if not is_container(source):
                loose.add(source)
                continue
            base, _, view = source.partition("|")
            if view or base[1] != container[1]:
                self._store(container, None, self._all(base))
                continue
            for key in tuple(self._registry(base)):
                self._store(container, None if key == _UNKNOWN else key, self._slot(base, key))
        self._store(container, None, loose)

    # -- reading ----------------------------------------------------------------------------------
    def subscript(self, expr: tuple) -> set[str]:
        """`x[k]`: under a constant key, what the key holds; otherwise every key's values."""
        _, base, key = expr
        if key is not None and not isinstance(key, str):
            key = self._constant(key)
        found: set[str] = set()
        for value in tuple(self.evaluate(base)):
            if is_container(value):
                found |= self._element(value, key)
            else:
                found.add(value)
        return found

    def sliced(self, expr: tuple) -> set[str]:
        """`x[1:3]`: a view of each list the value holds; another value as it is."""
        _, base, view = expr
        found: set[str] = set()
        for value in tuple(self.evaluate(base)):
            if not is_container(value):
                found.add(value)
                continue
            container, _, outer = value.partition("|")
            if container[1] not in _POSITIONAL or outer or view == _UNKNOWN:
                found.add(f"{container}|{_UNKNOWN}")
            else:
                found.add(f"{container}|{view}")
        return found

    def _element(self, value: str, key: str | None) -> set[str] | frozenset[str]:
        base, _, view = value.partition("|")
        key = self._through_view(view, key)
        if key is None or base[1] == "s" or (base[1] in _POSITIONAL and key[0] == "-"):
            return self._all(base)
        self._registry(base)  # a later store or collapse re-reads
        if base in self.collapsed:
            return self._all(base)
        return self._slot(base, key) | self._slot(base, _UNKNOWN)

    def _through_view(self, view: str, key: str | None) -> str | None:
        """The base list's key for ``key`` read through a slice view (None: unknown)."""
        if not view or key is None:
            return key
        if view == _UNKNOWN or not key.isdigit():
            return None
        low, _, high = view.partition(":")
        index = int(low) + int(key)
        return str(index) if not high or index < int(high) else None

    def _registry(self, base: str) -> set[str]:
        """The container's keys, the fact evaluating now registered as its reader: one
        registration per container, re-run when any of its keys gains values."""
        self._read(f"{base}[#]")
        return self._keys.get(base, set())

    def _slot(self, base: str, key: str) -> set[str] | frozenset[str]:
        return self.values.get(f"{base}[{key}]", _EMPTY)

    def _all(self, base: str) -> set[str]:
        found: set[str] = set()
        for key in tuple(self._registry(base)):
            found |= self._slot(base, key)
        return found

    def elements(self, values: Iterable[str]) -> set[str]:
        """What iterating (or unpacking with `*`) each value gives: a container's every key,
        any other value itself."""
        found: set[str] = set()
        for value in tuple(values):
            if is_container(value):
                found |= self._all(value.partition("|")[0])
            else:
                found.add(value)
        return found

    def views(self, expr: tuple) -> set[str]:
        """`list(xs)`, `sorted(xs)`, `zip(a, b)`, `iter(xs)`: the same elements, their positions
        unknown. An instance of a project class that defines `__iter__` gives what iterating it
        gives (`next(iter(collector))` is a batch the collector yields, not the collector)."""
        found: set[str] = set()
        for part in expr[1:]:
            for value in tuple(self.evaluate(part)):
                if is_container(value):
                    found.add(f"{value.partition('|')[0]}|{_UNKNOWN}")
                    continue
                iterated = self._iteration(value)
                found |= {value} if iterated is None else iterated
        return found

    def _constant(self, expr: tuple) -> str | None:
        """A key named by a module-level constant (`ls[key]`, `from ext import key`), bound once
        and never stored to from elsewhere; None when it may be anything else."""
        for location in self._locations_of(expr):
            held = self._constants.get(location)
            if held is not None and not self._read(location):
                return held
        return None

    # -- storing ---------------------------------------------------------------------------------
    def assign_element(self, target: tuple, values: set[str] | frozenset[str]) -> None:
        """`x[k] = v`, `x.append(v)`, `x[1:2] = vs`, `d.update(other)` into each container ``x``
        holds; a receiver holding none keeps the values itself (the older reading)."""
        tag, base = target[0], target[1]
        held = [v for v in sorted(self.evaluate(base)) if is_container(v)]  # sorted: see value_flow
        if not held:
            self._assign(base, self.elements(values) if tag != "[" else values)
            return
        key = target[2] if tag == "[" else None
        if key is not None and not isinstance(key, str):
            key = self._constant(key)
        for container in held:
            if tag == "{":
                self._merge(container, values)
            elif tag == ":":
                self._collapse(container)
                self._store(container, None, self.elements(values))
            else:
                self._store(container, key, values)

    def _collapse(self, container: str) -> None:
        base = container.partition("|")[0]
        if base[1] == _SHIFTABLE and base not in self.collapsed:
            self.collapsed.add(base)
            self._touch(f"{base}[#]")

    def shift(self, expr: tuple) -> frozenset[str]:
        """`xs.pop(0)`, `xs.sort()`, `del xs[0]`: the lists ``xs`` holds lose their positions."""
        for value in sorted(self.evaluate(expr[1])):
            if is_container(value):
                self._collapse(value)
        return _EMPTY

    def escape(self, values: Iterable[str]) -> None:
        """Lists passed to code outside the project may be reordered there."""
        for value in sorted(values):
            if is_container(value):
                self._collapse(value)
