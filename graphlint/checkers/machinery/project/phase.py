"""The project phase: the findings that depend on more than one file.

Inputs are the per-file summaries; output is the list of findings for the GL1xx rules
and the runner rules. A candidate counts when it sits in a capture region or in a
function *in capture*: reachable in the call graph (`call_graph`) from a capture region
(a `with torch.cuda.graph(...)` body, a capture_begin/end span, a wrapper API, a configured
entry point) or captured whole (make_graphed_callables, torch.compile in a cudagraph mode).
Each finding reached through calls carries the shortest call path.
"""

from __future__ import annotations

from graphlint.checkers.machinery.core.call_targets import CallTarget
from graphlint.checkers.machinery.core.model import COMPILE, Hazard, ModuleSummary
from graphlint.checkers.machinery.detectors import Hooks, hooks_for, static_codes
from graphlint.checkers.machinery.flows.replay import runner_trace
from graphlint.checkers.machinery.internal_errors import ErrorLog, InternalError
from graphlint.checkers.machinery.project.call_graph import CallGraph, Reach
from graphlint.checkers.machinery.project.resolution import Resolver
from graphlint.findings import CallSite, Finding, Fix
from graphlint.registry import Rule, all_rules


class ProjectReporter:
    """Where project-phase events are reported: one function's file, for the rules' hooks."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.findings: list[Finding] = []

    def report(self, rule: Rule, span: tuple[int, int, int, int], message: str, fix: Fix | None = None) -> None:
        """A finding at ``span`` (line, 0-based column, end line, 0-based end column)."""
        line, col, end_line, end_col = span
        self.findings.append(Finding.of(rule, message, self.path, (line, col + 1, end_line, end_col + 1), fix))


class Project(Resolver):
    """Every analysed file's summary, the call graph over them, and the findings they give."""

    def __init__(
        self,
        summaries: dict[str, ModuleSummary],
        entry_points: frozenset[str] = frozenset(),
        codes: frozenset[str] | None = None,
        follow_values: bool = True,
    ) -> None:
        """``summaries`` maps each display path to the summary of that file; ``codes`` are the
        enabled rules (all by default); ``follow_values``: calls through values are followed."""
        self._log = ErrorLog()
        self.internal_errors: list[InternalError] = self._log.errors
        super().__init__(summaries, entry_points, self._log, follow_values)
        self.hooks: Hooks = hooks_for(static_codes() if codes is None else codes)
        self._call_graph: CallGraph | None = None

    @property
    def call_graph(self) -> CallGraph:
        """The project's call graph, built on first use (the findings and both reports read it)."""
        if self._call_graph is None:
            self._call_graph = CallGraph(self, self._log)
        return self._call_graph

    def capture_reach(self) -> dict[str, Reach]:
        """Every function that runs in a capture, with its region kind and shortest call path."""
        return self.call_graph.reach

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
                with self._log.guard(path, hazard.line, f"judging a {hazard.code} candidate in `{function.display}`"):
                    reached = reach.get(qualname)
                    if reached is not None and self.call_graph.ruled_out(
                        qualname, function, hazard.line, hazard.column
                    ):
                        reached = None  # the constants the captures pass rule this code out
                    finding = self._judge(path, summary, hazard, reached, rules)
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

        def runner_graph(target: CallTarget) -> str | None:
            for qualname in self.resolve_target(target):
                if qualname in runners:
                    return f"{runners[qualname].display}: {runners[qualname].returns_static}"
            return None

        results = []
        for qualname in sorted(self.functions):
            path, function = self.functions[qualname]
            if not function.trace:
                continue
            with self._log.guard(path, function.line, f"following the runner calls of `{function.display}`"):
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
            if not self.hooks.holds(self, summary, hazard, None):
                return None
            return self._finding(path, hazard, rule, hazard.message, ())
        region = self.active_region(summary, hazard.regions) if hazard.regions else None
        call_path: tuple[CallSite, ...]
        if region is not None:
            kind, call_path = summary.regions[region].kind, ()
        elif reached is not None:
            kind, call_path = reached.kind, reached.path
        else:
            return None
        if not self.hooks.holds(self, summary, hazard, kind):
            return None
        consequence = rule.consequences.get(kind)
        message = f"{hazard.message}: {consequence}" if consequence else hazard.message
        if kind == COMPILE and "torch.compile" not in message:
            message += " (torch.compile cudagraph region)"
        return self._finding(path, hazard, rule, message, call_path)

    @staticmethod
    def _finding(path: str, hazard: Hazard, rule: Rule, message: str, call_path: tuple[CallSite, ...]) -> Finding:
        span = (hazard.line, hazard.column, hazard.end_line, hazard.end_column)
        return Finding.of(rule, message, path, span, hazard.fix, call_path, hazard.preview)
