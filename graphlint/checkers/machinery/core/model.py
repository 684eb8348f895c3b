"""Per-file summaries: everything the cross-file analysis needs, without the syntax tree.

A file is parsed once into a `ModuleSummary`; the project-wide phase (call graph, capture
reachability, findings) works on summaries alone. That is what makes the cache correct
for interprocedural rules: a summary depends only on the file's bytes and module name, so
it can be reused whenever those are unchanged, and the cheap global phase is always redone.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from graphlint.checkers.machinery.core.call_targets import ArgValue, CallTarget
from graphlint.findings import Fix
from graphlint.suppressions import SuppressedBlock, Suppression


class Compact:
    """Pickle as (class, field values): the cache holds hundreds of thousands of these, and
    the default per-object attribute dicts make it several times larger and slower to load."""

    def __reduce__(self):
        names = type(self).__dict__.get("_compact_names")
        if names is None:
            names = tuple(f.name for f in fields(self))
            type(self)._compact_names = names
        return (type(self), tuple(getattr(self, name) for name in names))


# Kinds of capture region. "graph" covers torch.cuda.graph, capture_begin/end and wrapper
# APIs (the CUDA stream is captured); "compile" covers torch.compile's cudagraph modes,
# where a host sync splits the graph instead of failing the capture.
GRAPH = "graph"
COMPILE = "compile"


@dataclass
class Region(Compact):
    """A place that may be a capture region; whether it is one is decided project-wide.

    ``target`` is what the context manager called in a ``with`` runs (whether it is a
    capture is decided by the project phase: a wrapper function, a configured entry point)
    or ``None`` when the file phase already knows it is a capture (torch.cuda.graph).
    """

    line: int
    label: str
    target: CallTarget | None
    kind: str = GRAPH


@dataclass
class Hazard(Compact):
    """A candidate finding, reported when the code it is in runs in a capture.

    ``regions`` are the enclosing region ids (innermost last). ``always`` hazards are
    findings whatever the reachability (the file phase decided them). ``condition`` is what
    the file phase could not decide alone, as plain data for the rule's own detector to
    confirm in the project phase (`Detector.holds`): a region that must turn out to be a
    capture, a class attribute that must not hold host data... The machinery passes it on
    without reading it, so a rule's special case lives in the rule.
    ``preview``: a preview behaviour of its rule, reported only in preview mode.
    """

    code: str
    message: str
    line: int
    column: int
    end_line: int
    end_column: int
    regions: tuple[int, ...] = ()
    fix: Fix | None = None
    always: bool = False
    condition: tuple[str | int, ...] = ()
    preview: bool = False


@dataclass
class CallRef(Compact):
    """A call whose target (see `call_targets`) is resolved project-wide."""

    target: CallTarget
    line: int
    column: int
    regions: tuple[int, ...] = ()
    # Arguments whose class is known, or that pass on a parameter: (position or keyword, value).
    args: tuple[tuple[str, ArgValue], ...] = ()
    # Where the call ends: with the start, the value flow's key for it (`value_facts`). The
    # start alone is shared by chained calls: `get().run()` starts where `get()` does.
    end_line: int = 0
    end_column: int = 0
    # Constants the call passes (`param_tests`): (position or keyword, repr), `@name` for the
    # caller's own parameter passed on, and ("*", "") when it spreads `*args`/`**kwargs`.
    passed: tuple[tuple[str, str], ...] = ()

    def flow_key(self, scope: str) -> tuple[str, int, int, int, int]:
        """The value flow's key for this call in the function ``scope`` (`value_flow.CallKey`)."""
        return (scope, self.line, self.column, self.end_line, self.end_column)


@dataclass
class EntryRef(Compact):
    """A callable captured as a whole: passed to make_graphed_callables or torch.compile."""

    target: CallTarget
    line: int
    kind: str
    function: str  # display name of the scope that named it
    via_call: bool  # False for a decorator: the function itself is the region


@dataclass
class OpaqueCall(Compact):
    """A call in a capture region, or a captured callable, that the file phase cannot name.

    Kept only so `graphlint captures` can say what graphlint does not see into: the
    expression as written, and, for a parameter of the enclosing function, that the
    callable is passed in from outside.
    """

    text: str
    line: int
    regions: tuple[int, ...]
    kind: str  # "call" inside a region, or the entry kind ("graph"/"compile") of a captured callable
    function: str  # display name of the enclosing function
    parameter: bool = False  # the callee is a parameter of that function


@dataclass
class FunctionSummary(Compact):
    qualname: str
    display: str
    line: int
    params: list[str] = field(default_factory=list)  # without self/cls
    hazards: list[Hazard] = field(default_factory=list)
    calls: list[CallRef] = field(default_factory=list)
    returns_capture: bool = False  # a wrapper API: calling it gives a capture context
    opens_capture: bool = False  # calls capture_begin() and returns with the capture still open
    closes_capture: bool = False  # calls capture_end() on a capture some other function began
    returns: list[CallTarget] = field(default_factory=list)  # calls whose result is returned
    returns_static: str | None = None  # replays graph G and returns its static output
    replays: bool = False  # replays a CUDA graph on every path that returns (`replay_sides`)
    replay_calls: list[tuple[int, int]] = field(default_factory=list)  # its other always-made `.replay()`: line, column
    trace: list | None = None  # runner_trace events: calls whose kept results may be static outputs
    guarded_spans: list[tuple[int, int, int, int]] = field(default_factory=list)  # code no capture runs
    param_defaults: dict[str, str] = field(default_factory=dict)  # parameter -> repr of its constant default
    # Code that runs only when a test on the parameters gives a truth value (`param_tests`):
    # (test, the truth value it needs, span of the code).
    decided_spans: list[tuple[tuple, bool, tuple[int, int, int, int]]] = field(default_factory=list)
    # What it does to the fields of the names it holds, in order (`object_marks.FieldEffects`), and,
    # for a method that is a chain of `if <test of self's fields>: return <constant>`, that chain.
    effects: list[tuple] = field(default_factory=list)
    predicate: tuple | None = None


@dataclass
class ClassSummary(Compact):
    qualname: str
    bases: list[str]
    methods: dict[str, str]
    attr_classes: dict[str, str]  # self.attr -> class qualname it holds an instance of
    host_attrs: frozenset[str] = frozenset()  # attributes holding host data: NumPy arrays, host tensors
    # constructor arguments (names, `#i` positions) whose contents __init__ computes tensors from
    derived_args: frozenset[str] = frozenset()


@dataclass
class ModuleSummary:
    module: str
    functions: dict[str, FunctionSummary] = field(default_factory=dict)
    classes: dict[str, ClassSummary] = field(default_factory=dict)
    aliases: dict[str, str] = field(default_factory=dict)  # module-level name -> dotted
    regions: list[Region] = field(default_factory=list)
    entries: list[EntryRef] = field(default_factory=list)
    opaque: list[OpaqueCall] = field(default_factory=list)
    flow: list[tuple] = field(default_factory=list)  # value-flow facts (value_facts)
    flow_defs: dict[str, tuple] = field(default_factory=dict)  # value-flow definitions (value_facts)
    suppressions: dict[int, Suppression] = field(default_factory=dict)
    suppressed_blocks: tuple[SuppressedBlock, ...] = ()  # `# graphlint: disable[...]` ... `enable[...]`
    skip_file: bool = False
    error: str | None = None  # GL000 reason
    internal_error: str | None = None  # GL002: graphlint failed on this file (message)
    internal_traceback: str | None = None  # shown under --verbose
    error_line: int = 1
    error_column: int = 1
