"""What a parameter holds along the capture reach: the arguments of the call sites it went through.

The value flow is context-insensitive: a parameter holds what any caller passes. A helper
like `cached_encoder_call(model, args, kwargs, compute)` that a test calls under a capture
with `lambda: model(x)` and a dozen pipelines call outside captures with their own lambdas
then seems to run every one of those lambdas in the test's capture. The capture reach
(`call_graph`) walks from the captures down, call site by call site, so it can say which
call entered a function; this module reads that site's arguments from the flow's facts and
gives the function a *context*: parameter location -> the values the entering sites pass it
(one level of call-site sensitivity, 1-CFA, for the calls of parameters along the reach).

  - A call of the parameter (`compute()`), or of one of its attributes (`compute.run()`), in a
    function with a context runs what the context holds there, not the flow's union.
  - An argument that is the caller's own parameter passes on the caller's context (`g(compute)`),
    so a callable handed down several levels keeps its site.
  - A nested function reads its enclosing function's context for the enclosing parameters it
    calls, when its value never leaves the enclosing function except as an argument or callee
    of a call there (`_Index.escaping`): a closure returned or stored (a decorator's wrapper)
    may run with an activation the capture never entered, so it keeps the flow's union.
  - What the body assigns to the parameter, its default and its annotation join the site's
    values (the flow records them as assignments to the parameter's location).
  - Unknown stays the flow's answer: a parameter the site does not pass by position or name (a
    default, `*args`, `**kwargs`), a site the flow has no fact for, a function a capture runs
    whole (no site), or one reached through a site whose callee the flow cannot tie to it,
    gets today's context-insensitive values; so does one the sites pass more values than the
    flow lets a location hold (`value_flow.MAX_VALUES`: too imprecise to call through). Those are what the parameter may hold from the
    flow's own reading; an empty set would be a claim the site never made. Where the site
    passes something the flow cannot follow (a constant, a library object), the context holds
    nothing there: the call of that parameter is unresolved, as the flow would leave the site.

Per reached function the contexts of all the sites that enter it are joined (a location
unknown at any of them is unknown), so the result is a least fixed point like the bindings
the walk already keeps. Facts are read per file, only for files a capture reaches, from the
cached summaries: the project phase reads no source.
"""

from __future__ import annotations

from collections.abc import Iterable

from graphlint.checkers.machinery.core.model import CallRef, FunctionSummary
from graphlint.checkers.machinery.values.value_flow import MAX_VALUES, CallKey, ValueFlow

# Parameter location (`mod.f.<locals>.compute`) -> the values the entering call sites pass it.
Context = dict[str, frozenset[str]]
_NESTED = ".<locals>."
_PASSED, _READ, _ELSEWHERE = 2, 1, 0  # where a name read sits (`_Index._walk`)


