"""Name resolution over the whole project: which functions a call target runs.

The file phase names calls symbolically (`call_targets`); here, with every file's summary
in hand, a name is followed through re-exports and class bases to function qualnames.
The call graph, the capture report and the call-graph export all resolve through this one
index, so they agree on what a call runs.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator

from graphlint.checkers.machinery.core.call_targets import (
    PARAMETER_TARGETS,
    CallTarget,
    ClassArg,
    DuckCall,
    FunctionTarget,
    InstanceCall,
    MethodTarget,
    ParamCall,
    ParamMethodCall,
    SuperCall,
    ValueCall,
)
from graphlint.checkers.machinery.core.model import CallRef, ClassSummary, FunctionSummary, ModuleSummary
from graphlint.checkers.machinery.internal_errors import ErrorLog
from graphlint.checkers.machinery.project.capture_classes import CaptureClasses
from graphlint.checkers.machinery.project.script_imports import script_aliases
from graphlint.checkers.machinery.protocols import protocol_classes
from graphlint.checkers.machinery.values.value_flow import ValueFlow

_MAX_ALIAS_HOPS = 8
# `hasattr(obj, attr)` then `obj.name()`: past these, the attribute says too little of obj
_MAX_DUCKS = 32  # classes with the attribute
_MAX_DUCK_TARGETS = 8  # methods the call may run
# torch's base of custom autograd Functions, as the binder spells a class's bases
_AUTOGRAD_FUNCTIONS = frozenset(
    {"torch.autograd.Function", "torch.autograd.function.Function", "torch.autograd.function.InplaceFunction"}
)

# Which classes each parameter of a function receives from its callers (`def step(model, x)`).
Bindings = dict[str, set[str]]


class Resolver:
    """Every analysed function and class by qualname, and the resolution of call targets."""

    def __init__(
        self,
        summaries: dict[str, ModuleSummary],
        entry_points: frozenset[str] = frozenset(),
        log: ErrorLog | None = None,
        follow_values: bool = True,
    ) -> None:
        """``summaries`` maps each display path to the summary of that file; ``entry_points``
        are the configured capture entry points (dotted names); ``log`` collects internal
        errors (GL002) of the value flow; without ``follow_values`` the flow is left empty
        (calls resolve by name alone, as `graphlint check` does by default)."""
        self.summaries = summaries
        self.entry_points = entry_points
        self.functions: dict[str, tuple[str, FunctionSummary]] = {}
        self.classes: dict[str, ClassSummary] = {}
        self.aliases: dict[str, str] = {}
        self.modules: set[str] = set()
        for path, summary in sorted(summaries.items()):
            self.modules.add(summary.module)
            for qualname, function in summary.functions.items():
                self.functions[qualname] = (path, function)
            self.classes.update(summary.classes)
            for local, dotted in summary.aliases.items():
                self.aliases[f"{summary.module}.{local}"] = dotted
        imported = ((s.module, dotted.partition(".")[0]) for s in summaries.values() for dotted in s.aliases.values())
        for bare, full in script_aliases(self.modules, imported).items():
            self.aliases.setdefault(bare, full)  # `import helpers` beside helpers.py in a namespace folder
        self._resolved: dict[CallTarget, list[str]] = {}
        self._defining: dict[str, list[str]] | None = None  # method name -> the classes defining it
        self.protocols = protocol_classes(self.classes)  # a static type only: nothing of theirs runs
        self.flow = ValueFlow(self, log or ErrorLog(), solve=follow_values)
        self._wrappers = self._find_wrappers()
        self.capture_classes = CaptureClasses(self.functions, self.resolve_target, self.method)

    # -- names -----------------------------------------------------------------------------
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
        for summary in self.class_chain(class_qualname):
            if name in summary.methods:
                return summary.methods[name]
        return None

    def attribute_class(self, class_qualname: str, attr: str) -> str | None:
        """The class of the instance ``self.attr`` holds, looked up along the bases."""
        for summary in self.class_chain(class_qualname):
            if attr in summary.attr_classes:
                return self.resolve_name(summary.attr_classes[attr])
        return None

    def class_chain(self, class_qualname: str) -> Iterator[ClassSummary]:
        """The class and its project bases, breadth first, each once."""
        seen: set[str] = set()
        queue = deque([class_qualname])
        while queue:
            current = self.resolve_name(queue.popleft()) or ""
            if current in seen or current not in self.classes:
                continue
            seen.add(current)
            summary = self.classes[current]
            yield summary
            queue.extend(summary.bases)

    # -- call targets ----------------------------------------------------------------------
    def resolve_target(self, target: CallTarget) -> list[str]:
        """Function qualnames a call target runs, memoised; parameter calls resolve to nothing
        here (their value is only known per caller: `resolve_bound`)."""
        found = self._resolved.get(target)
        if found is None:
            found = self._resolved[target] = self._resolve_target(target)
        return found

    def _resolve_target(self, target: CallTarget) -> list[str]:
        if isinstance(target, FunctionTarget):
            resolved = self.resolve_name(target.name)
            if resolved is None:
                owner, _, attr = target.name.rpartition(".")
                return self._autograd_apply(owner, attr)
            if resolved in self.functions:
                return [resolved]
            init = self.method(resolved, "__init__")
            return [init] if init else []
        if isinstance(target, InstanceCall):
            return self._instance_call(target.cls)
        if isinstance(target, SuperCall):
            summary = self.classes.get(target.owner)
            for base in summary.bases if summary is not None else ():
                found = self.method(base, target.name)
                if found:
                    return [found]
            return []
        if isinstance(target, ValueCall):
            return sorted(q for q in self.flow.callees(target.key) if q in self.functions)
        if isinstance(target, MethodTarget):
            if self.resolve_name(target.owner) in self.protocols:
                return []  # `model: SomeProtocol`, `model.run()`: some implementation's, not the stub
            found = self.method(target.owner, target.name)
            if found:
                return [found]
            applied = self._autograd_apply(target.owner, target.name)
            if applied:
                return applied
            held = self.attribute_class(target.owner, target.name)
            return self.resolve_target(InstanceCall(held)) if held else []
        if isinstance(target, DuckCall):
            return self._duck_call(target.attr, target.name)
        return []

    def _autograd_apply(self, owner: str, attr: str) -> list[str]:
        """`Fn.apply(x)` on a custom `torch.autograd.Function`: autograd runs `Fn.forward(ctx, x)`
        (the binder leaves `ctx` out of its parameters, so the arguments line up)."""
        cls = self.resolve_name(owner) if attr == "apply" else None
        if cls not in self.classes or self.method(cls, "apply") is not None:
            return []
        if not any(base in _AUTOGRAD_FUNCTIONS for summary in self.class_chain(cls) for base in summary.bases):
            return []
        forward = self.method(cls, "forward")
        return [forward] if forward else []

    def _duck_call(self, attr: str, name: str) -> list[str]:
        """`if hasattr(obj, attr): obj.name()`: ``name`` of every project class with ``attr``
        (a class defining it, and the classes derived from one). More than `_MAX_DUCKS` such
        classes, or more than `_MAX_DUCK_TARGETS` methods, says too little: unresolved."""
        if self._defining is None:
            self._defining = {}
            for qualname, summary in sorted(self.classes.items()):
                for method in summary.methods:
                    self._defining.setdefault(method, []).append(qualname)
        having = {cls for owner in self._defining.get(attr, ()) for cls in self.flow.hierarchy.cone(owner)}
        if len(having) > _MAX_DUCKS:
            return []
        found = {target for cls in having if (target := self.method(cls, name)) is not None}
        return sorted(found) if len(found) <= _MAX_DUCK_TARGETS else []

    def _instance_call(self, cls: str) -> list[str]:
        resolved = self.resolve_name(cls)
        if resolved is None or resolved in self.protocols:
            return []
        found = self.method(resolved, "forward") or self.method(resolved, "__call__")
        return [found] if found else []

    def resolve_bound(self, target: CallTarget, bindings: Bindings) -> list[str]:
        """`resolve_target`, plus parameter calls resolved with the classes the parameters are
        bound to (sorted, so the call graph's edges come in a stable order)."""
        if isinstance(target, ParamCall):
            classes = bindings.get(target.param, ())
            return sorted({q for cls in classes for q in self.resolve_target(InstanceCall(cls))})
        if isinstance(target, ParamMethodCall):
            classes = bindings.get(target.param, ())
            return sorted({q for cls in classes for q in self.resolve_target(MethodTarget(cls, target.name))})
        return self.resolve_target(target)

    def call_callees(self, function: FunctionSummary, call: CallRef, bindings: Bindings) -> list[str]:
        """What ``call`` in ``function`` runs: its named target (`resolve_bound`) and what the
        value flow says its callee holds. A plain name the flow resolves is replaced by the
        flow's answer (a decorator may have rebound it); other targets keep their own answer
        and gain the flow's; a parameter call that captured code binds keeps those bindings
        (context-sensitive where it matters, for reach), other parameter calls get the flow's
        answer (what any caller passes)."""
        named = self.resolve_bound(call.target, bindings)
        if isinstance(call.target, ValueCall) or (named and isinstance(call.target, PARAMETER_TARGETS)):
            return named  # a parameter bound by the captures that reach it: what they pass
        flowed = self.flow.callees(call.flow_key(function.qualname))
        if not flowed:
            return named
        found = sorted(q for q in flowed if q in self.functions)
        if isinstance(call.target, FunctionTarget) and found:
            return found
        return [*named, *(q for q in found if q not in named)]

    def callee_bindings(self, call: CallRef, callee: str, bindings: Bindings) -> Bindings:
        """Which classes the callee's parameters receive at this call, given the caller's own
        ``bindings`` (an argument that is the caller's parameter passes on what it received)."""
        result: Bindings = {}
        if not call.args:
            return result
        params = self.functions[callee][1].params
        for key, value in call.args:
            param = params[int(key)] if key.isdigit() and int(key) < len(params) else key
            if param not in params:
                continue
            classes = {value.cls} if isinstance(value, ClassArg) else bindings.get(value.param, set())
            if classes:
                result.setdefault(param, set()).update(classes)
        return result

    # -- capture regions -------------------------------------------------------------------
    def is_entry_point(self, target: CallTarget | None) -> bool:
        """Whether ``target`` names a configured capture entry point (analysed or not)."""
        if not isinstance(target, FunctionTarget):
            return False
        return target.name in self.entry_points or self.resolve_name(target.name) in self.entry_points

    def _find_wrappers(self) -> set[str]:
        """Functions that return a capture context, directly or through another wrapper."""
        wrappers = {q for q, (_, f) in self.functions.items() if f.returns_capture}
        wrappers |= {q for q in self.functions if q in self.entry_points}
        returns: dict[str, list[str]] = {}
        for qualname, (_, function) in self.functions.items():
            for target in function.returns:
                if isinstance(target, FunctionTarget) and target.name in self.entry_points:
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
        """Whether a region of ``summary`` is a capture: torch.cuda.graph, a wrapper, an entry point."""
        region = summary.regions[region_id]
        if region.target is None or self.is_entry_point(region.target):
            return True
        if isinstance(region.target, FunctionTarget):  # `with Capture(pool=p):`, a breakable graph
            cls = self.resolve_name(region.target.name)
            if cls in self.classes and self.capture_classes.enters_capture(cls):
                return True
        return any(q in self._wrappers for q in self.resolve_target(region.target))

    def active_region(self, summary: ModuleSummary, regions: tuple[int, ...]) -> int | None:
        """The innermost of ``regions`` that is a capture, if any."""
        for region_id in reversed(regions):
            if self.region_active(summary, region_id):
                return region_id
        return None
