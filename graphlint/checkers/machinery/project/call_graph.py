"""The project's call graph (a networkx DiGraph) and what runs in a capture, read from it.

Nodes are function qualnames; an edge is a call graphlint resolved, with the line of the
first such call in the caller as edge data (``line``; the caller's file and display name
are the function's). Every function's calls are edges, whether or not a capture reaches
them, so `graphlint callgraph` prints the same graph the rules are judged on.

A call of a parameter (`model(x)` inside `def step(model, x)`) runs whatever the callers
pass. Those classes flow from the capture regions along the calls to a fixed point
(`_parameter_bindings`): each parameter is bound to the union of the classes passed at the
calls that reach it, and the function gets one edge per class (`forward` of each model),
flagged ``bound``. The edges are context-insensitive, like every other edge: a `step` that
two captures call with two models has edges to both forwards, whichever capture reached it
first. Parameter calls in code no capture reaches have no edge: what they run matters to
no finding, and guessing it would only add noise to the export.

Following values, the same walk keeps each reached function's *context* (`call_contexts`):
the values the flow reads in the arguments of the call sites that entered it. A call of a
parameter there runs those values, not the flow's union over every caller: a helper that a
test captures with one lambda and pipelines call outside captures with others runs only the
test's lambda here. A function no capture reaches keeps the flow's context-insensitive edges.

In either mode the walk also keeps each reached function's *constants* (`call_constants`):
a call in an arm they decide against (`if not in_capture:` entered with `in_capture=True`)
has no edge from it, and a reached function has no edge into another device family's
modules (`device_families`) nor into a runner's replay side, a function that replays a graph
every time it runs (`replayers`). Like the edges of code a capture-state test skips, those are
calls no capture makes, so the export leaves them out with the rules.

Two capture roots (one per region kind, `CaptureRoot`) have an edge to every function a
capture runs directly. The functions in a capture, and the call path shown for each, are the
shortest paths from those roots (Dijkstra: a call is one hop; a function captured whole is
zero hops from its root, as it is the region itself). A function reachable from a graph
capture and from a torch.compile one reports the graph capture's consequence. Ties go to
the earlier seed, then to the earlier call in the source, so the path shown is stable.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

from graphlint.checkers.machinery.constants.call_constants import CallConstants, Constants, Pruned
from graphlint.checkers.machinery.core.call_targets import PARAMETER_TARGETS
from graphlint.checkers.machinery.core.capture_state import in_guarded_code
from graphlint.checkers.machinery.core.model import COMPILE, GRAPH, CallRef, FunctionSummary, ModuleSummary
from graphlint.checkers.machinery.internal_errors import ErrorLog
from graphlint.checkers.machinery.project.call_contexts import CallContexts, Context, join
from graphlint.checkers.machinery.project.device_families import DeviceModules
from graphlint.checkers.machinery.project.replayers import replay_sides
from graphlint.checkers.machinery.project.resolution import Bindings, Resolver
from graphlint.findings import CallSite

if TYPE_CHECKING:  # networkx loads when a graph is built, not when the rules are listed
    import networkx as nx


@dataclass(frozen=True, eq=False)
class Reach:
    """How a function came to run in a capture: region kind and the calls that got there.

    Stored as a parent pointer (the reach of the caller and the call that made this one), not
    as a path: every function of a deep call chain holding its whole path costs the square
    of the depth (a 3,000-deep chain: 53 s and 633 MB); a path is built only for a finding.
    """

    kind: str
    site: CallSite | None = None  # the call that reached this function; None: the capture itself
    parent: Reach | None = None  # the caller's reach; None: a capture runs this function directly

    @property
    def path(self) -> tuple[CallSite, ...]:
        """The calls from the capture to this function, outermost first."""
        sites = []
        step: Reach | None = self
        while step is not None:
            if step.site is not None:
                sites.append(step.site)
            step = step.parent
        return tuple(reversed(sites))


@dataclass(frozen=True)
class CaptureRoot:
    """The node standing for every capture region of one kind: the start of every call path."""

    kind: str  # GRAPH | COMPILE


class _Seed(NamedTuple):
    """A function a capture runs directly, with the call in the region (none for a function
    captured whole by a decorator), the classes that call passes to its parameters, the
    values it passes them (`call_contexts`; empty: unknown) and its constants (`call_constants`)."""

    qualname: str
    kind: str
    path: tuple[CallSite, ...]
    bindings: Bindings
    context: Context
    constants: Constants


class CallGraph:
    """The resolved call graph of a project and the capture reach read from it."""

    def __init__(self, resolver: Resolver, log: ErrorLog) -> None:
        contexts = CallContexts(resolver.flow, resolver.functions) if resolver.flow.solved else None
        constants = CallConstants(
            resolver.functions,
            resolver.classes,
            frozenset(resolver.flow.partialled),
            _call_at(resolver),
            lambda function, call: resolver.call_callees(function, call, {}),
        )
        devices = DeviceModules(resolver.functions, resolver.summaries)
        seeds = _seeds(resolver, contexts, constants, devices, log)
        import networkx

        self.graph = networkx.DiGraph()
        self.graph.add_nodes_from(resolver.functions)
        walk = _Walk(resolver, contexts, constants, devices, replay_sides(resolver))
        walk.run(seeds, log)
        self.devices = devices
        self.constants = walk.constants  # each reached function's constants (`call_constants`)
        self._decide = constants
        self.pruned: dict[str, list[Pruned]] = {}  # reached function -> the calls its constants rule out
        _add_calls(self.graph, walk, self.pruned, log)
        _add_roots(self.graph, seeds)
        self.reach = _capture_reach(self.graph, resolver)

    def ruled_out(self, qualname: str, function: FunctionSummary, line: int, column: int) -> bool:
        """Whether the constants the captures pass ``qualname`` rule out the code at (line, column)."""
        return self._decide.dead(function, line, column, self.constants.get(qualname, {})) is not None

    def functions(self) -> Iterator[str]:
        """Every analysed function (the nodes that are not capture roots)."""
        return (node for node in self.graph if not isinstance(node, CaptureRoot))


def _call_at(resolver: Resolver) -> Callable[[FunctionSummary, int, int], CallRef | None]:
    """A function's call at (line, column), indexed per function on first use: how
    `object_marks` finds a call's constants and, with `resolver.call_callees`, what it runs."""
    index: dict[str, dict[tuple[int, int], CallRef]] = {}

    def call_at(function: FunctionSummary, line: int, column: int) -> CallRef | None:
        calls = index.get(function.qualname)
        if calls is None:
            calls = index[function.qualname] = {(call.line, call.column): call for call in function.calls}
        return calls.get((line, column))

    return call_at


