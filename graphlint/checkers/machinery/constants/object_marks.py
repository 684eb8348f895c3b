"""Fields a caller sets on an object before a capture, and the branches they decide there.

SGLang's frozen-KV draft runner plans a batch's attention metadata before it captures, and
says so on the batch: `forward_batch.mark_forward_metadata_ready()` sets
`forward_metadata_ready = True`. The captured `draft_forward` then asks
`if forward_batch.needs_forward_metadata_init():` and, on a marked batch, skips the eager plan
and its host syncs. Constants passed as arguments (`call_constants`) cannot say this: the batch
is an object, and what decides the branch is a field its caller set two calls earlier.

So each function keeps, in its summary, what it does to the fields of the names it holds
(`FieldEffects`, as the binder walks it): `name.field = value`, objects built with keywords,
its statements' own calls on `name` or passing it, in order, each known to run whenever the
function gets that far or only maybe; and a method whose body is a chain of
`if <test of self's fields>: return <constant>` keeps that chain as a predicate. The project
phase (`ObjectMarks`) works out what a call does to the fields of the objects it is handed
(whatever the call graph says it may run; a method on a parameter, any of the project's
methods of that name), what each name's fields hold at a call, and hands them to the callee's
parameter as constants named `param.field`. `param_tests` reads `p.field` and `p.method()` in
tests, and a predicate's value comes from the fields. A field any code between may change is
unknown; a field set again later in a loop around the test is kept only if it is set to the
same value.

A closure captured later (`run_once`) sees the fields its enclosing function set before the
closure is first handed anywhere: what the capture then runs.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import cast

from graphlint.checkers.machinery.constants import param_tests
from graphlint.checkers.machinery.core.model import CallRef, FunctionSummary
from graphlint.checkers.machinery.core.syntax import FUNCTION_NODES, bound_names, statements

# ("set", line, name, field, value, always): `name.field = value`; value a repr, `@param` or "?"
# ("call", line, column, receiver, callee, args, always): a call on `receiver` (a name, "." for
#   another expression's attribute, "" for a plain call), `callee` its last name, args the names
#   it passes ((position or keyword, name), ...), always None for an assignment's or a return's
#   value (its changes count only as maybe); its constants are its `CallRef`'s, at (line, column)
# ("bind", line, name): `name` rebound; ("free", 0, name): a closure reads `name` from its definer
# ("loop", line, "", end line): a loop, whose later effects an earlier line may see again
# ("new", line, name, column, always): `name = Cls(...)`, whose fields the call at (line, column) sets
Effect = tuple
UNKNOWN = "?"
_MAX_DEPTH = 6  # calls followed for what a call does to its arguments' fields


# -- the file phase ------------------------------------------------------------------------------
class FieldEffects:
    """One function's effects, gathered as the binder walks it (no walk of its own: this runs on
    every function of a project): each simple statement and `with` in order, with whether it
    runs whenever the function gets that far (the binder's frames say), then `finish`."""

    def __init__(self, fixed: frozenset[str], column: Callable[[int, int], int]) -> None:
        self.fixed = fixed
        self.column = column
        self.found: list[Effect] = []

    def simple(self, stmt: ast.stmt, always: bool) -> None:
        """A simple statement: its own call, the fields it stores, the names it binds."""
        value = getattr(stmt, "value", None)
        if isinstance(value, ast.Call):
            self.call(value, always if isinstance(stmt, ast.Expr) else None)
        targets: list[ast.expr] = []
        if isinstance(stmt, ast.Assign):
            targets = stmt.targets
        elif isinstance(stmt, (ast.AnnAssign, ast.AugAssign)) and stmt.value is not None:
            targets = [stmt.target]
        for target in targets:
            if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
                held = self.stored(value) if not isinstance(stmt, ast.AugAssign) else UNKNOWN
                self.found.append(("set", stmt.lineno, target.value.id, target.attr, held, always))
            else:
                self.binds(target)
        if len(targets) == 1 and isinstance(targets[0], ast.Name) and _constructs(value):
            call = cast(ast.Call, value)
            at = self.column(call.lineno, call.col_offset)
            self.found.append(("new", stmt.lineno, targets[0].id, at, always))

    def with_items(self, stmt: ast.With | ast.AsyncWith, always: bool) -> None:
        for item in stmt.items:
            if isinstance(item.context_expr, ast.Call):
                self.call(item.context_expr, always)
            if item.optional_vars is not None:
                self.binds(item.optional_vars)

    def loop(self, stmt: ast.For | ast.AsyncFor | ast.While) -> None:
        self.found.append(("loop", stmt.lineno, "", stmt.end_lineno or stmt.lineno))
        if not isinstance(stmt, ast.While):
            self.binds(stmt.target)

    def stored(self, value: ast.expr | None) -> str:
        if isinstance(value, ast.Name) and value.id in self.fixed:
            return f"@{value.id}"
        held = param_tests.literal(value) if value is not None else None
        return held if held is not None else UNKNOWN

    def binds(self, target: ast.expr) -> None:
        for name in bound_names(target):
            self.found.append(("bind", target.lineno, name))

    def call(self, node: ast.Call, runs: bool | None) -> None:
        """A statement's own call; ``runs``: whether it always runs (None: an assignment's or a
        `return`'s value, whose changes count only as maybe)."""
        func = node.func
        if isinstance(func, ast.Attribute):
            callee = func.attr
            receiver = func.value.id if isinstance(func.value, ast.Name) else "."  # `.`: an expression's
        elif isinstance(func, ast.Name):
            callee, receiver = func.id, ""
        else:
            return
        args: tuple = ()
        if node.args or node.keywords:
            args = tuple((str(i), a.id) for i, a in enumerate(node.args) if isinstance(a, ast.Name)) + tuple(
                (kw.arg, kw.value.id) for kw in node.keywords if kw.arg and isinstance(kw.value, ast.Name)
            )
        elif receiver == ".":
            return  # `self.cache.clear()`: no name it could change or hand on
        at = self.column(node.lineno, node.col_offset)
        self.found.append(("call", node.lineno, at, receiver, callee, args, runs))

    def finish(
        self, node: ast.FunctionDef | ast.AsyncFunctionDef, own: set[str], enclosing: set[str] | None
    ) -> list[Effect]:
        """The effects worth keeping, in order. A name counts when the function stores a field
        of it, builds it, calls a method on it or passes it in a statement of its own, or, in a
        closure, reads it from the enclosing function (``enclosing``, that function's locals;
        ``own``, the closure's): ("free", 0, name). Calls nested in expressions are not kept
        (they may not run, and a statement's own calls are where objects are prepared); what
        they pass gets no fields, and what they might change is not seen."""
        found = self.found
        tracked = _tracked(found)
        free: set[str] = set()
        if enclosing:
            named = {name for e in found if e[0] == "call" for _, name in e[5]}
            free = (named & enclosing) - own - {"self", "cls"}
            tracked |= free
        defined: set[str] = set()
        if any(e[0] == "call" and not e[3] and not e[5] for e in found):  # `run_once()`: a local def?
            defined = {stmt.name for stmt in statements(node.body) if isinstance(stmt, FUNCTION_NODES)}
        kept = [e for e in found if _kept(e, tracked, defined)]
        lines = [e[1] for e in kept]
        kept += [e for e in found if e[0] == "loop" and any(e[1] < line <= e[3] for line in lines)]
        return kept + [("free", 0, name) for name in sorted(free)]


def _kept(effect: Effect, tracked: set[str], defined: set[str]) -> bool:
    if effect[0] == "call":
        receiver, callee, args = effect[3], effect[4], effect[5]
        return receiver in tracked or (not receiver and callee in defined) or any(n in tracked for _, n in args)
    return effect[0] in ("set", "bind", "new") and effect[2] in tracked


def _tracked(found: list[Effect]) -> set[str]:
    names = {e[2] for e in found if e[0] in ("set", "new")}
    for effect in found:
        if effect[0] == "call" and effect[6] is not None:  # always or maybe: a statement's own call
            names.add(effect[3])
            names.update(name for _, name in effect[5])
    names.discard("")
    names.discard(".")
    return names


def _constructs(value: ast.expr | None) -> bool:
    """`Batch(mode=Mode.DECODE)`: a call of a capitalised name, which builds an object."""
    if not isinstance(value, ast.Call):
        return False
    func = value.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    return name[:1].isupper()


def predicate(node: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple | None:
    """A method's chain of `if <test of self's fields>: return <constant>` ending in a return:
    ((test, repr), ..., (None, repr or "?")); None for any other body."""
    args = node.args
    if len(args.args) != 1 or args.vararg or args.kwarg or args.kwonlyargs or args.posonlyargs:
        return None
    body = node.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # the docstring
    self_name = frozenset((args.args[0].arg,))
    clauses: list[tuple] = []
    for stmt in body:
        if isinstance(stmt, ast.If) and not stmt.orelse and len(stmt.body) == 1:
            value = _returned(stmt.body[0])
            test = param_tests.read_test(stmt.test, self_name)
            if value is None or test is None:
                break
            clauses.append((test, value))
            continue
        if isinstance(stmt, ast.Return):
            clauses += _last(stmt, self_name)
            return tuple(clauses) if any(test is not None for test, _ in clauses) else None
        break
    return (*clauses, (None, UNKNOWN)) if clauses else None


def _returned(stmt: ast.stmt) -> str | None:
    """The constant a `return` gives (None: not a return of a constant)."""
    if not isinstance(stmt, ast.Return):
        return None
    return param_tests.literal(stmt.value) if stmt.value is not None else "None"


def _boolean(node: ast.expr) -> bool:
    """Whether ``node`` always gives a bool: a comparison, a `not`, an `and`/`or` of those."""
    if isinstance(node, ast.BoolOp):
        return all(_boolean(value) for value in node.values)
    return isinstance(node, ast.Compare) or (isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not))


def _last(stmt: ast.Return, self_name: frozenset[str]) -> list[tuple]:
    """The chain's end: a constant, or a comparison of self's fields (`return self == Mode.X`),
    which gives True where it holds and False elsewhere."""
    if stmt.value is not None and _boolean(stmt.value):
        test = param_tests.read_test(stmt.value, self_name)
        if test is not None:
            return [(test, "True"), (None, "False")]
    return [(None, _returned(stmt) or UNKNOWN)]


# -- the project phase ---------------------------------------------------------------------------
Change = dict[str, str]  # field -> the repr it holds after the call, `@param` of the callee, or "?"


CallAt = Callable[[FunctionSummary, int, int], "CallRef | None"]
Callees = Callable[[FunctionSummary, CallRef], "list[str]"]


class ObjectMarks:
    """What calls do to the fields of the objects they are handed, across the project.

    ``call_at`` finds a function's call at (line, column) (None: the binder recorded none
    there, a call it cannot name) and ``callees`` says what it runs, as the call graph
    resolves it; a method call it cannot resolve unbound (on a
    parameter, whose class its callers choose) runs the project's methods of that name. A call
    that may run several functions changes what any of them changes (`_agreed`)."""

    def __init__(
        self,
        functions: Mapping[str, tuple[str, FunctionSummary]],
        classes: Iterable[str],
        call_at: CallAt,
        callees: Callees,
    ) -> None:
        self.functions = functions
        self.call_at = call_at
        self.callees = callees
        classes = frozenset(classes)
        self._owners = classes
        self._methods: dict[str, list[str]] = {}  # name -> the project's methods of that name
        for qualname in functions:
            owner, _, name = qualname.rpartition(".")
            if owner in classes:
                self._methods.setdefault(name, []).append(qualname)
        self._changes: dict[str, dict[str, Change]] = {}
        self._closures: dict[str, dict[str, frozenset[str]]] = {}
        self._handed: dict[str, dict[tuple[int, int], tuple[str, tuple]]] = {}  # `handed`'s index

    # -- what a function does to the objects it is handed
    def changes(self, qualname: str, depth: int = 0) -> dict[str, Change]:
        """Per parameter (and `self`): the fields a call of ``qualname`` leaves set."""
        known = self._changes.get(qualname)
        if known is not None:
            return known
        entry = self.functions.get(qualname)
        if entry is None or depth > _MAX_DEPTH:
            return {}
        self._changes[qualname] = {}  # a recursive call changes nothing it does not say
        function = entry[1]
        held: dict[str, Change] = {}
        subjects = {"self", *function.params}
        for effect in function.effects:
            if effect[0] == "bind":
                subjects.discard(effect[2])
            elif effect[0] == "set" and effect[2] in subjects:
                value = effect[4] if effect[5] else UNKNOWN
                held.setdefault(effect[2], {})[effect[3]] = value
            elif effect[0] == "call":
                for name, change in self._call_change(function, effect, depth).items():
                    if name in subjects:
                        _apply(held.setdefault(name, {}), change, effect[6] is True)
        self._changes[qualname] = held
        return held

    def _call_change(self, function: FunctionSummary, effect: Effect, depth: int) -> dict[str, Change]:
        """What one call of ``function`` does to the fields of the names it passes, by the
        caller's names; the `@param` values the callee stores read
        what the call passes."""
        _, line, column, receiver, method, args, _ = effect
        call = self.call_at(function, line, column)
        passed = call.passed if call is not None else None
        candidates = self.callees(function, call) if call is not None else None
        if not candidates and receiver:
            candidates = self._methods.get(method)  # `param.m()`: whatever class a caller passes
        if not candidates:
            return {}
        names = ([("self", receiver)] if receiver and receiver != "." else []) + list(args)
        found: dict[str, Change] = {}
        for key, name in names:
            per = [self._param_change(candidate, key, passed, depth) for candidate in candidates]
            change = _agreed(per)
            if change:
                found[name] = change
        return found

    def _param_change(self, qualname: str, key: str, passed: tuple | None, depth: int) -> Change:
        function = self.functions[qualname][1]
        if key == "self":
            param = "self" if self.is_method(function.qualname) else ""
        elif key.isdigit():
            index = int(key)
            param = function.params[index] if index < len(function.params) else ""
        else:
            param = key if key in function.params else ""
        change = self.changes(qualname, depth + 1).get(param, {})
        given = dict(passed) if passed is not None else None
        resolved: Change = {}
        for field, value in change.items():
            if value[:1] == "@":
                value = self._argument(function, value[1:], given) if given is not None else UNKNOWN
            resolved[field] = value
        return resolved

    @staticmethod
    def _argument(function: FunctionSummary, param: str, given: dict[str, str]) -> str:
        """The constant a call passes for ``param`` (or its default), else unknown."""
        value = given.get(param)
        if value is None and param in function.params:
            value = given.get(str(function.params.index(param)))
        if value is None and "*" not in given:
            value = function.param_defaults.get(param)
        return value if value and value[0] not in "@%" else UNKNOWN

    # -- what the names hold at a call
    def state(
        self, function: FunctionSummary, held: Mapping[str, frozenset[str]], line: int
    ) -> dict[str, frozenset[str]]:
        """The fields each name of ``function`` holds at ``line`` (`name.field` -> reprs): what it
        entered with (``held``), changed by the effects above the line; an effect below it in a
        loop around both (the loop comes back) keeps a field only if it sets the same value."""
        state = {key: values for key, values in held.items() if "." in key}
        loops = [(e[1], e[3]) for e in function.effects if e[0] == "loop" and e[1] <= line <= e[3]]
        later: list[tuple[str, str]] = []
        for effect in function.effects:
            if effect[1] >= line and not any(start <= effect[1] <= end for start, end in loops):
                continue
            for key, value, always in self._effect_keys(function, effect):
                if effect[1] >= line:
                    later.append((key, value))
                elif key.endswith(".*"):
                    _forget(state, key[:-1])
                elif always and value != UNKNOWN:
                    state[key] = frozenset((value,))
                elif value == UNKNOWN or key not in state:
                    state.pop(key, None)
                else:
                    state[key] = state[key] | {value}
        for key, value in later:
            if key.endswith(".*"):
                _forget(state, key[:-1])
            elif state.get(key) != frozenset((value,)):
                state.pop(key, None)
        return state

    def _effect_keys(self, function: FunctionSummary, effect: Effect) -> Iterator[tuple[str, str, bool]]:
        if effect[0] in ("free", "loop"):
            return
        if effect[0] == "bind":
            yield f"{effect[2]}.*", UNKNOWN, True
        elif effect[0] == "new":
            for field, value in self._built(function, effect).items():
                yield f"{effect[2]}.{field}", value, effect[4]
        elif effect[0] == "set":
            value = effect[4] if effect[4][:1] != "@" else UNKNOWN
            yield f"{effect[2]}.{effect[3]}", value, effect[5]
        else:
            for name, change in self._call_change(function, effect, 0).items():
                for field, value in change.items():
                    yield f"{name}.{field}", value, effect[6] is True

    def _built(self, function: FunctionSummary, effect: Effect) -> Change:
        """The fields ``name = Cls(...)`` gives: what `Cls.__init__` sets from what the call
        passes, or, for a class without one the project defines (a dataclass, a namespace), the
        keywords it passes."""
        _, line, _, column, _ = effect
        call = self.call_at(function, line, column)
        if call is None:
            return {}
        passed = call.passed
        inits = [q for q in self.callees(function, call) if q.endswith(".__init__")]
        if inits:
            return _agreed([self._param_change(init, "self", passed, 0) for init in inits])
        return {key: value for key, value in passed if not key.isdigit() and key not in "#*" and value[:1] not in "@%"}

    def handed(self, function: FunctionSummary, line: int, column: int) -> tuple[dict[str, str], bool]:
        """The names the call at (line, column) passes, by position or keyword, and whether it
        calls a method of an object (`obj.m(x)`, `self.a.m(x)`: `x` is the first parameter
        after `self`) rather than a plain name. Asked for every call the capture reach
        follows, so each function's calls are indexed once."""
        calls = self._handed.get(function.qualname)
        if calls is None:
            calls = self._handed[function.qualname] = {
                (e[1], e[2]): (e[3], e[5]) for e in function.effects if e[0] == "call"
            }
        found = calls.get((line, column))
        if found is None:
            return {}, False
        receiver, args = found
        return dict(args), receiver == "." or receiver[:1].islower() or receiver[:1] == "_"

    def is_method(self, qualname: str) -> bool:
        """Whether ``qualname`` is a method of a project class (it takes `self` first)."""
        return qualname.rpartition(".")[0] in self._owners

    def closure_fields(self, closure: str) -> dict[str, frozenset[str]]:
        """The fields a closure's free names hold when its definer first hands it to a call:
        what a capture that later runs it sees, unless the definer changes them after (then
        unknown, as `state` keeps them)."""
        known = self._closures.get(closure)
        if known is None:
            known = self._closures[closure] = self._closure_fields(closure)
        return known

    def _closure_fields(self, closure: str) -> dict[str, frozenset[str]]:
        definer_name, _, name = closure.rpartition(".<locals>.")
        entry, definer = self.functions.get(closure), self.functions.get(definer_name)
        if entry is None or definer is None:
            return {}
        free = {effect[2] for effect in entry[1].effects if effect[0] == "free"}
        first = next(
            (
                e[1]
                for e in definer[1].effects
                if e[0] == "call" and ((not e[3] and e[4] == name) or any(n == name for _, n in e[5]))
            ),
            None,
        )
        if not free or first is None:
            return {}
        return {
            key: values for key, values in self.state(definer[1], {}, first).items() if key.partition(".")[0] in free
        }

    # -- what a method without arguments returns
    def derived(self, name: str, constants: Mapping[str, frozenset[str]]) -> frozenset[str] | None:
        """`p.method()`'s value from `p`'s fields, when every method of that name is a
        predicate (`predicate`) that gives the same answer."""
        owner, _, call = name.rpartition(".")
        candidates = self._methods.get(call[:-2], [])
        if not candidates:
            return None
        mapped = {"self" + key[len(owner) :]: values for key, values in constants.items() if _within(key, owner)}
        answers = set()
        for qualname in candidates:
            chain = self.functions[qualname][1].predicate
            answer = _run(chain, mapped) if chain else None
            if answer is None:
                return None
            answers.add(answer)
        return frozenset(answers) if len(answers) == 1 else None


def _within(key: str, owner: str) -> bool:
    """Whether ``key`` is the object ``owner`` (`p.mode`) or one of its fields (`p.mode.x`)."""
    return key == owner or (key.startswith(owner) and key[len(owner)] == ".")


def _run(chain: tuple, fields: Mapping[str, frozenset[str]]) -> str | None:
    for test, value in chain:
        if test is None:
            return None if value == UNKNOWN else value
        answer = param_tests.evaluate(test, fields)
        if answer is None:
            return None
        if answer:
            return None if value == UNKNOWN else value
    return None


def _apply(into: Change, change: Change, always: bool) -> None:
    for field, value in change.items():
        into[field] = value if always else UNKNOWN


def _agreed(changes: list[Change]) -> Change:
    """What every candidate callee does: a field one sets differently, or only some set, is unknown."""
    fields = set().union(*changes)
    return {
        f: (changes[0].get(f, UNKNOWN) if all(c.get(f) == changes[0].get(f) for c in changes) else UNKNOWN)
        for f in fields
    }


def _forget(state: dict[str, frozenset[str]], prefix: str) -> None:
    for key in [key for key in state if key.startswith(prefix)]:
        del state[key]