class CallContexts:
    """The contexts of a solved value flow's functions, read from the sites that enter them."""

    def __init__(self, flow: ValueFlow, functions: dict[str, tuple[str, FunctionSummary]]) -> None:
        self.flow = flow
        self.functions = functions
        self._index = _Index(flow, {path: summary.flow for path, summary in flow.names.summaries.items()})
        self._assigned: dict[str, frozenset[str]] = {}
        self._evaluated: dict[int, frozenset[str]] = {}  # id of a fact's expression -> its values

    def entered(self, caller: str, call: CallRef, callee: str, context: Context) -> Context:
        """The context ``callee`` gets from ``call`` in ``caller`` (whose effective context is
        ``context``): each parameter the call passes by position or name, with its values."""
        site = self._site(caller, call.flow_key(caller))
        spec = self.flow.defs.get(callee)
        if site is None or spec is None:
            return {}
        _, callee_expr, args, kwargs, _, _ = site
        shift = self._shift(callee_expr, callee, context)
        if shift is None:
            return {}
        params, count, _, _, _ = spec
        used = self._index.used(self._path(callee))  # parameters called or passed on: the rest never matter
        found: Context = {}
        for index, arg in enumerate(args):
            slot = index + shift
            if (arg is not None and arg[0] == "*") or slot >= count:
                break  # positions unknown from here, or *args: those stay unknown
            location = f"{callee}.<locals>.{params[slot]}"
            if location in used:
                found[location] = self.values(arg, context)
        for name, value in kwargs:
            location = f"{callee}.<locals>.{name}"
            if name is not None and name in params and location in used:
                found[location] = self.values(value, context)
        return {location: values for location, values in found.items() if len(values) <= MAX_VALUES}

    def callees(self, function: str, call: CallRef, context: Context) -> list[str] | None:
        """What ``call`` runs when its callee is a parameter the context knows (or an attribute
        of one); None when the context says nothing about it (the caller asks the flow)."""
        if not context:
            return None
        site = self._site(function, call.flow_key(function))
        if site is None:
            return None
        callee = site[1]
        if callee is None:
            return None
        values: set[str] | frozenset[str]
        if callee[0] == "v" and callee[1] in context:
            values = self._held(callee[1], context)
        elif callee[0] == "a" and callee[1][0] == "v" and callee[1][1] in context:
            values = self.flow.attributes_of(self._held(callee[1][1], context), callee[2])
        else:
            return None
        return sorted(self._targets(values))

    def effective(self, function: str, contexts: dict[str, Context]) -> Context:
        """``function``'s own context and, for a closure that never leaves its enclosing function,
        the enclosing function's (what its calls of the enclosing parameters see)."""
        own = contexts.get(function)
        found: Context = dict(own) if own else {}
        current = function
        while _NESTED in current and current not in self._index.escaping_in(self._path(current)):
            current = current.rpartition(_NESTED)[0]
            outer = contexts.get(current)
            if outer is None:
                break
            for location, values in outer.items():
                found.setdefault(location, values)
        return found

    def values(self, expr: tuple | None, context: Context) -> frozenset[str]:
        """What an argument passes: a parameter the context knows passes the context's values."""
        if expr is None:
            return frozenset()
        if expr[0] == "v" and expr[1] in context:
            return self._held(expr[1], context)
        if expr[0] == "u":
            found: set[str] = set()
            for part in expr[1:]:
                found |= self.values(part, context)
            return frozenset(found)
        return self._evaluate(expr)

    def _evaluate(self, expr: tuple) -> frozenset[str]:
        """The solved flow's values of a fact's expression (fixed after the solve: memoised)."""
        found = self._evaluated.get(id(expr))
        if found is None:
            found = self._evaluated[id(expr)] = frozenset(v for v in self.flow.evaluate(expr) if v[0] != "?")
        return found

    # -- helpers ---------------------------------------------------------------------------
    def _held(self, location: str, context: Context) -> frozenset[str]:
        """The site's values, with what the function's own code assigns to the parameter."""
        assigned = self._assigned.get(location)
        if assigned is None:
            assigned = self._assigned[location] = frozenset(
                v
                for expr in self._index.assignments(location, self._path(location.rpartition(_NESTED)[0]))
                for v in self._evaluate(expr)
            )
        return context[location] | assigned if assigned else context[location]

    def _shift(self, callee_expr: tuple | None, callee: str, context: Context) -> int | None:
        """How many leading parameters the call fills itself (`self`), when every value of the
        callee expression that runs ``callee`` agrees; None if none does (unknown)."""
        shifts = self._shifts(self._evaluate(callee_expr), callee) if callee_expr is not None else set()
        if not shifts:
            shifts = self._shifts(self.values(callee_expr, context), callee)
        return shifts.pop() if len(shifts) == 1 else None

    def _shifts(self, values: Iterable[str], callee: str) -> set[int]:
        found = set()
        for value in values:
            target, shift = self._target(value)
            if target == callee:
                found.add(shift)
        return found

    def _target(self, value: str) -> tuple[str | None, int]:
        return self.flow.target_of(value) if value[0] != "?" else (None, 0)

    def _targets(self, values: Iterable[str]) -> set[str]:
        found = set()
        for value in sorted(values):
            target, _ = self._target(value)
            if target is not None and target in self.functions:
                found.add(target)
        return found

    def _site(self, function: str, key: CallKey) -> tuple | None:
        path = self._path(function)
        return self._index.call(key, path) if path is not None else None

    def _path(self, function: str) -> str | None:
        entry = self.functions.get(function)
        return entry[0] if entry is not None else None