# -- seeds: what capture regions run directly -------------------------------------------------
def _seeds(
    resolver: Resolver, contexts: CallContexts | None, constants: CallConstants, devices: DeviceModules, log: ErrorLog
) -> list[_Seed]:
    """Every function a capture runs directly, graph captures first, then the shortest paths."""
    seeds: list[_Seed] = []
    for path, summary in sorted(resolver.summaries.items()):
        for entry in summary.entries:
            with log.guard(path, entry.line, "resolving a captured callable"):
                site = (CallSite(path, entry.line, entry.function),) if entry.via_call else ()
                seeds.extend(
                    _Seed(target, entry.kind, site, {}, {}, {}) for target in resolver.resolve_target(entry.target)
                )
        if not summary.regions:
            continue
        for qualname in sorted(summary.functions):
            function = summary.functions[qualname]
            with log.guard(path, function.line, f"finding the calls in capture regions of `{function.display}`"):
                seeds.extend(_region_seeds(resolver, (contexts, constants, devices), path, summary, function))
    seeds.sort(key=lambda s: (s.kind != GRAPH, len(s.path), s.qualname, s.path))
    return seeds


def _region_seeds(
    resolver: Resolver,
    along: tuple[CallContexts | None, CallConstants, DeviceModules],
    path: str,
    summary: ModuleSummary,
    function: FunctionSummary,
) -> Iterator[_Seed]:
    contexts, constants, devices = along
    for call in function.calls:
        if not call.regions or resolver.active_region(summary, call.regions) is None:
            continue
        site = (CallSite(path, call.line, function.display),)
        for callee in devices.cuda_callees(function.qualname, resolver.call_callees(function, call, {})):
            context = contexts.entered(function.qualname, call, callee, {}) if contexts is not None else {}
            passed = constants.entered(call, callee, {}, function)
            yield _Seed(callee, GRAPH, site, resolver.callee_bindings(call, callee, {}), context, passed)


