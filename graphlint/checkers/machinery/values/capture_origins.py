"""Where a captured callable the value flow could not resolve comes from: outside, or unknown.

`graphlint captures` sorts each callable a capture runs into resolved, outside (defined in
code graphlint does not analyse) and unresolved. A name imported from another library is
plainly outside. A value held in a parameter or an attribute needs its provenance: Megatron's
`FullCudaGraphWrapper(forward_backward_func)` keeps `self.forward_backward_func` from its
constructor, and no analysed file constructs one (the training script does), so what the
capture runs is the user's; DeepSpeed's `InferenceEngine.module` is the model a user hands to
`deepspeed.init_inference(model)`. Such a callable is outside, and the report says so; one
whose provenance reaches code that the analysed files could be feeding in ways graphlint does
not follow stays unresolved. Never guessed: a value is outside only when every source of it
is outside.

The sources of a value, read from the value-flow facts (`value_facts`) after the solve:
  - a local, global or attribute: the right-hand sides of the assignments to it;
  - a parameter of ``f``: the arguments every resolved call of ``f`` passes it, its default
    (an assignment fact of the parameter), and nothing else only if every reference to ``f``
    in the analysed files is one of those calls (`_complete_callers`): a function named
    anywhere else (stored in a registry, passed as a value, called through a value the flow
    cannot follow) may be called with anything;
  - an attribute of an outside value (`module.backward_dw` of a user's module), or a library
    call made only with outside values (`getattr(user_module, name)`), is outside too.

A parameter of a function no analysed code refers to at all is a public entry point: its
value comes from the user. `forward`, `__call__` and other special methods are never
public in that sense: Python calls them implicitly (`model(x)`), through calls that name no
method, so their callers cannot be listed.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from graphlint.checkers.machinery.values.value_containers import is_container
from graphlint.checkers.machinery.values.value_flow import ValueFlow, passed_positionally

_MAX_DEPTH = 12  # sources followed from the captured expression
_BUDGET = 4000  # sources looked at per callable: past it, unresolved (never guessed)
_CYCLE = "cycle"  # a source met again on its own path: the other sources decide
_PLAIN_DECORATORS = frozenset({"?<builtin>.staticmethod", "?<builtin>.classmethod", "?<builtin>.property"})
_LEAVES = frozenset({"v", "g", "d", "i", "w", "s", "o"})
_IMPLICIT = frozenset({"forward", "__call__"})  # run by calls that name no method
_TYPE_TESTS = frozenset({("g", "isinstance"), ("g", "issubclass")})  # read a class, never call or keep it
_INTO = frozenset({"[", ":", "{"})  # stores into a container (value_containers)


class CaptureOrigins:
    """The provenance index of a solved value flow (built once, for `graphlint captures`)."""

    def __init__(self, flow: ValueFlow, facts: Iterable[tuple]) -> None:
        self.flow = flow
        self.calls: dict[tuple, tuple] = {}  # call key -> the call expression ("c", ...)
        self._assigned: dict[str, list[tuple]] = {}  # location -> right-hand sides
        self._attr_stores: dict[str, list[tuple[tuple, tuple]]] = {}  # attr -> (holder expr, rhs)
        self._sites: dict[str, list[tuple[tuple, tuple, int]]] = {}  # function -> (args, kwargs, shift)
        self._references: dict[str, int] = {}  # name read (a qualname, or ".attr") -> reads
        self._in_sites: dict[str, int] = {}  # ... of which as the callee of a resolved call
        self._decorated: set[str] = set()  # definitions a decorator other than staticmethod... wraps
        self._params: dict[str, tuple[str, str]] = {}  # parameter location -> (function, parameter)
        self._displays: dict[str, tuple] = {}  # container site -> its display ("l", site, entries)
        self._element_stores: list[tuple[tuple, tuple]] = []  # (store target, value) into containers
        self._by_container: dict[str, list[tuple[str | None, tuple]]] | None = None  # built when first asked
        self._local_reads: dict[str, int] = {}  # location -> reads
        self._local_calls: dict[str, int] = {}  # ... of which as the callee of a resolved call
        self._held_in: dict[str, list[str]] = {}  # function or class -> locations assigned its bare name
        self._annotated: dict[str, int] = {}  # class -> annotations naming it
        self._guards: dict[str, tuple] = {}  # parameter location -> the class its isinstance guard checks
        for qualname, (params, _, vararg, kwarg, _) in flow.defs.items():
            for param in (*params, vararg, kwarg):
                if param:
                    self._params[f"{qualname}.<locals>.{param}"] = (qualname, param)
        for fact in facts:
            self._index_fact(fact)
        for key, call in self.calls.items():
            self._index_site(key, call)

    def outside(self, key: tuple) -> str | None:
        """Why the callable called (or captured) at ``key`` comes from outside the analysed
        files, or None when it may not (unresolved)."""
        call = self.calls.get(key)
        if call is None:
            return None
        self._budget = _BUDGET
        found = self._origin(call[1], 0, frozenset())
        return None if found == _CYCLE else found

    # -- the index --------------------------------------------------------------------------
    def _index_fact(self, fact: tuple) -> None:
        if fact[0] in ("K", "Q", "P"):
            return  # a constant global, the tests of a guarded return, a parameter handed back: no expression
        if fact[0] == "G":
            self._guards[fact[1]] = fact[2]  # a parameter checked by a leading isinstance guard
            return
        if fact[0] != "=":
            if fact[1][0] not in ("v", "g"):  # a bare name evaluated for nothing (an annotation) passes nothing
                self._walk(fact[1])
            return
        target, value = fact[1], fact[2]
        if value[0] == "+":
            return  # `isinstance(p, C)` narrows ``p``; the test itself is indexed as the call it is
        if target[0] in _INTO:
            self._element_stores.append((target, value))
        while target[0] in _INTO and target[1][0] in ("v", "[", ":", "{"):
            target = target[1]  # `xs.append(v)`, `d[k] = v`: what the container holds comes from v too
        if target[0] == "v":
            self._assigned.setdefault(target[1].partition("#")[0], []).append(value)
            for part in _alternatives(value):
                named = self._name(part) if part[0] in ("v", "g") else None
                if named is not None:
                    self._held_in.setdefault(named, []).append(target[1].partition("#")[0])
        elif target[0] == "a":
            self._attr_stores.setdefault(target[2], []).append((target[1], value))
            if not self._names_class(target[1]):
                self._walk(target[1])
        if value[0] == "k":
            self._decorated_definition(value)
        elif value[0] != "d":
            self._walk(value)

    def _decorated_definition(self, value: tuple) -> None:
        """A decorator reads its names; a definition it may register is called by anything."""
        decorators = []
        while value[0] == "k":
            decorators.append(value[1])
            value = value[2]
        for decorator in decorators:
            self._walk(decorator)
        if value[0] == "d" and any(not self.flow.evaluate(d) <= _PLAIN_DECORATORS for d in decorators):
            self._decorated.add(value[1])

    def _walk(self, expr: tuple | None) -> None:
        """Index the calls in ``expr`` and count the names it reads."""
        stack = [expr]
        while stack:
            current = stack.pop()
            if current is None:
                continue
            tag = current[0]
            if tag == "v" or tag == "g":
                _bump(self._references, self._name(current))
                if tag == "v":
                    _bump(self._local_reads, current[1].partition("#")[0])
            elif tag == "a":
                _bump(self._references, f".{current[2]}")
                if not self._names_class(current[1]):
                    stack.append(current[1])  # `C.attr` reads the class, neither constructing nor passing it
            elif tag == "c":
                if current[4] in self.calls:
                    continue  # one call read by several facts (`a, b = f(x)`): its names count once
                self.calls[current[4]] = current
                stack.append(current[1])
                if current[1] in _TYPE_TESTS and len(current[2]) == 2:
                    stack.append(current[2][0])
                    stack.extend(self._unnamed_classes(current[2][1]))  # `isinstance(x, C)` passes no C
                else:
                    stack.extend(current[2])
                stack.extend(value for _, value in current[3])
            elif tag == "p":
                stack.append(current[1])
                stack.extend(current[2])
                stack.extend(value for _, value in current[3])
            elif tag == "k":
                stack.extend((current[1], current[2]))
            elif tag == "n":
                if self._names_class(current[1]):
                    _bump(self._annotated, self._name(current[1]))  # names its class, constructs none
                else:
                    stack.append(current[1])
            elif tag in ("m", "r", "t", "*", "[", ":", "z"):
                stack.append(current[1])
            elif tag == "S":
                stack.append(current[2])  # super(Cls, obj) names Cls without constructing or passing it
            elif tag in ("u", "e", "V", "y"):
                stack.extend(current[1:])
            elif tag == "l":
                self._displays.setdefault(current[1], current)
                stack.extend(entry[1] for entry in current[2])

    def _unnamed_classes(self, expr: tuple | None) -> list[tuple | None]:
        """The parts of an `isinstance` class argument that are not plain class names."""
        if expr is not None and expr[0] == "l":
            return [part for entry in expr[2] for part in self._unnamed_classes(entry[1])]
        return [] if expr is not None and self._names_class(expr) else [expr]

    def _names_class(self, expr: tuple) -> bool:
        return expr[0] in ("v", "g") and self._name(expr) in self.flow.names.classes

    def _name(self, expr: tuple) -> str | None:
        """The function or class a plain name read refers to, if it names one."""
        if expr[0] == "g":
            return self.flow._resolve(expr[1])
        base = expr[1].partition("#")[0]  # a versioned name: `mod.x#2`
        return base if base in self.flow.defs or base in self.flow.names.classes else None

    def _index_site(self, key: tuple, call: tuple) -> None:
        """The arguments a resolved call passes, by the function it runs."""
        targets = self.flow.calls.get(key, set()) | self.flow.extra.get(key, set())
        if not targets:
            return
        callee = call[1]
        for part in _alternatives(callee):
            if part[0] in ("v", "g"):
                _bump(self._in_sites, self._name(part))
                if part[0] == "v":
                    _bump(self._local_calls, part[1].partition("#")[0])
            elif part[0] == "a":
                _bump(self._in_sites, f".{part[2]}")
        for value in tuple(self.flow.evaluate(callee)):
            target, shift = self.flow._target(value, set())
            if target is not None and target in targets:
                self._sites.setdefault(target, []).append((call[2], call[3], shift))

    # -- provenance ---------------------------------------------------------------------------
    def _origin(self, expr: tuple | None, depth: int, seen: frozenset) -> str | None:
        """Why every value ``expr`` may hold is outside, or None."""
        self._budget -= 1
        if expr is None or depth > _MAX_DEPTH or self._budget < 0:
            return None
        tag = expr[0]
        if tag == "g":
            values = self.flow.evaluate(expr)
            if values and all(v[0] == "?" for v in values):
                return f"`{min(values)[1:]}` is not analysed"
            return None
        if tag == "v":
            return self._location(expr[1].partition("#")[0], depth, seen)
        if tag == "a":
            return self._attribute(expr, depth, seen)
        if tag == "c":
            return self._call_result(expr, depth, seen)
        if tag == "u":
            found = [self._part(part, expr, depth, seen) for part in expr[1:]]
            return (_first(found) or _CYCLE) if all(found) else None
        if tag == "[":
            sources = self._element_sources(expr)
            if sources is not None:
                found = [self._origin(source, depth + 1, seen) for source in sources]
                return (_first(found) or _CYCLE) if all(found) else None
        if tag in ("p", "m", "*", "t", "[", ":"):
            return self._origin(expr[1], depth + 1, seen)
        if tag in ("V", "y"):
            found = [self._origin(part, depth + 1, seen) for part in expr[1:]]
            return (_first(found) or _CYCLE) if all(found) else None
        if tag == "l":
            found = [self._origin(entry[1], depth + 1, seen) for entry in expr[2]]
            return (_first(found) or _CYCLE) if all(found) else None  # `[]`: its stores decide
        if tag == "+":  # `isinstance(p, C)`: project classes may be in play; a library's add nothing
            return None if self.flow.evaluate(expr) else _CYCLE
        return None

    def _location(self, location: str, depth: int, seen: frozenset) -> str | None:
        if location in seen:
            return _CYCLE
        seen = seen | {location}
        guarded = self._outside_instance(location)
        if guarded is not None:
            return guarded
        sources = [s for s in self._assigned.get(location, ()) if s[0] != "n"]  # an annotation is no value
        why = ""
        if location in self._params:
            function, param = self._params[location]
            passed = self._passed(function, param)
            if passed is None:
                return None  # called from where graphlint cannot list
            sources += passed
            why = f"parameter `{param}` of `{self._display(function)}`"
            why += "" if passed else ", which no analysed code calls"
        if not sources:
            return why or None
        reasons = [self._origin(source, depth + 1, seen) for source in sources]
        if not all(reasons):
            return None
        first = _first(reasons)
        if not why:
            return first or _CYCLE  # every source met again on its path: the others decide
        return f"{why}, given what is {first}" if first and first.startswith("returned") else why

    def _element_sources(self, expr: tuple) -> list[tuple] | None:
        """`xs[k]` read from containers the flow knows: only what their displays and stores
        put under ``k`` (or under a key not known), so `i, f = pair` follows ``f``'s own
        source, not its neighbours'. None when some value read is not such a container."""
        _, base, key = expr
        key = key if isinstance(key, str) else None  # a name that may be a constant: any key
        held = self.flow.evaluate(base)
        if not held or not all(is_container(v) for v in held):
            return None
        stores = self._stores_by_container()
        sources: list[tuple] = []
        for value in sorted(held):
            container, _, view = value.partition("|")
            display = self._displays.get(container)
            if display is None:
                return None
            wanted = None if view or container in self.flow.containers.collapsed else key
            for entry_key, part, _ in display[2]:
                if wanted is None or entry_key is None or entry_key == wanted:
                    sources.append(part)
            for stored_key, part in stores.get(container, ()):
                if wanted is None or stored_key is None or stored_key == wanted:
                    sources.append(part)
        return sources

    def _stores_by_container(self) -> dict[str, list[tuple[str | None, tuple]]]:
        """The stores into each container (`xs[k] = v`, `xs.append(v)`, `d.update(...)`)."""
        if self._by_container is None:
            self._by_container = {}
            for target, value in self._element_stores:
                key = target[2] if target[0] == "[" and isinstance(target[2], str) else None
                for held in sorted(self.flow.evaluate(target[1])):
                    if is_container(held):
                        self._by_container.setdefault(held.partition("|")[0], []).append((key, value))
        return self._by_container

    def _outside_instance(self, location: str) -> str | None:
        """Why a parameter its function checks with `if not isinstance(p, C): raise` holds
        an outside object: ``C`` is not analysed and no analysed class derives from it."""
        checked = self._guards.get(location)
        if checked is None or location not in self._params:
            return None
        classes = self.flow.evaluate(checked)
        if not classes or not all(c[0] == "?" for c in classes):
            return None
        names = {c[1:] for c in classes}
        tails = {
            name.rpartition(".")[2] for name in names
        }  # `torch.fx.GraphModule` is also `...graph_module.GraphModule`
        if any(
            base.rpartition(".")[2] in tails for summary in self.flow.names.classes.values() for base in summary.bases
        ):
            return None
        return f"an instance of `{min(names)}` (checked by isinstance), which is not analysed"

    def _display(self, function: str) -> str:
        found = self.flow.names.functions.get(function)
        return found[1].display if found is not None else function

    def _passed(self, function: str, param: str) -> list[tuple] | None:
        """The argument expressions the analysed calls of ``function`` pass to ``param``
        (None when not every caller is one of them)."""
        if not self._complete_callers(function):
            return None
        found: list[tuple] = []
        for args, kwargs, shift in self._sites.get(function, ()):
            passed = self._passed_at(function, param, args, kwargs, shift)
            if passed is None:
                return None
            found += passed
        return found

    def _passed_at(self, function: str, param: str, args: tuple, kwargs: tuple, shift: int) -> list[tuple] | None:
        """What one call passes to ``param``. Past a `*xs` or `**kw`, which argument lands
        where is not known: unless ``param`` was given before it, by position or by name
        (Python refuses a second value for it), its sources are what is unpacked there
        (`_unpacked`)."""
        params, count, vararg, kwarg, _ = self.flow.defs[function]
        found: list[tuple] = []
        given = False
        starred = False
        for index, arg in enumerate(args):
            if arg is not None and arg[0] == "*":
                starred = True
                break
            slot = index + shift
            name = params[slot] if slot < count else vararg
            if name == param:
                given = param != vararg  # *args may take more from a later `*xs`
                if arg is not None:
                    found.append(arg)
        splatted = any(name is None for name, _ in kwargs)
        for name, value in kwargs:
            if name == param or (name is not None and name not in params and param == kwarg):
                given = given or name == param
                if value is not None:
                    found.append(value)
        if (starred or splatted) and not given:
            unpacked = [a[1] for a in args if a is not None and a[0] == "*"]
            unpacked += [value for name, value in kwargs if name is None and value is not None]
            for source in unpacked:
                forwarded = self._unpacked(source, param)
                if forwarded is None:
                    return None
                found += forwarded
        return found

    def _unpacked(self, source: tuple, param: str) -> list[tuple] | None:
        """The sources of ``param`` in a `*xs` or `**kw` a call unpacks: the caller's own
        `*args`/`**kwargs` forward what its callers pass there (`**kw` only their keyword
        ``param``); anything else, every element of it."""
        if source[0] != "v" or source[1] not in self._params:
            return [source]
        caller, name = self._params[source[1]]
        params, _, vararg, kwarg, _ = self.flow.defs[caller]
        if name == vararg:
            return self._passed(caller, name)
        if name != kwarg:
            return [source]
        if param in params or not self._complete_callers(caller):
            return [] if param in params else None  # a named parameter never lands in **kwargs
        found: list[tuple] = []
        for _, kwargs, _ in self._sites.get(caller, ()):
            for given, value in kwargs:
                if given == param and value is not None:
                    found.append(value)
                elif given is None and value is not None:
                    forwarded = self._unpacked(value, param)
                    if forwarded is None:
                        return None
                    found += forwarded
        return found

    def _complete_callers(self, function: str) -> bool:
        """Whether every reference to ``function`` in the analysed files is a resolved call
        of it (so `_sites` lists all its callers)."""
        holder, _, name = function.rpartition(".")
        if function in self._decorated or name in _IMPLICIT or (name.startswith("__") and name != "__init__"):
            return False
        if name == "__init__" and holder in self.flow.names.classes:
            named = holder
        elif holder in self.flow.names.classes:
            named = f".{name}"  # a method: every `x.name` read anywhere
        else:
            named = function
        sites = self._in_sites.get(named, 0)
        aliases = self._called_aliases(named)
        # An annotation only names the class: not a caller, when the analysed code constructs
        # it; a class only annotated is built where graphlint cannot see (a user, a config
        # that names it: Hydra's `_target_`), possibly from the project's own values.
        annotated = 0 if sites or aliases else self._annotated.get(named, 0)
        return self._references.get(named, 0) + annotated - aliases == sites

    def _called_aliases(self, named: str) -> int:
        """Reads of ``named`` that assign it to a local only ever called, at least once
        (`cls = A if c else B`, then `cls(...)`): what such a call passes is among the sites."""
        return sum(
            1
            for location in self._held_in.get(named, ())
            if location not in self._params
            and self._local_reads.get(location, 0) == self._local_calls.get(location, 0) > 0
        )

    def _attribute(self, expr: tuple, depth: int, seen: frozenset) -> str | None:
        _, base, attr = expr
        holders = tuple(self.flow.evaluate(base))
        if not holders:
            inner = self._origin(base, depth + 1, seen)
            return f"an attribute of a value from outside ({inner})" if inner else None
        if all(h[0] == "?" for h in holders):
            return f"an attribute of `{min(holders)[1:]}`, which is not analysed"
        classes = self._instance_classes(holders)
        if classes is None:
            return None
        stores = [
            value
            for where, value in self._attr_stores.get(attr, ())
            if classes & (self._instance_classes(self.flow.evaluate(where), strict=False) or set())
        ]
        if not stores or any(self.flow.names.resolve_name(f"{c}.{attr}") for c in classes):
            return None
        key = ("attr", attr)
        if key in seen:
            return _CYCLE
        reasons = [self._origin(value, depth + 1, seen | {key}) for value in stores]
        first = _first(reasons) if all(reasons) else None
        return f"set from {first}" if first is not None else (_CYCLE if all(reasons) else None)

    def _instance_classes(self, values: Iterable[str], strict: bool = True) -> set[str] | None:
        """The classes of the instances among ``values`` (a cone ``+C`` or ``&C``: ``C`` and its
        project subclasses); None when ``strict`` and some value is no instance."""
        classes: set[str] = set()
        for value in values:
            if value[0] == "!":
                classes.add(value[1:])
            elif value[0] in "+&":
                classes.update(self.flow.hierarchy.cone(value[1:]))
            elif strict:
                return None
        return classes

    def _part(self, part: tuple, union: tuple, depth: int, seen: frozenset) -> str | None:
        """One alternative of a union; a part that holds no value (a library call the flow
        models beside what it passes through, `len(xs)`; `xs.pop()` on a plain container,
        beside the container read) adds no source (`_CYCLE`)."""
        if part[0] == "o" or part[0] == "e":
            return _CYCLE
        callee = part[1] if part[0] == "c" else None
        if (
            callee is not None
            and callee[0] == "a"
            and ("m", callee[1], callee[2]) in union
            and not self.flow.evaluate(callee)
        ):
            return _CYCLE
        return self._origin(part, depth + 1, seen)

    def _call_result(self, expr: tuple, depth: int, seen: frozenset) -> str | None:
        """What a call returns: a library call given only outside values (and constants)
        returns an outside value; a project function what its `return`s give; a callable
        from outside, given only outside values, its own."""
        callees = tuple(self.flow.evaluate(expr[1]))
        values = [a[1] if a[0] == "*" else a for a in expr[2] if a is not None]
        values += [v for _, v in expr[3] if v is not None]
        if callees and all(v[0] == "?" for v in callees):
            reasons = [self._origin(value, depth + 1, seen) for value in values]
            if not all(reasons):
                return None
            return _first(reasons) or f"returned by `{min(callees)[1:]}`, which is not analysed"
        if callees:
            targets = [self.flow._target(v, set()) for v in callees if v[0] != "?"]
            if len(targets) != len(callees) or any(
                t is None or v in self.flow.names.classes or v[0] == "!"
                for (t, _), v in zip(targets, callees, strict=True)
            ):
                return None  # constructs a project object, or calls something not a plain function
            reasons = [r for t, shift in targets if t for r in self._returned(expr, t, shift, depth, seen)]
            return (_first(reasons) or _CYCLE) if all(reasons) else None
        if self._origin(expr[1], depth + 1, seen) is None:
            return None
        reasons = [self._origin(value, depth + 1, seen) for value in values]
        return "returned by a callable from outside" if all(reasons) else None

    def _returned(self, call: tuple, function: str, shift: int, depth: int, seen: frozenset) -> list[str | None]:
        """Why each thing ``function`` may return at this call comes from where it does: its
        returns, and for each parameter a `return p` hands back, this call's own argument there
        (an identity helper has no return of its own)."""
        back = self.flow.handed_back(function)
        plain = f"{function}.<return>"
        reasons = [self._location(plain, depth + 1, seen)] if plain in self._assigned or not back else []
        for name, index in back:
            argument = None if index is None else _argument(call, name, index - shift)
            if argument is None:
                reasons.append(self._location(self.flow.param_location(function, name), depth + 1, seen))
            else:
                reasons.append(self._origin(argument, depth + 1, seen))
        return reasons


def _argument(call: tuple, name: str, slot: int) -> tuple | None:
    """The expression a ``("c", ...)`` call passes for parameter ``name``, at positional
    ``slot`` or by keyword; None for ``self`` (slot -1), after a starred argument, or when the
    parameter is left to its default."""
    positional, keywords = call[2], call[3]
    where = passed_positionally([a is not None and a[0] == "*" for a in positional], slot)
    if where is None:
        return None
    return positional[slot] if where else next((value for key, value in keywords if key == name), None)


def _alternatives(expr: tuple) -> Iterator[tuple]:
    """``expr`` and, for a union, its parts: the names a callee expression reads directly."""
    if expr[0] == "u":
        for part in expr[1:]:
            yield from _alternatives(part)
    else:
        yield expr


def _first(reasons: list[str | None]) -> str | None:
    """The first reason that is not a cycle (None: every source was a cycle)."""
    return next((r for r in reasons if r != _CYCLE), None)


def _bump(counts: dict[str, int], name: str | None) -> None:
    if name is not None:
        counts[name] = counts.get(name, 0) + 1
