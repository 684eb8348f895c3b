"""The constants a capture passes down its calls, and the code they rule out.

`forward(x, in_capture=True)` under a capture runs `forward`'s `if in_capture:` branch and
not its `else`; what only the `else` calls is not in the graph. The capture reach
(`call_graph`) walks from the captures call site by call site. Along it, each reached
function gets the constants its entering sites pass (a literal, a default the site leaves
alone, or the caller's own parameter whose constants the caller got), joined over the sites
like the walk's other facts (`call_contexts.join`): a parameter unknown at any entering site
is unknown, and the constants of several sites are a union (past 16, unknown). The file phase kept each branch on a parameter
(`param_tests`, `FunctionSummary.decided_spans`); a call or a hazard in a branch those
constants decide against is not in any capture.

Parameter positions are only read where the call's binding of `self` is certain: a function,
a bound method (`obj.m(...)`, `super().m(...)`) or an instance called (`model(x)`). A call
through a value or a parameter (`fn(x)`) could be an unbound method taking `self` first, so its
positions are not matched; but its keywords are, and so is the default of every parameter past
the positions its arguments could fill (`params` leaves `self` out: past the arguments' count),
bound or not. SGLang's metadata glue graph captures
`attn_backend.init_forward_metadata_out_graph(fb_view)`, whose `in_capture=False` one argument
cannot reach. Not for a function that a `functools.partial` wraps anywhere in the project: the
partial's own arguments come first. A call that spreads `*args` or `**kwargs` leaves every
parameter it does not name unknown. The constants of a function captured whole
(`make_graphed_callables`, `torch.compile`) are unknown: its caller is the user's.
"""

from __future__ import annotations

import bisect
from collections.abc import Collection, Iterator
from dataclasses import asdict, dataclass

from graphlint.checkers.machinery.constants import param_tests
from graphlint.checkers.machinery.constants.object_marks import CallAt, Callees, ObjectMarks
from graphlint.checkers.machinery.constants.present_names import NOT_NONE
from graphlint.checkers.machinery.core.call_targets import FunctionTarget, InstanceCall, MethodTarget, SuperCall
from graphlint.checkers.machinery.core.model import CallRef, FunctionSummary

Constants = dict[str, frozenset[str]]  # parameter -> the reprs of the constants it may hold
_BOUND = (MethodTarget, SuperCall, InstanceCall)


@dataclass(frozen=True, order=True)
class Pruned:
    """A call a capture never makes: the branch it is in, and the constants that decided it."""

    path: str
    function: str  # display name of the function holding the call
    line: int
    test: str  # the branch's test, as written (`param_tests.describe`)
    value: bool  # what the test gives under the capture
    constants: str  # what decided it: `in_capture=True`

    def to_dict(self) -> dict:
        return asdict(self)

    def text(self) -> str:
        return f"{self.path}:{self.line} in {self.function}: `{self.test}` is {self.value} with {self.constants}"