# -- the edges ------------------------------------------------------------------------------------
class _Walk:
    """The functions captures reach, each with what its parameters receive from the calls that
    reach it: the classes the binder names (`Bindings`) and the values the flow reads at those
    call sites (`call_contexts`, when following values)."""

    def __init__(
        self,
        resolver: Resolver,
        contexts: CallContexts | None,
        constants: CallConstants,
        devices: DeviceModules,
        replayers: frozenset[str],
    ) -> None:
        self.resolver = resolver
        self.contexts = contexts
        self.decide = constants
        self.bindings: dict[str, Bindings] = {}
        self.entered: dict[str, Context] = {}  # each reached function's own context
        self.constants: dict[str, Constants] = {}  # each reached function's constants
        self.devices = devices  # another device family's code is not what a CUDA capture runs
        self.replayers = replayers  # nor is a function that replays a graph each time it runs
        self._nested: dict[str, list[str]] = {}  # reached function -> reached functions nested in it

    def run(self, seeds: list[_Seed], log: ErrorLog) -> None:
        """A worklist over the functions captures reach: a function is visited again whenever a
        caller passes its parameters a class or value it had not received, or makes one unknown,
        so the result is the least fixed point whatever the visiting order."""
        queue: deque[str] = deque()
        for seed in seeds:
            if self._reach(seed.qualname, seed.bindings, seed.context, seed.constants):
                queue.append(seed.qualname)
        while queue:
            current = queue.popleft()
            path, function = self.resolver.functions[current]
            with log.guard(path, function.line, f"following the calls of `{function.display}`"):
                own = self.bindings[current]
                context = self.context(current)
                constants = self.constants[current]
                for call in self.live_calls(current, function)[0]:
                    for callee in self.callees(function, call, own, context):
                        passed = self.resolver.callee_bindings(call, callee, own)
                        values = self.contexts.entered(current, call, callee, context) if self.contexts else {}
                        held = self.decide.entered(call, callee, constants, function)
                        if self._reach(callee, passed, values, held):
                            queue.append(callee)
                            queue.extend(self._nested.get(callee, ()))  # closures read its context

    def live_calls(
        self, qualname: str, function: FunctionSummary
    ) -> tuple[list[CallRef], list[tuple[CallRef, Pruned]]]:
        """The calls of ``function`` its constants do not rule out (all, where it has none), and
        the ruled-out ones with why."""
        constants = self.constants.get(qualname)
        if not constants or not function.decided_spans:
            return function.calls, []
        path = self.resolver.functions[qualname][0]
        live, ruled_out = [], []
        for call in function.calls:
            why = self.decide.pruned(path, function, call, constants)
            if why is None:
                live.append(call)
            else:
                ruled_out.append((call, why))
        return live, ruled_out

    def context(self, qualname: str) -> Context:
        """What a reached function's parameter calls (and its closures') see; {} when unknown."""
        if self.contexts is None or qualname not in self.entered:
            return {}
        return self.contexts.effective(qualname, self.entered)

    def callees(self, function: FunctionSummary, call: CallRef, own: Bindings, context: Context) -> list[str]:
        """What ``call`` runs: a parameter's call the context knows runs the values its sites
        passed (with the classes the binder bound it to), any other call what the resolver says."""
        found = self.contexts.callees(function.qualname, call, context) if context and self.contexts else None
        if found is None:
            found = self.resolver.call_callees(function, call, own)
        elif isinstance(call.target, PARAMETER_TARGETS) and own:
            found = sorted({*found, *self.resolver.resolve_bound(call.target, own)})
        if function.qualname in self.bindings:  # reached: a CUDA capture runs it
            found = self.captured_callees(function.qualname, found)
        return found

    def captured_callees(self, caller: str, callees: list[str]) -> list[str]:
        """The callees a CUDA capture may run from ``caller``, a function it reaches: not another
        device family's code, not a replay side."""
        return [callee for callee in self.devices.cuda_callees(caller, callees) if callee not in self.replayers]

    def _reach(self, qualname: str, bindings: Bindings, context: Context, constants: Constants) -> bool:
        """Join what one more call passes into ``qualname``'s state; True if it changed."""
        if qualname not in self.bindings:
            self.bindings[qualname] = {param: set(classes) for param, classes in bindings.items()}
            self.entered[qualname] = dict(context)
            self.constants[qualname] = dict(constants)
            for outer in _enclosing(qualname):
                self._nested.setdefault(outer, []).append(qualname)
            return True
        changed = _merge(self.bindings[qualname], bindings)
        changed = join(self.constants[qualname], constants) or changed  # as contexts join
        return join(self.entered[qualname], context) or changed


def _enclosing(qualname: str) -> Iterator[str]:
    """The functions a nested function is defined in, innermost first."""
    while ".<locals>." in qualname:
        qualname = qualname.rpartition(".<locals>.")[0]
        yield qualname


