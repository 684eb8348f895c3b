"""The project phase: the call graph over every analysed file, and what runs in a capture.

Inputs are the per-file summaries; output is the list of findings for the GL1xx rules.
A function is *in capture* when it is reachable in the call graph from a capture region
(a `with torch.cuda.graph(...)` body, a capture_begin/end span, a wrapper API, a configured
entry point) or is itself captured whole (make_graphed_callables, torch.compile in a
cudagraph mode). Each finding reached through calls carries the shortest call path.
"""

from __future__ import annotations

import traceback
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import networkx as nx

from graphlint.checkers.machinery import runner_trace
from graphlint.checkers.machinery.detectors import Hooks, hooks_for, static_codes
from graphlint.checkers.machinery.model import COMPILE, GRAPH, CallRef, FunctionSummary, Hazard, ModuleSummary
from graphlint.findings import CallSite, Finding, Fix
from graphlint.registry import Rule, all_rules

_MAX_ALIAS_HOPS = 8


@dataclass(frozen=True)
class Reach:
    """How a function came to run in a capture: region kind and the calls that got there."""

    kind: str
    path: tuple[CallSite, ...]


class ProjectReporter:
    """Where project-phase events are reported: one function's file, for the rules' hooks."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.findings: list[Finding] = []

    def report(self, rule: Rule, span: tuple[int, int, int, int], message: str, fix: Fix | None = None) -> None:
        """A finding at ``span`` (line, 0-based column, end line, 0-based end column)."""
        line, col, end_line, end_col = span
        self.findings.append(Finding.of(rule, message, self.path, (line, col + 1, end_line, end_col + 1), fix))


@dataclass(frozen=True)
class InternalError:
    """graphlint failed on one step of the project phase; reported as GL002 on ``path``."""

    path: str
    line: int
    message: str
    traceback: str


class Project:
    def __init__(
        self,
        summaries: dict[str, ModuleSummary],
        entry_points: frozenset[str] = frozenset(),
        codes: frozenset[str] | None = None,
    ) -> None:
        """``summaries`` maps each display path to the summary of that file; ``codes`` are the
        enabled rules (all by default)."""
        self.summaries = summaries
        self.hooks: Hooks = hooks_for(static_codes() if codes is None else codes)
        self.entry_points = entry_points
        self.functions: dict[str, tuple[str, FunctionSummary]] = {}
        self.classes = {}
        self.aliases: dict[str, str] = {}
        self.modules: set[str] = set()
        for path, summary in sorted(summaries.items()):
            self.modules.add(summary.module)
            for qualname, function in summary.functions.items():
                self.functions[qualname] = (path, function)
            self.classes.update(summary.classes)
            for local, dotted in summary.aliases.items():
                self.aliases[f"{summary.module}.{local}"] = dotted
        self.graph = nx.DiGraph()
        self.internal_errors: list[InternalError] = []
        self._resolved: dict[str, list[str]] = {}
        self._wrappers = self._find_wrappers()

    @contextmanager
    def _guard(self, path: str, line: int, step: str) -> Iterator[None]:
        """Record an exception in ``step`` as an internal error on ``path`` and go on.

        One function, capture region or file that trips a graphlint bug must not cost the
        user the findings of every other one.
        """
        try:
            yield
        except (KeyboardInterrupt, MemoryError):
            raise
        except Exception as error:
            message = f"{step} failed: {type(error).__name__}: {error}"
            self.internal_errors.append(InternalError(path, line, message, traceback.format_exc()))

    # -- resolution ----------------------------------------------------------------------
    def resolve_name(self, dotted: str) -> str | None:
        """A function or class qualname for ``dotted``, following re-exports."""
        for _ in range(_MAX_ALIAS_HOPS):
            if dotted in self.functions or dotted in self.classes:
                return dotted
            head, _, tail = dotted.rpartition(".")
            # pkg.mod.name where pkg.mod re-exports name, or pkg.Class.method through an alias.
            if dotted in self.aliases and self.aliases[dotted] != dotted:
                dotted = self.aliases[dotted]
                continue
            if head in self.aliases and self.aliases[head] != head:
                dotted = f"{self.aliases[head]}.{tail}"
                continue
            return None
        return None

    def method(self, class_qualname: str, name: str) -> str | None:
        """``name`` looked up along the class's bases (breadth first, project classes only)."""
        seen: set[str] = set()
        queue = deque([class_qualname])
        while queue:
            current = self.resolve_name(queue.popleft()) or ""
            if current in seen or current not in self.classes:
                continue
            seen.add(current)
            summary = self.classes[current]
            if name in summary.methods:
                return summary.methods[name]
            queue.extend(summary.bases)
        return None

    def attribute_class(self, class_qualname: str, attr: str) -> str | None:
        seen: set[str] = set()
        queue = deque([class_qualname])
        while queue:
            current = self.resolve_name(queue.popleft()) or ""
            if current in seen or current not in self.classes:
                continue
            seen.add(current)
            summary = self.classes[current]
            if attr in summary.attr_classes:
                return self.resolve_name(summary.attr_classes[attr])
            queue.extend(summary.bases)
        return None

    def resolve_target(self, target: str) -> list[str]:
        """Function qualnames a symbolic call target runs (see `CallRef`), memoised."""
        found = self._resolved.get(target)
        if found is None:
            found = self._resolved[target] = self._resolve_target(target)
        return found

    def _resolve_target(self, target: str) -> list[str]:
        kind, _, rest = target.partition(":")
        if kind == "f":
            resolved = self.resolve_name(rest)
            if resolved is None:
                return []
            if resolved in self.functions:
                return [resolved]
            init = self.method(resolved, "__init__")
            return [init] if init else []
        if kind == "i":
            resolved = self.resolve_name(rest)
            if resolved is None:
                return []
            found = self.method(resolved, "forward") or self.method(resolved, "__call__")
            return [found] if found else []
        if kind in ("m", "s"):
            owner, _, name = rest.partition(":")
            if kind == "s":
                summary = self.classes.get(owner)
                if summary is None:
                    return []
                for base in summary.bases:
                    found = self.method(base, name)
                    if found:
                        return [found]
                return []
            found = self.method(owner, name)
            if found:
                return [found]
            held = self.attribute_class(owner, name)
            if held:
                return self.resolve_target(f"i:{held}")
        return []

    # -- wrappers ------------------------------------------------------------------------
    def _find_wrappers(self) -> set[str]:
        """Functions that return a capture context, directly or through another wrapper."""
        wrappers = {q for q, (_, f) in self.functions.items() if f.returns_capture}
        wrappers |= {q for q in self.functions if q in self.entry_points}
        returns: dict[str, list[str]] = {}
        for qualname, (_, function) in self.functions.items():
            for target in function.returns:
                if target.startswith("f:") and target[2:] in self.entry_points:
                    wrappers.add(qualname)
                returns.setdefault(qualname, []).extend(self.resolve_target(target))
        changed = True
        while changed:
            changed = False
            for qualname, callees in returns.items():
                if qualname not in wrappers and any(c in wrappers for c in callees):
                    wrappers.add(qualname)
                    changed = True
        return wrappers

    def region_active(self, summary: ModuleSummary, region_id: int) -> bool:
        region = summary.regions[region_id]
        if region.target is None:
            return True
        kind, _, rest = region.target.partition(":")
        if kind == "f" and (rest in self.entry_points or self.resolve_name(rest) in self.entry_points):
            return True
        return any(q in self._wrappers for q in self.resolve_target(region.target))

    def active_region(self, summary: ModuleSummary, regions: tuple[int, ...]) -> int | None:
        for region_id in reversed(regions):
            if self.region_active(summary, region_id):
                return region_id
        return None

    # -- reachability --------------------------------------------------------------------
    def _resolve_in(self, target: str, bindings: dict[str, set[str]]) -> list[str]:
        """`resolve_target`, plus parameter calls resolved with the caller's bindings."""
        if target.startswith("p:"):
            classes = bindings.get(target[2:], ())
            return sorted({q for cls in classes for q in self.resolve_target(f"i:{cls}")})
        if target.startswith("pm:"):
            _, param, attr = target.split(":", 2)
            classes = bindings.get(param, ())
            return sorted({q for cls in classes for q in self.resolve_target(f"m:{cls}:{attr}")})
        return self.resolve_target(target)

    def _callee_bindings(self, call: CallRef, callee: str, bindings: dict[str, set[str]]) -> dict[str, set[str]]:
        """Which classes the callee's parameters receive at this call (`def step(model, x)`)."""
        result: dict[str, set[str]] = {}
        if not call.args:
            return result
        params = self.functions[callee][1].params
        for key, value in call.args:
            param = params[int(key)] if key.isdigit() and int(key) < len(params) else key
            if param not in params:
                continue
            classes = {value[2:]} if value.startswith("c:") else bindings.get(value[2:], set())
            if classes:
                result.setdefault(param, set()).update(classes)
        return result

    def _seeds(self) -> list[tuple[str, Reach, dict[str, set[str]]]]:
        seeds: list[tuple[str, Reach, dict[str, set[str]]]] = []
        for path, summary in sorted(self.summaries.items()):
            for entry in summary.entries:
                with self._guard(path, entry.line, "resolving a captured callable"):
                    site = (CallSite(path, entry.line, entry.function),) if entry.via_call else ()
                    for target in self.resolve_target(entry.target):
                        seeds.append((target, Reach(entry.kind, site), {}))
            if not summary.regions:
                continue
            for qualname in sorted(summary.functions):
                function = summary.functions[qualname]
                with self._guard(path, function.line, f"finding the calls in capture regions of `{function.display}`"):
                    seeds.extend(self._region_seeds(path, summary, function))
        # Graph captures first so a function reachable from both reports the graph consequence.
        seeds.sort(key=lambda s: (s[1].kind != GRAPH, len(s[1].path), s[0], s[1].path))
        return seeds

    def _region_seeds(
        self, path: str, summary: ModuleSummary, function: FunctionSummary
    ) -> Iterator[tuple[str, Reach, dict[str, set[str]]]]:
        for call in function.calls:
            if not call.regions or self.active_region(summary, call.regions) is None:
                continue
            site = (CallSite(path, call.line, function.display),)
            for callee in self._resolve_in(call.target, {}):
                yield callee, Reach(GRAPH, site), self._callee_bindings(call, callee, {})

    def capture_reach(self) -> dict[str, Reach]:
        """Every function that runs in a capture, with its region kind and shortest call path.

        A breadth-first walk from the capture regions and captured callables. Only reached
        functions are resolved, and each carries the classes its parameters are bound to by
        the calls that reach it, so `model(x)` inside `def step(model, x)` resolves to the
        `forward` of the model actually passed. The reached part of the call graph is kept
        in ``self.graph`` (networkx).
        """
        reach: dict[str, Reach] = {}
        contexts: dict[str, dict[str, set[str]]] = {}
        queue: deque[str] = deque()
        for qualname, how, bindings in self._seeds():
            if qualname not in reach:
                reach[qualname] = how
                contexts[qualname] = bindings
                queue.append(qualname)
            elif _merge(contexts[qualname], bindings):
                queue.append(qualname)
        while queue:
            current = queue.popleft()
            path, function = self.functions[current]
            with self._guard(path, function.line, f"following the calls of `{function.display}`"):
                queue.extend(self._visit(current, reach, contexts))
        return reach

    def _visit(self, current: str, reach: dict[str, Reach], contexts: dict[str, dict[str, set[str]]]) -> list[str]:
        """Resolve the calls of one reached function; the callees that need a (re)visit."""
        path, function = self.functions[current]
        how = reach[current]
        bindings = contexts[current]
        again: list[str] = []
        for call in function.calls:
            for callee in self._resolve_in(call.target, bindings):
                site = CallSite(path, call.line, function.display)
                if not self.graph.has_edge(current, callee):
                    self.graph.add_edge(current, callee, site=site)
                passed = self._callee_bindings(call, callee, bindings)
                if callee not in reach:
                    reach[callee] = Reach(how.kind, (*how.path, site))
                    contexts[callee] = passed
                    again.append(callee)
                elif _merge(contexts[callee], passed):
                    again.append(callee)
        return again

    # -- findings ------------------------------------------------------------------------
    def findings(self) -> list[Finding]:
        reach = self.capture_reach()
        rules = all_rules()
        found: dict[tuple[str, str, int, int], Finding] = {}
        for qualname in sorted(self.functions):
            path, function = self.functions[qualname]
            summary = self.summaries[path]
            for hazard in function.hazards:
                finding = None
                with self._guard(path, hazard.line, f"judging a {hazard.code} candidate in `{function.display}`"):
                    finding = self._judge(path, summary, hazard, reach.get(qualname), rules)
                if finding is not None:
                    key = (finding.path, finding.code, finding.line, finding.column)
                    found.setdefault(key, finding)
        for finding in self._runner_findings(rules):
            found.setdefault((finding.path, finding.code, finding.line, finding.column), finding)
        return list(found.values())

    def _runner_findings(self, rules: dict) -> list[Finding]:
        """Static outputs kept by callers of runners (functions that replay and return one)."""
        runners = {q: f for q, (_, f) in self.functions.items() if f.returns_static}
        if not runners or not self.hooks.listens_to(runner_trace.EVENTS):
            return []

        def runner_graph(target: str) -> str | None:
            for qualname in self.resolve_target(target):
                if qualname in runners:
                    return f"{runners[qualname].display}: {runners[qualname].returns_static}"
            return None

        results = []
        for qualname in sorted(self.functions):
            path, function = self.functions[qualname]
            if not function.trace:
                continue
            with self._guard(path, function.line, f"following the runner calls of `{function.display}`"):
                reporter = ProjectReporter(path)
                for event in runner_trace.evaluate(function.trace, runner_graph):
                    self.hooks.emit(reporter, event)
                results.extend(reporter.findings)
        return results

    def _judge(
        self, path: str, summary: ModuleSummary, hazard: Hazard, reached: Reach | None, rules: dict
    ) -> Finding | None:
        rule = rules[hazard.code]
        if hazard.always:
            if hazard.needs_region is not None and not self.region_active(summary, hazard.needs_region):
                return None
            return self._finding(path, hazard, rule, hazard.message, ())
        region = self.active_region(summary, hazard.regions) if hazard.regions else None
        if region is not None:
            kind, call_path = summary.regions[region].kind, ()
        elif reached is not None:
            kind, call_path = reached.kind, reached.path
        else:
            return None
        if kind == COMPILE and hazard.graph_only:
            return None  # Dynamo traces and guards it: not a value frozen by a raw capture
        consequence = rule.consequences.get(kind)
        message = f"{hazard.message}: {consequence}" if consequence else hazard.message
        if kind == COMPILE and "torch.compile" not in message:
            message += " (torch.compile cudagraph region)"
        return self._finding(path, hazard, rule, message, call_path)

    @staticmethod
    def _finding(path: str, hazard: Hazard, rule: Rule, message: str, call_path: tuple[CallSite, ...]) -> Finding:
        span = (hazard.line, hazard.column, hazard.end_line, hazard.end_column)
        return Finding.of(rule, message, path, span, hazard.fix, call_path)


def _merge(into: dict[str, set[str]], new: dict[str, set[str]]) -> bool:
    """Add ``new`` bindings to ``into``; True if anything was added."""
    changed = False
    for param, classes in new.items():
        slot = into.setdefault(param, set())
        if not classes <= slot:
            slot |= classes
            changed = True
    return changed
