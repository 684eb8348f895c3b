"""The project phase of the value flow: which callables, classes and instances each location
holds, solved to a least fixed point over every file's facts (`value_facts`).

Context-insensitive, like PyCG: a parameter holds what any caller passes, an attribute what
any method stores, a container everything put in it. One exception: a function that returns a
parameter it never rebinds (`return module`, a typed identity helper) gives each call the
argument that call passed, not what every caller passes. A value is a string: a function,
lambda or class qualname; ``!C`` an instance of class ``C``; ``~m`` the method ``m`` bound
to an instance (calling it passes ``self``); ``+C`` an instance of ``C`` or of any project
subclass (`class_hierarchy`: a parameter an `isinstance` test narrows, a Protocol annotation),
``&C`` the same for ``self`` in a method of a class others derive from; ``^O^C`` what
super() gives in a method of ``O`` on an instance of ``C`` (``^O^+C``: on a cone); ``@f``
`f.__get__`, which binds ``f`` to an object; ``?name`` something outside the project (a builtin, a
library), which calling is a leaf of the exported graph and nothing more. A worklist
re-evaluates a fact whenever a location it read gains values. A location that saturates
(`_saturate`) keeps what it passed on before, so the result depends on the order facts run
in: every loop whose body adds values walks its values sorted, never in set order (string
hashes differ between processes), so two runs of one project always agree.

What a call site runs (`callees`) is the union over the callee's values; a call whose
callee holds nothing the project defines runs nothing here (unresolved, never guessed).
"""

from __future__ import annotations

import builtins
from bisect import bisect_right
from collections import defaultdict, deque
from collections.abc import Callable, Iterable, Iterator
from typing import Protocol, TypeVar

from graphlint.checkers.machinery.core.model import ClassSummary, FunctionSummary, ModuleSummary
from graphlint.checkers.machinery.internal_errors import ErrorLog
from graphlint.checkers.machinery.values.class_hierarchy import ClassHierarchy
from graphlint.checkers.machinery.values.return_guards import may_pass
from graphlint.checkers.machinery.values.value_containers import ContainerFlow, is_container

_EMPTY: frozenset[str] = frozenset()
_Item = TypeVar("_Item")  # what a cone's classes give: qualnames, or methods that may be missing
_BUILTINS = frozenset(dir(builtins))
_MAX_ALIAS_HOPS = 8
MAX_VALUES = 16  # a location that may hold more is too imprecise to call through: unresolved
# A cone (`class_hierarchy`) fans out to the methods its classes define. `self`'s cone (``&C``)
# is implied in every method of every base class, so it gets the locations' limit; a declared
# type (``+C``: an isinstance test, a Protocol annotation) is the programmer's statement of
# what may be there, and each implementation of it is code that may run (vLLM's
# `SupportsEncoderCudaGraph` has 21): twice that.
MAX_DECLARED = 2 * MAX_VALUES
_CONES = "+&"
# `ValueFlow._lookup`: the class locations read, then the method found (or None), its kind, its class
_Lookup = tuple[tuple[str, ...], str | None, str, str]
_MAX_OUTSIDE_DEPTH = 6  # `?torch.nn.functional.relu`: dots in an outside name we still follow
# Outside calls that never reorder a list passed to them (any other may: `random.shuffle(xs)`).
_KEEPS_ORDER = frozenset(
    f"<builtin>.{name}" for name in ("len", "print", "isinstance", "id", "repr", "str", "hash", "any", "all", "bool")
)
_MODULE_CLASSES = frozenset({"torch.nn.Module", "torch.nn.modules.module.Module"})  # calling one runs forward
# (scope qualname, line, column, end line, end column) of a call: the start alone is shared by
# chained calls (`get().run()` starts where `get()` does), the end is not.
CallKey = tuple[str, int, int, int, int]


class ProjectNames(Protocol):
    """What the flow asks of the project's name resolution (`resolution.Resolver`)."""

    summaries: dict[str, ModuleSummary]
    functions: dict[str, tuple[str, FunctionSummary]]
    classes: dict[str, ClassSummary]
    aliases: dict[str, str]
    protocols: frozenset[str]  # typing.Protocol classes (`protocols`): no instance of theirs is followed

    def resolve_name(self, dotted: str) -> str | None: ...

    def class_chain(self, class_qualname: str) -> Iterator[ClassSummary]: ...