class CallConstants:
    """Constants along the capture reach, read from the call sites that enter each function."""

    def __init__(
        self,
        functions: dict[str, tuple[str, FunctionSummary]],
        classes: Collection[str],
        partialled: Collection[str] = frozenset(),
        call_at: CallAt = lambda function, line, column: None,
        callees: Callees = lambda function, call: [],
    ) -> None:
        self.functions = functions
        self.classes = classes  # class qualnames: a function inside one is a method
        self.partialled = partialled  # functions a `functools.partial` wraps (`ValueFlow.partialled`)
        self.marks = ObjectMarks(functions, classes, call_at, callees)  # fields of the objects calls hand on
        self._spans: dict[int, _Spans] = {}  # id of a function summary -> its decided spans, indexed

    def entered(
        self, call: CallRef | None, callee: str, caller: Constants, function: FunctionSummary | None = None
    ) -> Constants:
        """The constants ``callee`` gets from ``call`` (None: a capture runs it whole), made in
        ``function`` (the caller): its parameters' constants, and the fields of the objects it
        is handed (`object_marks`), named `param.field`."""
        entry = self.functions.get(callee)
        if call is None or entry is None:
            return {}
        by_position = self._by_position(call, callee)
        found = self._arguments(call, callee, entry[1], caller, by_position)
        if function is not None and (function.effects or _has_fields(caller)):
            self._hand_fields(call, entry[1], caller, function, by_position, found)
        if ".<locals>." in callee:
            found.update(self.marks.closure_fields(callee))
        return found

    def _by_position(self, call: CallRef, callee: str) -> bool:
        """Whether the call's positions are the callee's parameters (`self` bound or absent)."""
        return isinstance(call.target, _BOUND) or (
            isinstance(call.target, FunctionTarget) and not self._unbound_method(call.target, callee)
        )

    def _hand_fields(
        self,
        call: CallRef,
        callee: FunctionSummary,
        caller: Constants,
        function: FunctionSummary,
        by_position: bool,
        found: dict,
    ) -> None:
        """`param.field` for each object the call passes whose fields the caller knows there."""
        names, on_object = self.marks.handed(function, call.line, call.column)
        by_position = by_position or (on_object and self.marks.is_method(callee.qualname))
        names.update((key, value[1:].rstrip("!")) for key, value in call.passed if value[:1] == "@")
        if not names:
            return
        state = self.marks.state(function, caller, call.line)
        if not state:
            return
        for index, param in enumerate(callee.params):
            name = names.get(param) or (names.get(str(index)) if by_position else None)
            if name is None:
                continue
            prefix = name + "."
            for key, values in state.items():
                if key.startswith(prefix):
                    found[f"{param}.{key[len(prefix) :]}"] = values

    def _arguments(
        self, call: CallRef, callee: str, function: FunctionSummary, caller: Constants, by_position: bool
    ) -> Constants:
        """What the call passes each of the callee's parameters, as constants."""
        params = function.params
        given = dict(call.passed)
        spread = "*" in given
        positional = int(given.get("#", "0"))
        found: Constants = {}
        for index, param in enumerate(params):
            if param in given:
                value = given[param]
            elif index < positional:
                value = given.get(str(index), "") if by_position else ""
            elif not spread and (by_position or callee not in self.partialled):
                # not passed: its default. `params` leaves `self` out, so the arguments fill at
                # most its first `positional`, whether `self` is bound or passed among them; a
                # partial of the callee may have passed more than the site shows.
                value = function.param_defaults.get(param, "")
            else:
                value = ""  # unknown: spread, or positions not certain
            if value[:1] == "@":
                held = _handed_on(value, caller)
                if held is not None:
                    found[param] = held
            elif value:
                found[param] = frozenset((value,))
        return found

    def _unbound_method(self, target: FunctionTarget, callee: str) -> bool:
        """`Base.method(self, x)` passes `self` first; `Model(x)` (its `__init__`) does not."""
        owner, _, method = callee.rpartition(".")
        return owner in self.classes and target.name.rpartition(".")[2] == method

    def dead(self, function: FunctionSummary, line: int, column: int, constants: Constants) -> tuple | None:
        """The decided span (test, needs, span) that rules out the code at (line, column), if any."""
        if not constants or not function.decided_spans:
            return None
        spans = self._spans.get(id(function))
        if spans is None:
            spans = self._spans[id(function)] = _Spans(function.decided_spans)
        for entry in spans.around(line, column):
            answer = param_tests.evaluate(entry[0], self.reading(function, entry, constants))
            if answer is not None and answer is not entry[1]:
                return entry
        return None

    def reading(self, function: FunctionSummary, entry: tuple, constants: Constants) -> Constants:
        """The constants a decided span's test reads: with fields (the function entered with
        some), as the function left them where the span begins (`object_marks.state`), and
        what the test's `p.method()` calls return from them."""
        if not _has_fields(constants):
            return constants
        if function.effects:
            fields = self.marks.state(function, constants, entry[2][0])
            constants = {**{k: v for k, v in constants.items() if "." not in k}, **fields}
        calls = [name for name in param_tests.parameters_of(entry[0]) if name.endswith("()")]
        if calls:
            constants = dict(constants)
            for name in calls:
                value = self.marks.derived(name, constants)
                if value is not None:
                    constants[name] = value
        return constants

    def pruned(self, path: str, function: FunctionSummary, call: CallRef, constants: Constants) -> Pruned | None:
        """Why ``call`` never runs in a capture, or None when it may."""
        if call.regions:
            return None  # inside the function's own capture: that capture's callers are not these
        entry = self.dead(function, call.line, call.column, constants)
        if entry is None:
            return None
        test, needs, _ = entry
        read = self.reading(function, entry, constants)
        names = set(param_tests.parameters_of(test))
        owners = {name.rpartition(".")[0] for name in names if name.endswith("()")}
        names.update(key for key in read if any(key == o or key.startswith(o + ".") for o in owners))
        held = ", ".join(
            f"{name}={'|'.join(sorted(map(param_tests.shown, read[name])))}"
            for name in sorted(names)
            if name in read and name[-2:] != "()"
        )
        return Pruned(path, function.display, call.line, param_tests.describe(test), not needs, held)


class _Spans:
    """A function's decided spans indexed by position. They nest (each is an `if` arm or the rest
    of a block), so sorted by start, outer first, each has an innermost enclosing span; the
    spans around a position are the last one starting at or before it and its enclosing ones
    that reach it. A function with thousands of branches is not scanned whole per call."""

    def __init__(self, spans: list[tuple[tuple, bool, tuple[int, int, int, int]]]) -> None:
        self.entries = sorted(spans, key=lambda e: (e[2][0], e[2][1], -e[2][2], -e[2][3]))
        self.starts = [(e[2][0], e[2][1]) for e in self.entries]
        self.parent: list[int] = []
        open_spans: list[int] = []
        for index, start in enumerate(self.starts):
            while open_spans and self._end(open_spans[-1]) < start:
                open_spans.pop()
            self.parent.append(open_spans[-1] if open_spans else -1)
            open_spans.append(index)

    def around(self, line: int, column: int) -> Iterator[tuple[tuple, bool, tuple[int, int, int, int]]]:
        index = bisect.bisect_right(self.starts, (line, column)) - 1
        while index >= 0:
            if self._end(index) >= (line, column):
                yield self.entries[index]
            index = self.parent[index]

    def _end(self, index: int) -> tuple[int, int]:
        span = self.entries[index][2]
        return (span[2], span[3])


def _has_fields(constants: Constants) -> bool:
    """Whether any constant is an object's field (`param.field`, `object_marks`)."""
    return any("." in key for key in constants)


def _handed_on(value: str, caller: Constants) -> frozenset[str] | None:
    """What a caller's own parameter passed on (`@p`) holds: the caller's constants for it, less
    None where the caller has shown it is not None (`@p!`), then at least `NOT_NONE`."""
    if not value.endswith("!"):
        return caller.get(value[1:])
    held = caller.get(value[1:-1], frozenset()).difference(("None",))
    return held or frozenset((NOT_NONE,))