def _add_calls(graph: nx.DiGraph, walk: _Walk, pruned: dict[str, list[Pruned]], log: ErrorLog) -> None:
    """One edge per (caller, callee), in the order of the calls; the first call's line is its
    ``line`` (the caller's file and name are the node's, in ``resolver.functions``). A call the
    function's constants rule out has no edge; why goes into ``pruned``, with the final
    constants (the walk only needs which calls are live).

    Edge data holds plain values (no `CallSite` per edge) and edges go in as one batch: on a
    large project (tens of thousands of edges) networkx's bookkeeping and the garbage
    collector's passes over what survives are most of the cost.
    """
    resolver = walk.resolver
    edges: list[tuple[str, str, dict]] = []
    unbound: Bindings = {}
    for qualname, (path, function) in resolver.functions.items():
        if not function.calls:
            continue
        own = walk.bindings.get(qualname, unbound)
        context = walk.context(qualname)
        with log.guard(path, function.line, f"following the calls of `{function.display}`"):
            callees_seen: set[str] = set()
            live, ruled_out = walk.live_calls(qualname, function)
            if ruled_out:  # for `graphlint captures`: the ruled-out calls of project functions
                pruned[qualname] = [why for call, why in ruled_out if walk.callees(function, call, own, context)]
            for call in live:
                bound = isinstance(call.target, PARAMETER_TARGETS)
                for callee in walk.callees(function, call, own, context):
                    if callee not in callees_seen:
                        callees_seen.add(callee)
                        edges.append(
                            (qualname, callee, {"line": call.line, "bound": True} if bound else {"line": call.line})
                        )
    graph.add_edges_from(edges)
    _add_flow_only_calls(graph, walk)


def _add_flow_only_calls(graph: nx.DiGraph, walk: _Walk) -> None:
    """Calls only the value flow sees (in lambdas, decorators, `map(f, ...)`), first line first;
    none from code a capture-state test skips while capturing (`capture_state`), nor, in code a
    capture reaches, from code its constants rule out (`call_constants`) or into another device
    family's code (`device_families`) or a replay side (`replayers`)."""
    resolver = walk.resolver
    for (scope, line, column, *_), callees in sorted(resolver.flow.extra.items()):
        if scope not in resolver.functions:
            continue
        function = resolver.functions[scope][1]
        constants = walk.constants.get(scope, {})
        if in_guarded_code(function, line, column) or walk.decide.dead(function, line, column, constants):
            continue
        known = sorted(callee for callee in callees if callee in resolver.functions)
        for callee in walk.captured_callees(scope, known) if scope in walk.bindings else known:
            if not graph.has_edge(scope, callee):
                graph.add_edge(scope, callee, line=line)


def _add_roots(graph: nx.DiGraph, seeds: list[_Seed]) -> None:
    """An edge from the capture root of each seed's kind; a decorated function costs no hop."""
    for seed in seeds:
        root = CaptureRoot(seed.kind)
        if not graph.has_edge(root, seed.qualname):
            graph.add_edge(root, seed.qualname, site=seed.path[0] if seed.path else None, weight=len(seed.path))


# -- reach: shortest paths from the roots ----------------------------------------------------------
def _capture_reach(graph: nx.DiGraph, resolver: Resolver) -> dict[str, Reach]:
    """Every function a capture runs, with its region kind and shortest call path: the path
    `networkx.single_source_dijkstra_path` gives (its first predecessor), kept as parent pointers."""
    import networkx

    reach: dict[str, Reach] = {}
    for kind in (GRAPH, COMPILE):  # graph captures first: their consequence is the one reported
        root = CaptureRoot(kind)
        if root not in graph:
            continue
        predecessors, distances = networkx.dijkstra_predecessor_and_distance(graph, root, weight="weight")
        chain: dict[object, Reach] = {}
        for node in distances:  # settled in order: a caller before its callees
            if node == root:
                continue
            caller = predecessors[node][0]
            chain[node] = _step(graph, resolver, kind, caller, node, chain.get(caller))
            if node not in reach:
                reach[node] = chain[node]
    return reach


def _step(graph: nx.DiGraph, resolver: Resolver, kind: str, caller, callee, parent: Reach | None) -> Reach:
    """The reach of ``callee`` through its call from ``caller`` (a capture root: no parent)."""
    if isinstance(caller, CaptureRoot):
        return Reach(kind, graph.succ[caller][callee]["site"])
    path, function = resolver.functions[caller]
    return Reach(kind, CallSite(path, graph.succ[caller][callee]["line"], function.display), parent)


def _merge(into: Bindings, new: Bindings) -> bool:
    """Add ``new`` bindings to ``into``; True if anything was added."""
    changed = False
    for param, classes in new.items():
        slot = into.setdefault(param, set())
        if not classes <= slot:
            slot |= classes
            changed = True
    return changed