class ValueFlow:
    """The solved value flow of a project: the values at each location and each call's callees."""

    def __init__(self, names: ProjectNames, log: ErrorLog, solve: bool = True) -> None:
        """``solve``: False leaves every location empty (no call resolves through values)."""
        self.names = names
        self.solved = solve
        self.defs: dict[str, tuple] = {}
        self._files: list[tuple[int, str]] = []  # (index of the file's first fact, its path)
        facts = self._gathered(names) if solve else []
        self._log = log
        self.values: dict[str, set[str]] = {}
        self.calls: dict[CallKey, set[str]] = {}
        self.extra: dict[CallKey, set[str]] = {}  # calls the binder never names (lambdas, decorators)
        self.outside: dict[str, set[str]] = {}  # scope -> names it calls outside the project
        self._modules = {summary.module for summary in names.summaries.values()}
        self._readers: defaultdict[str, set[int]] = defaultdict(set)
        self._locations: dict[str, tuple[str, ...]] = {}
        self._resolved: dict[str, str | None] = {}
        self._saturated: set[str] = set()
        self._chains: dict[str, tuple[ClassSummary, ...]] = {}
        self._lookups: dict[tuple[str, str, str | None], _Lookup] = {}  # `_lookup`, memoised
        self._hierarchy: ClassHierarchy | None = None
        self._constants: dict[str, str | None] = {}  # module-level constants (key -> repr)
        self.containers = self._container_part()
        self._current = -1
        self._stored = self._stored_names(facts)
        self._static: dict[str, frozenset[str]] = {}  # names whose value no fact can change
        self._guarded: dict[str, list[tuple[str, tuple]]] = {}  # function -> its guarded returns (`return_guards`)
        # function -> (name, index) of the parameters a `return p` hands back; the index is
        # None where the definition `defs` kept has no such parameter (`_param_index`)
        self._passthrough: dict[str, list[tuple[str, int | None]]] = {}
        self.partialled: set[str] = set()  # functions a `functools.partial` wraps (`call_constants`)
        self._eval: dict[str, Callable[[tuple], set[str] | frozenset[str]]] = {
            "v": lambda e: self._read(e[1]),
            "g": lambda e: self._global(e[1]),
            "w": self._star_imported,
            "d": lambda e: {e[1]},
            "i": self._self_values,
            "n": self._instances,
            "+": self._narrowed,
            "a": self._attribute,
            "c": self._call,
            "k": self._decorate,
            "p": self._partial,
            "m": self._container_read,
            "s": self._super,
            "S": self._explicit_super,
            "r": self._raise,
            "t": self._iterate,
            "o": self._outside_call,
            "u": self._union,
            "e": self._effects,
            "*": lambda e: self.containers.elements(self.evaluate(e[1])),  # a starred argument: its elements
            "l": self.containers.display,
            "[": self.containers.subscript,
            ":": self.containers.sliced,
            "V": self.containers.views,
            "z": self.containers.shift,
            "K": lambda e: {"="},  # stored to from another module: no longer a constant
            "y": self._recalled,
        }
        self._solve(facts)

    def _container_part(self) -> ContainerFlow:
        """The containers (`value_containers`), handed the locations they read and store into."""
        locations = (self._read, self._add, self._touch, self._assign, self._locations_of)
        return ContainerFlow(
            self.values, self._constants, self.evaluate, *locations, lambda v: self._iteration(v, None)
        )

    def _gathered(self, names: ProjectNames) -> list[tuple]:
        """Every file's facts in one list, files in path order, their definitions in `defs`."""
        facts: list[tuple] = []
        for path, summary in sorted(names.summaries.items()):
            self.defs.update(summary.flow_defs)
            self._files.append((len(facts), path))
            facts.extend(summary.flow)
        return facts

    def callees(self, key: CallKey) -> set[str] | frozenset[str]:
        """The functions the call at ``key`` runs (empty: unresolved)."""
        return self.calls.get(key, _EMPTY)

    # -- the worklist ------------------------------------------------------------------------
    def _solve(self, facts: list[tuple]) -> None:
        self._facts = facts
        for fact in facts:
            if fact[0] == "K":
                self._constants[fact[1]] = fact[2] if fact[1] not in self._constants else None
            elif fact[0] == "Q":  # a guarded return (`return_guards`): ``f.<return>#n`` and its tests
                function = fact[1].rpartition(".<return>#")[0]
                tests = tuple((name, self._param_index(function, name), classes) for name, classes in fact[2])
                self._guarded.setdefault(function, []).append((fact[1], tests))
            elif fact[0] == "P":  # `return p` (`value_facts._passthrough_params`): the call's own argument
                handed = self._passthrough.setdefault(fact[1], [])  # each once: read on every call
                if all(name != fact[2] for name, _ in handed):
                    handed.append((fact[2], self._param_index(fact[1], fact[2])))
        queue = deque(i for i, fact in enumerate(facts) if fact[0] not in ("K", "G", "Q", "P"))
        self._queue = queue
        self._queued = set(queue)
        while queue:
            index = queue.popleft()
            self._queued.discard(index)
            self._current = index
            fact = facts[index]
            try:
                if fact[0] == "=":
                    self._assign(fact[1], self.evaluate(fact[2]))
                else:
                    self.evaluate(fact[1])
            except Exception:  # a GL002 for the file, not a failed run: the other facts still count
                path = self._files[bisect_right(self._files, (index, "\uffff")) - 1][1]
                with self._log.guard(path, 1, "following the values of the file's assignments"):
                    raise

    def _read(self, location: str) -> set[str] | frozenset[str]:
        self._readers[location].add(self._current)
        return self.values.get(location, _EMPTY)

    def _touch(self, location: str) -> None:
        """Re-evaluate the facts that read ``location`` (it changed other than by values)."""
        for reader in self._readers.get(location, ()):
            if reader not in self._queued:
                self._queued.add(reader)
                self._queue.append(reader)

    def _saturate(self, location: str) -> None:
        """A location that would hold more than `MAX_VALUES` values holds none from now on:
        a call through it is unresolved rather than a fan-out to everything (which on a large
        project is also what makes a context-insensitive solve quadratic). What it already
        passed on stays; nothing more flows through it."""
        self._saturated.add(location)
        self.values[location] = set()

    def _add(self, location: str, values: set[str] | frozenset[str]) -> None:
        if not values:
            return
        if any(v[0] == "?" for v in values):
            values = {v for v in values if v[0] != "?"}  # outside values are leaves, never stored
            if not values:
                return
        held = self.values.get(location)
        if held is None:
            held = self.values[location] = set()
        elif values <= held or location in self._saturated:
            return
        held |= values
        if len(held) > MAX_VALUES:
            self._saturate(location)
            return
        self._touch(location)

    def _assign(self, target: tuple, values: set[str] | frozenset[str]) -> None:
        if not values:
            return
        tag = target[0]
        if tag == "v":
            self._add(target[1], values)
        elif tag == "g":
            for location in self._aliases(target[1]):
                self._add(location, values)
        elif tag == "a":
            for holder in sorted(self.evaluate(target[1])):
                owner = holder[1:] if holder[0] in "!+&" else holder
                if owner in self.names.classes:
                    self._add(f"{owner}.{target[2]}", values)
        elif tag in "[:{":
            self.containers.assign_element(target, values)

    def _recalled(self, expr: tuple) -> set[str] | frozenset[str]:
        """A read right after a store of the same path (`value_memory`): the stored value, when
        the receiver is a plain container or object; otherwise the flow-insensitive read.
        Nothing while the receiver holds nothing (so the answer only grows)."""
        _, read, stored = expr
        held = self.evaluate(read[1])
        if not held:
            return _EMPTY
        if read[0] == "[":
            plain = all(is_container(v) for v in held)
        else:
            plain = all(self._plain_attribute(v, read[2]) for v in held)
        return self.evaluate(stored) if plain else self.evaluate(read)

    def _plain_attribute(self, holder: str, attr: str) -> bool:
        """Whether ``holder.attr`` reads back what was stored (no method, property or hook)."""
        cls = holder[1:] if holder[0] in "!+&" else holder
        if cls not in self.names.classes:
            return False
        classes = self.hierarchy.cone(cls) if holder[0] in _CONES else (cls,)
        names = (attr, "__setattr__", "__getattribute__")
        return all(self._method(sub, name) is None for sub in classes for name in names)

    def _locations_of(self, expr: tuple) -> tuple[str, ...]:
        """The locations a name expression reads (`v`: one; `g`: it and what it re-exports)."""
        if expr[0] == "v":
            return (expr[1],)
        return self._aliases(expr[1]) if expr[0] == "g" else ()

    def evaluate(self, expr: tuple | None) -> set[str] | frozenset[str]:
        """The values ``expr`` may hold (recording the locations read, for the worklist)."""
        if expr is None:
            return _EMPTY
        tag = expr[0]
        if tag == "v":  # the commonest expression, read inline (a third of all evaluations)
            self._readers[expr[1]].add(self._current)
            return self.values.get(expr[1], _EMPTY)
        return self._eval[tag](expr)

    # -- names -------------------------------------------------------------------------------
    def _global(self, dotted: str) -> set[str] | frozenset[str]:
        """A name imported or defined at module level: what it is bound to project-wide; an
        attribute of what its prefix holds (`smth.func` where `smth` is an instance); or, for
        a name outside the project, the outside value ``?name``. Most names (imports of
        libraries, builtins) are bound by no fact, so their value is worked out once."""
        static = self._static.get(dotted)
        if static is not None:
            return static
        found = self._global_now(dotted)
        if self._unchanging(dotted):
            self._static[dotted] = frozenset(found)
        return found

    def _global_now(self, dotted: str) -> set[str] | frozenset[str]:
        resolved = self._resolve(dotted)
        if resolved is not None and resolved not in self.defs and resolved not in self.names.classes:
            return {resolved}
        found: set[str] = set()
        for location in self._aliases(dotted):
            found |= self._read(location)
        if found or dotted in self._modules:
            return found
        if resolved is not None:
            return _EMPTY if resolved in self.defs else {resolved}  # a class only the binder saw
        head, _, attr = dotted.rpartition(".")
        if not head:
            return {f"?<builtin>.{dotted}" if dotted in _BUILTINS else "?" + dotted}
        return self._attribute(("a", ("g", head), attr))

    def _stored_names(self, facts: list[tuple]) -> frozenset[str]:
        """Every location a fact assigns by name (a local, a global, what a `global` statement
        or a re-export reaches): a name none of whose aliases is here is bound by imports and
        definitions alone."""
        stored: set[str] = set()
        for fact in facts:
            if fact[0] == "=" and fact[1][0] == "v":
                stored.add(fact[1][1])
            elif fact[0] == "=" and fact[1][0] == "g":
                stored.update(self._aliases(fact[1][1]))
        return frozenset(stored)

    def _unchanging(self, dotted: str) -> bool:
        """No fact can add to what ``dotted`` reads: none of its aliases is ever assigned, and
        an attribute of something (`lib.mod.func`) only when that something is unchanging too."""
        if any(location in self._stored for location in self._aliases(dotted)):
            return False
        resolved = self._resolve(dotted)
        if resolved is not None or dotted in self._modules:
            return resolved is None or resolved not in self.defs
        head = dotted.rpartition(".")[0]
        return not head or (head in self._static and all(v[0] == "?" for v in self._static[head]))

    def _star_imported(self, expr: tuple) -> set[str]:
        """A name a `from m import *` may bind: what the project's modules ``m`` define by it."""
        found: set[str] = set()
        for module in expr[1]:
            if module in self._modules:
                found |= {v for v in self._global(f"{module}.{expr[2]}") if v[0] != "?"}
        return found

    def _resolve(self, dotted: str) -> str | None:
        """`Resolver.resolve_name`, memoised: the solver asks for the same names again and again."""
        try:
            return self._resolved[dotted]
        except KeyError:
            found = self._resolved[dotted] = self.names.resolve_name(dotted)
            return found

    def _chain(self, cls: str) -> tuple[ClassSummary, ...]:
        """The class and its project bases (`Resolver.class_chain`), memoised."""
        try:
            return self._chains[cls]
        except KeyError:
            found = self._chains[cls] = tuple(self.names.class_chain(cls))
            return found

    def _aliases(self, dotted: str) -> tuple[str, ...]:
        """``dotted`` and the names it re-exports, followed like `Resolver.resolve_name`."""
        found = self._locations.get(dotted)
        if found is not None:
            return found
        aliases = self.names.aliases
        chain = [dotted]
        current = dotted
        for _ in range(_MAX_ALIAS_HOPS):
            head, _, tail = current.rpartition(".")
            if current in aliases and aliases[current] != current:
                current = aliases[current]
            elif head in aliases and aliases[head] != head:
                current = f"{aliases[head]}.{tail}"
            else:
                break
            chain.append(current)
        found = self._locations[dotted] = tuple(chain)
        return found

    # -- attributes ----------------------------------------------------------------------------
    def _attribute(self, expr: tuple) -> set[str]:
        return self.attributes_of(self.evaluate(expr[1]), expr[2])

    def attributes_of(self, holders: set[str] | frozenset[str], attr: str) -> set[str]:
        """``attr`` of each of ``holders``: an instance's or class's attribute, a bound method."""
        found: set[str] = set()
        for holder in sorted(holders):
            first = holder[0]
            if first == "!":
                self._instance_attribute(holder[1:], attr, holder, found, skip=None)
            elif first in _CONES:
                found |= self._capped(self._cone_attribute(holder, attr), first)
            elif first == "^":
                _, owner, cls = holder.split("^")
                if cls[0] in _CONES:
                    parts = (self._after(sub, owner, attr) for sub in self.hierarchy.cone(cls[1:]))
                    found |= self._capped(parts, cls[0])
                else:
                    found |= self._after(cls, owner, attr)
            elif holder in self.names.classes:
                self._class_attribute(holder, attr, found)
            elif attr == "__get__" and holder in self.defs:
                found.add("@" + holder)  # the descriptor protocol: `f.__get__(obj, cls)` binds f to obj
            elif first == "?" and holder.count(".") < _MAX_OUTSIDE_DEPTH:
                found.add(f"{holder}.{attr}")  # bounded: `node = node.next` would never end
        return found

    @property
    def hierarchy(self) -> ClassHierarchy:
        """The project's subclasses of each class (built when first asked)."""
        if self._hierarchy is None:
            self._hierarchy = ClassHierarchy(self.names.classes, self._chain, self.names.protocols, self._resolve)
        return self._hierarchy

    def _self_values(self, expr: tuple) -> set[str] | frozenset[str]:
        """``self`` in a method of a class: its instance, and the cone when project classes
        derive from it (they inherit the method, or reach it through super()). For a
        Protocol, a static type whose own instance never exists (`protocols`), only the
        classes that implement it by name."""
        cls = expr[1]
        if cls in self.names.protocols:
            implementers = self.hierarchy.instance(cls)
            return {implementers} if implementers is not None else _EMPTY
        return {"!" + cls, "&" + cls} if self.hierarchy.subclasses(cls) else {"!" + cls}

    def _narrowed(self, expr: tuple) -> set[str]:
        """`isinstance(p, C)`: an instance of each project class C names, or of a subclass;
        of a library class, an instance of a project class derived from it (the library's
        own instances are outside: no value)."""
        classes = self.names.classes
        found = (self.hierarchy.instance(v) for v in self.evaluate(expr[1]) if v in classes or v[0] == "?")
        return {v for v in found if v is not None}

    def _cone_attribute(self, cone: str, attr: str) -> Iterator[set[str]]:
        """``attr`` on an instance of each class of ``cone`` (``+C`` or ``&C``). A method found
        is not bound here: its ``self`` already holds every instance that inherits it
        (`_self_values`); a property's ``self`` gets the cone itself."""
        for sub in self.hierarchy.cone(cone[1:]):
            part: set[str] = set()
            self._instance_attribute(sub, attr, cone, part, skip=None, bind=False)
            yield part

    @staticmethod
    def _capped(parts: Iterable[set[_Item]], kind: str) -> set[_Item] | frozenset[_Item]:
        """The union of what a cone's classes give, or nothing when that is more than the
        cone's limit (``&``: `MAX_VALUES`, ``+``: `MAX_DECLARED`): too many to call through,
        as a saturated location."""
        limit = MAX_VALUES if kind == "&" else MAX_DECLARED
        found: set[_Item] = set()
        for part in parts:
            found |= part
            if len(found) > limit:
                return frozenset()
        return found

    def _after(self, cls: str, owner: str, attr: str) -> set[str]:
        """``attr`` of an instance of ``cls`` looked up after ``owner`` (super())."""
        found: set[str] = set()
        self._instance_attribute(cls, attr, "!" + cls, found, skip=owner)
        if attr == "__call__" and not found:
            self._module_call(cls, owner, found)
        return found

    def _instance_attribute(
        self, cls: str, attr: str, instance: str, found: set[str], skip: str | None, bind: bool = True
    ) -> None:
        """``instance.attr`` along the bases of ``cls`` (after ``skip``, for super()); ``bind``:
        pass ``instance`` to a plain method's ``self`` (a property always gets it)."""
        reads, method, kind, owner = self._lookup(cls, attr, skip)
        for location in reads:
            found |= self._read(location)
        if method is None:
            return
        if kind == "s":
            found.add(method)
        elif kind == "p":
            self._bind_self(method, instance)
            found |= self._returns(method)
        else:
            if bind or kind == "c":
                self._bind_self(method, owner if kind == "c" else instance)
            found.add("~" + method)

    def _lookup(self, cls: str, attr: str, skip: str | None) -> _Lookup:
        """Where ``attr`` of an instance of ``cls`` comes from, after ``skip`` (super()): the
        class locations read on the way along its bases, and the method that ends the walk with
        its kind and its class. Bases, methods and kinds never change during a solve, so this is
        worked out once; a cone's attribute asks it of every class in the cone on every
        evaluation (4M asks on torch's tree)."""
        key = (cls, attr, skip)
        found = self._lookups.get(key)
        if found is not None:
            return found
        reads: list[str] = []
        method: str | None = None
        kind = owner = ""
        for summary in self._chain(cls):
            if skip is not None:
                if summary.qualname == skip:
                    skip = None
                continue
            method = summary.methods.get(attr)
            if method is not None:
                kind, owner = self.defs.get(method, ((), 0, "", "", "m"))[4], summary.qualname
                break
            reads.append(f"{summary.qualname}.{attr}")
        found = self._lookups[key] = (tuple(reads), method, kind, owner)
        return found

    def _module_call(self, cls: str, owner: str, found: set[str]) -> None:
        """`super(Owner, module).__call__` where no project class after ``Owner`` defines
        `__call__` and ``Owner`` derives from `torch.nn.Module`: `Module.__call__` runs the
        instance's own `forward` (looked up from its class, as any call of the module does)."""
        chain = self._chain(cls)
        after = [s for i, s in enumerate(chain) if any(p.qualname == owner for p in chain[: i + 1])]
        if not any(base in _MODULE_CLASSES for summary in after for base in summary.bases):
            return
        forward = self._method(cls, "forward")
        if forward is not None:
            self._bind_self(forward, "!" + cls)
            found.add("~" + forward)

    def _class_attribute(self, cls: str, attr: str, found: set[str]) -> None:
        """``cls.attr``: a class attribute, a function as is, a classmethod bound to ``cls``
        itself (`Sub.make()` builds a ``Sub``, wherever `make` is defined)."""
        reads, method, kind, _ = self._lookup(cls, attr, None)
        for location in reads:
            found |= self._read(location)
        if method is not None:
            if kind == "c":
                self._bind_self(method, cls)
            found.add("~" + method if kind == "c" else method)

    def _bind_self(self, method: str, value: str) -> None:
        params = self.defs.get(method)
        if params and params[0]:
            self._add(f"{method}.<locals>.{params[0][0]}", {value})

    def _instances(self, expr: tuple) -> set[str]:
        """An annotation's instances. A Protocol names no class whose code runs (`protocols`):
        what it stands for is an instance of one of the project classes that derive from it
        by name (a cone, `class_hierarchy`), or nothing the flow can follow."""
        protocols = self.names.protocols
        found: set[str] = set()
        for value in self.evaluate(expr[1]):
            if value in protocols:
                implementers = self.hierarchy.instance(value)
                if implementers is not None:
                    found.add(implementers)
            elif value in self.names.classes:
                found.add("!" + value)
        return found

    def _super(self, expr: tuple) -> set[str]:
        owner = expr[1]
        return {f"^{owner}^{v[1:]}" for v in self._read(expr[2]) if v[0] == "!"}

    def _explicit_super(self, expr: tuple) -> set[str]:
        """`super(Cls, obj)`: ``obj``'s instances, their attributes looked up after ``Cls``."""
        owners = [c for c in sorted(self.evaluate(expr[1])) if c in self.names.classes]
        instances = [v[1:] if v[0] == "!" else v for v in sorted(self.evaluate(expr[2])) if v[0] in "!+&"]
        return {f"^{owner}^{cls}" for owner in owners for cls in instances}

    # -- calls ---------------------------------------------------------------------------------
    def _call(self, expr: tuple) -> set[str]:
        _, callee, args, kwargs, key, extra = expr
        positional = self._positional(args)
        keywords = [(name, self.evaluate(value)) for name, value in kwargs]
        return self._call_values(self.evaluate(callee), positional, keywords, key, extra)

    def _call_values(
        self,
        callees: set[str] | frozenset[str],
        positional: list[tuple[bool, set[str] | frozenset[str]]],
        keywords: list[tuple[str | None, set[str] | frozenset[str]]],
        key: CallKey,
        extra: bool,
    ) -> set[str]:
        """What a call of ``callees`` returns, its arguments' values already evaluated (the
        arguments flow into each target's parameters, the call's key records the targets)."""
        result: set[str] = set()
        for value in sorted(self._callables(callees)):
            if value[0] == "?":
                self.outside.setdefault(key[0], set()).add(value[1:])
                if value[1:] not in _KEEPS_ORDER:
                    for _, values in (*positional, *keywords):
                        self.containers.escape(values)
                continue
            if value[0] == "@":  # `f.__get__(obj, cls)`: f as a method of obj (`self.forward = ...`)
                for instance in sorted(positional[0][1]) if positional else ():
                    self._bind_self(value[1:], instance)
                result.add("~" + value[1:])
                continue
            target, shift = self._target(value, result)
            if target is None:
                continue
            (self.extra if extra else self.calls).setdefault(key, set()).add(target)
            self._bind(target, shift, positional, keywords)
            result |= self._read(f"{target}.<return>")
            for name, index in self._passthrough.get(target, ()):
                passed = None if index is None else self._passed(shift, positional, keywords, name, index)
                result |= self._read(self.param_location(target, name)) if passed is None else passed
            for location, tests in self._guarded.get(target, ()):
                if all(self._may_pass(shift, positional, keywords, test) for test in tests):
                    result |= self._read(location)
        return result

    @staticmethod
    def _passed(
        shift: int, positional: list, keywords: list, name: str, index: int
    ) -> set[str] | frozenset[str] | None:
        """What this call passes for the callee's parameter ``name`` (at ``index``); None when that is not
        known here (a starred argument before it, ``self`` bound elsewhere, left to its default)."""
        slot = index - shift
        where = passed_positionally([starred for starred, _ in positional], slot)
        if where is None:
            return None
        return positional[slot][1] if where else next((v for key, v in keywords if key == name), None)

    def handed_back(self, function: str) -> list[tuple[str, int | None]]:
        """The parameters a `return p` of ``function`` hands back: name, and index where known."""
        return self._passthrough.get(function, [])

    @staticmethod
    def param_location(function: str, name: str) -> str:
        """Where parameter ``name`` of ``function`` lives: what every caller passes there."""
        return f"{function}.<locals>.{name}"

    def _param_index(self, function: str, name: str) -> int | None:
        """The position of parameter ``name`` in the definition of ``function`` that `defs`
        kept; None when that definition has no such parameter: a qualname defined twice (a
        dispatch decorator's overloads) keeps the last definition's parameters, and a fact of
        another definition read by position there named the wrong parameter, or none."""
        params = self.defs.get(function, ((),))[0]
        return params.index(name) if name in params else None

    def _may_pass(self, shift: int, positional: list, keywords: list, test: tuple) -> bool:
        """Whether this call's argument for the parameter an `isinstance` test names may be an
        instance of the tested classes (`return_guards.may_pass`); not passed, or passed in a
        starred argument: it may."""
        name, index, classes = test
        if index is None:
            return True  # the definition kept has no such parameter: nothing decides it
        values = self._passed(shift, positional, keywords, name, index) or _EMPTY
        tested = {c for c in self.evaluate(classes) if c in self.names.classes or c[0] == "?"}
        return may_pass(values, tested, self.hierarchy)

    def _returns(self, function: str) -> set[str] | frozenset[str]:
        """Everything ``function`` may return, its guarded returns included (a property, an
        iterator protocol: no argument decides them)."""
        found: set[str] = set()
        for location in [f"{function}.<return>", *(g for g, _ in self._guarded.get(function, ()))]:
            found |= self._read(location)
        for name, _ in self.handed_back(function):
            found |= self._read(self.param_location(function, name))
        return found

    def _callables(self, values: set[str] | frozenset[str]) -> set[str] | frozenset[str]:
        """What calling each value runs, a cone's as the `forward` (or `__call__`) of each of
        its classes, bound methods whose ``self`` already holds the cone (`_self_values`)."""
        if not any(v[0] in _CONES for v in values):
            return values
        found = {v for v in values if v[0] not in _CONES}
        for value in sorted(values - found):
            methods = (
                {self._method(sub, "forward") or self._method(sub, "__call__")}
                for sub in self.hierarchy.cone(value[1:])
            )
            found |= {"~" + m for m in self._capped(methods, value[0]) if m is not None}
        return found

    def _positional(self, args: tuple) -> list[tuple[bool, set[str] | frozenset[str]]]:
        """Each positional argument's values, a starred one's elements."""
        return [
            (True, self.containers.elements(self.evaluate(a[1])))
            if a is not None and a[0] == "*"
            else (False, self.evaluate(a))
            for a in args
        ]

    def _outside_call(self, expr: tuple) -> frozenset[str]:
        """A library call the flow models (`list(...)`): a call outside the project too."""
        for value in self._global(expr[1]):
            if value[0] == "?":
                self.outside.setdefault(expr[2][0], set()).add(value[1:])
        return _EMPTY

    def target_of(self, value: str) -> tuple[str | None, int]:
        """For readers of the solved flow: the function calling ``value`` runs (None: none the
        project defines) and how many leading parameters it fills itself."""
        return self._target(value, set())

    def _target(self, value: str, result: set[str]) -> tuple[str | None, int]:
        """The function calling ``value`` runs, and how many leading parameters it fills itself."""
        first = value[0]
        if first == "~":
            return value[1:], 1
        if first == "!":
            cls = value[1:]
            method = self._method(cls, "forward") or self._method(cls, "__call__")
            if method is not None:
                self._bind_self(method, value)
            return method, 1
        if first == "^":
            return None, 0
        if value in self.names.classes:
            result.add("!" + value)
            init = self._method(value, "__init__")
            if init is not None:
                self._bind_self(init, "!" + value)
            return init, 1
        if value in self.defs or value in self.names.functions:
            return value, 0
        return None, 0

    def _method(self, cls: str, name: str) -> str | None:
        return self._lookup(cls, name, None)[1]

    def _bind(self, target: str, shift: int, positional: list, keywords: list) -> None:
        """Arguments flow into the parameters of ``target`` (context-insensitive)."""
        spec = self.defs.get(target)
        if spec is None:
            return
        params, count, vararg, kwarg, _ = spec
        for index, (starred, values) in enumerate(positional):
            slot = index + shift
            if starred or slot >= count:
                if vararg:
                    self._add(f"{target}.<locals>.{vararg}", values)
                if starred:
                    for param in params[slot:count]:
                        self._add(f"{target}.<locals>.{param}", values)
                continue
            self._add(f"{target}.<locals>.{params[slot]}", values)
        for name, values in keywords:
            if name is not None and name in params:
                self._add(f"{target}.<locals>.{name}", values)
            elif kwarg:
                self._add(f"{target}.<locals>.{kwarg}", values)

    def _decorate(self, expr: tuple) -> set[str] | frozenset[str]:
        """A decorator applied to a definition; one the project does not define keeps it."""
        _, decorator, value, key = expr
        decorated = self.evaluate(value)
        decorators = self.evaluate(decorator)
        if not any(self._target(v, set())[0] for v in sorted(decorators)):
            return decorated
        # The values just read, not the expressions again: stacked decorators nest, and reading
        # each level twice made a stack of n cost 2**n (ColossalAI's tests stack a dozen).
        return self._call_values(decorators, [(False, decorated)], [], key, True) or decorated

    def _partial(self, expr: tuple) -> set[str] | frozenset[str]:
        _, func, args, kwargs = expr
        functions = self.evaluate(func)
        positional = self._positional(args)
        keywords = [(name, self.evaluate(value)) for name, value in kwargs]
        for value in sorted(functions):
            target, shift = self._target(value, set())
            if target is not None and value[0] != "!" and value not in self.names.classes:
                self._bind(target, shift, positional, keywords)
                self.partialled.add(target)
        return functions

    def _container_read(self, expr: tuple) -> set[str]:
        """`d.get(k)`, `d.values()`: what the receiver holds, unless it is an object with that method."""
        found: set[str] = set()
        for value in tuple(self.evaluate(expr[1])):
            if is_container(value):
                found |= self.containers.elements((value,))
                continue
            cls = value[1:] if value[0] == "!" else value
            if cls in self.names.classes and self._method(cls, expr[2]) is not None:
                continue
            found.add(value)
        return found

    def _raise(self, expr: tuple) -> set[str]:
        classes = {v for v in self.evaluate(expr[1]) if v in self.names.classes}
        if classes:
            self._call(("c", ("u", *[("d", c) for c in sorted(classes)]), (), (), expr[2], True))
        return set()

    def _iterate(self, expr: tuple) -> set[str]:
        """`for x in value`: an object with __iter__ gives what its iterator's __next__ returns
        (both calls are edges); anything else is a container's elements, kept as they are."""
        found: set[str] = set()
        for value in sorted(self.evaluate(expr[1])):
            iterated = self._iteration(value, expr[2])
            if iterated is not None:
                found |= iterated
            else:
                found |= self.containers.elements((value,)) if is_container(value) else {value}
        return found

    def _iteration(self, value: str, key: CallKey | None) -> set[str] | None:
        """What iterating ``value`` gives when it is an instance of a project class that defines
        __iter__: what its iterator's __next__ returns, both calls edges at ``key`` where the
        iteration is a statement of its own (None: no such class, the caller's reading holds)."""
        method = self._method(value[1:], "__iter__") if value[0] == "!" else None
        if method is None:
            return None
        self._protocol_call(method, value, key)
        found: set[str] = set()
        for iterator in sorted(self._returns(method)):
            following = self._method(iterator[1:], "__next__") if iterator[0] == "!" else None
            if following is not None:
                self._protocol_call(following, iterator, key)
                found |= self._returns(following)
        return found

    def _protocol_call(self, method: str, instance: str, key: CallKey | None) -> None:
        """A call Python makes itself (iteration): an edge the binder never names (recorded where
        the call has a site, ``key``)."""
        self._bind_self(method, instance)
        if key is not None:
            self.extra.setdefault(key, set()).add(method)

    def _union(self, expr: tuple) -> set[str] | frozenset[str]:
        if len(expr) == 2:
            return self.evaluate(expr[1])
        found: set[str] = set()
        for part in expr[1:]:
            found |= self.evaluate(part)
        return found

    def _effects(self, expr: tuple) -> frozenset[str]:
        for part in expr[1:]:
            self.evaluate(part)
        return _EMPTY


def passed_positionally(starred: list[bool], slot: int) -> bool | None:
    """How a call with these positional arguments (each starred or not) passes the parameter at
    positional ``slot``: True at that position, False by keyword if at all, None when it cannot
    be told (``self``, slot -1, bound elsewhere; a starred argument at or before it)."""
    if slot < 0 or any(starred[: slot + 1]):
        return None
    return slot < len(starred)