def join(into: Context, new: Context) -> bool:
    """Join one more site's context: a location either leaves unknown is unknown."""
    changed = False
    for location in list(into):
        if location not in new:
            del into[location]
            changed = True
        elif not new[location] <= into[location]:
            joined = into[location] | new[location]
            if len(joined) > MAX_VALUES:
                del into[location]  # too imprecise to call through: the flow's answer
            else:
                into[location] = joined
            changed = True
    return changed


class _Index:
    """The flow's facts of one file at a time, indexed on first use: each call expression by
    its key, the assignments to each location, and the nested functions that escape."""

    def __init__(self, flow: ValueFlow, facts: dict[str, list[tuple]]) -> None:
        self.flow = flow
        self._facts = facts  # path -> the file's facts (its summary's `flow`)
        self._calls: dict[CallKey, tuple] = {}
        self._assigned: dict[str, list[tuple]] = {}
        self._escaping: dict[str, set[str]] = {}  # path -> nested functions whose value escapes
        self._used: dict[str, set[str]] = {}  # path -> locations called (or an attribute called) or passed on

    def call(self, key: CallKey, path: str) -> tuple | None:
        self._read(path)
        return self._calls.get(key)

    def assignments(self, location: str, path: str | None) -> list[tuple]:
        if path is not None:
            self._read(path)
        return self._assigned.get(location, [])

    def used(self, path: str | None) -> set[str]:
        if path is None:
            return set()
        self._read(path)
        return self._used[path]

    def escaping_in(self, path: str | None) -> set[str]:
        if path is None:
            return set()
        self._read(path)
        return self._escaping[path]

    def _read(self, path: str) -> None:
        if path in self._escaping:
            return
        self._escaping[path] = set()
        self._used[path] = set()
        for fact in self._facts.get(path, ()):
            if fact[0] == "=":
                target, value = fact[1], fact[2]
                if target[0] == "v":
                    self._assigned.setdefault(target[1], []).append(value)
                    if value[0] == "d" and value[1] == target[1]:
                        continue  # a nested function's definition: its own location holds it
                self._walk(target, path, _READ)
                self._walk(value, path, _ELSEWHERE)
            elif fact[0] == "x":
                self._walk(fact[1], path, _ELSEWHERE)

    def _walk(self, expr: tuple | None, path: str, mode: int) -> None:
        """Index the calls in ``expr``. ``mode`` says where a name read sits: _PASSED (a call's
        callee or argument, or through a union of those: the location is *used*, a nested
        function stays put), _READ (an attribute's base, a store target: neither) or
        _ELSEWHERE (a nested function read there escapes)."""
        defs = self.flow.defs
        escaping, used = self._escaping[path], self._used[path]
        stack = [(expr, mode)]
        while stack:
            current, where = stack.pop()
            if current is None:
                continue
            tag = current[0]
            if tag == "v" or tag == "d":
                name = current[1].partition("#")[0]
                if where == _PASSED and tag == "v":
                    used.add(name)
                elif where == _ELSEWHERE and _NESTED in name and name in defs:
                    escaping.add(name)
            elif tag == "c":
                self._calls.setdefault(current[4], current)
                stack.append((current[1], _PASSED))
                stack.extend((arg, _PASSED) for arg in current[2])
                stack.extend((value, _PASSED) for _, value in current[3])
            elif tag == "u":
                stack.extend((part, where) for part in current[1:])
            elif tag == "a":  # `f.attr` reads the function, it does not pass it; `p.run()` uses `p`
                base = current[1]
                stack.append((base, _PASSED if where == _PASSED and base[0] == "v" else _READ))
            else:
                stack.extend((part, _ELSEWHERE) for part in _children(current))


def _children(expr: tuple) -> tuple:
    """The expressions inside ``expr`` (`value_facts` lists each form)."""
    tag = expr[0]
    if tag in ("n", "m", "r", "t", "*", ":", "z", "{", "["):
        return (expr[1],)
    if tag in ("e", "V", "y"):
        return expr[1:]
    if tag == "k":
        return (expr[1], expr[2])
    if tag == "p":
        return (expr[1], *expr[2], *(value for _, value in expr[3]))
    if tag == "l":
        return tuple(entry[1] for entry in expr[2])
    return ()
