"""What graphlint thinks runs inside a graph: every capture region and what it captures.

`graphlint captures PATH` prints this so a user can see, before trusting a clean report,
which regions were found, which callables each one runs (resolved to their definitions,
passed in from outside, or unresolved with the expression as written) and how much code
was reached. The real-code corpus measures reach with the same report.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from graphlint.checkers.machinery.constants.call_constants import Pruned
from graphlint.checkers.machinery.core.call_targets import (
    PARAMETER_TARGETS,
    CallTarget,
    FunctionTarget,
    MethodTarget,
    ValueCall,
)
from graphlint.checkers.machinery.core.kinds import MASK_METHODS, PY_METHODS, TENSOR_ONLY_METHODS
from graphlint.checkers.machinery.core.model import (
    COMPILE,
    CallRef,
    EntryRef,
    FunctionSummary,
    ModuleSummary,
    OpaqueCall,
)
from graphlint.checkers.machinery.core.names import LIBRARY_ROOTS
from graphlint.checkers.machinery.misnamed_modules import MisnamedModule, defined_in_project, misnamed_modules
from graphlint.checkers.machinery.project.phase import Project
from graphlint.checkers.machinery.values.capture_origins import CaptureOrigins
from graphlint.checkers.machinery.values.value_flow import CallKey

if TYPE_CHECKING:
    import networkx as nx

RESOLVED, OUTSIDE, UNRESOLVED = "resolved", "outside", "unresolved"
_CAPTURE_LIKE = re.compile(r"graph|capture", re.IGNORECASE)


@dataclass(frozen=True)
class Captured:
    """One callable a region runs, and how far graphlint could follow it."""

    text: str
    status: str  # RESOLVED | OUTSIDE | UNRESOLVED
    detail: str = ""  # where it comes from (OUTSIDE) or why it is not followed (UNRESOLVED)
    targets: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return {"expression": self.text, "status": self.status, "detail": self.detail, "targets": list(self.targets)}


@dataclass
class CaptureRegion:
    path: str
    line: int
    kind: str  # "CUDA graph" | "wrapper" | "capture class" | "configured entry point" | "graphed callable" | ...
    label: str
    callables: list[Captured] = field(default_factory=list)
    reached: int = 0
    pruned: list[Pruned] = field(default_factory=list)  # calls the constants it passes rule out

    def to_dict(self) -> dict:
        found = {
            "path": self.path,
            "line": self.line,
            "kind": self.kind,
            "label": self.label,
            "callables": [c.to_dict() for c in self.callables],
            "functions_reached": self.reached,
        }
        if self.pruned:
            found["pruned_calls"] = [p.to_dict() for p in self.pruned]
        return found


@dataclass(frozen=True)
class UnseenContext:
    """A `with` context named like a capture whose definition graphlint cannot read."""

    path: str
    line: int
    label: str
    dotted: str

    def to_dict(self) -> dict:
        return {"path": self.path, "line": self.line, "label": self.label, "snippet": self.snippet}

    @property
    def snippet(self) -> str:
        return f'[tool.graphlint]\ncapture-entry-points = ["{self.dotted}"]'


@dataclass
class CaptureReport:
    regions: list[CaptureRegion]
    unseen: list[UnseenContext]
    functions_reached: int = 0  # distinct functions reached from any region
    misnamed: list[MisnamedModule] = field(default_factory=list)  # callables whose file took another name

    def to_dict(self) -> dict:
        return {
            "regions": [r.to_dict() for r in self.regions],
            "unseen_contexts": [u.to_dict() for u in self.unseen],
            "functions_reached": self.functions_reached,
            "warnings": [m.to_dict() | {"message": m.message()} for m in self.misnamed],
        }


def capture_report(project: Project) -> CaptureReport:
    """Every capture region of the project, with what it captures and what it reaches."""
    graph = project.call_graph.graph
    origins = CaptureOrigins(project.flow, (fact for s in project.summaries.values() for fact in s.flow))
    regions: list[CaptureRegion] = []
    unseen: list[UnseenContext] = []
    library = _library_methods(project)
    for path, summary in sorted(project.summaries.items()):
        regions.extend(_with_regions(project, origins, path, summary, library))
        regions.extend(_entry_regions(project, origins, path, summary))
        unseen.extend(_unseen(project, path, summary))
    everything: set[str] = set()
    pruned = project.call_graph.pruned
    for region in regions:
        reached = _reached(graph, region)
        region.reached = len(reached)
        region.pruned = sorted({why for qualname in reached for why in pruned.get(qualname, ())})
        everything |= reached
    regions.sort(key=lambda r: (r.path, r.line, r.kind))
    return CaptureReport(regions, unseen, len(everything), misnamed_modules(project))


def _with_regions(
    project: Project, origins: CaptureOrigins, path: str, summary: ModuleSummary, library: frozenset[str]
) -> list[CaptureRegion]:
    found: dict[int, CaptureRegion] = {}
    for region_id, region in enumerate(summary.regions):
        if not project.region_active(summary, region_id):
            continue
        kind = "CUDA graph" if region.target is None else _wrapper_kind(project, region.target)
        found[region_id] = CaptureRegion(path, region.line, kind, region.label)
    followed: set[tuple[str, int]] = set()  # (function, line) of calls the value flow resolved
    texts = {(o.function, o.line): o.text for o in summary.opaque}  # how a ValueCall is written
    for function in summary.functions.values():
        for call in function.calls:
            active = project.active_region(summary, call.regions) if call.regions else None
            if active is not None:
                text = texts.get((function.display, call.line))
                judged = _judge_call(project, call, function, text)
                if (judged is None and isinstance(call.target, ValueCall)) or (judged and judged.status != RESOLVED):
                    judged = _placed(origins, call.flow_key(function.qualname), call.target, text, judged)
                _add(
                    found[active].callables,
                    judged if _is_function(call.target) else _unless_library(judged, library),
                )
                if judged is not None and isinstance(call.target, ValueCall):
                    followed.add((function.display, call.line))
    for opaque in summary.opaque:
        active = project.active_region(summary, opaque.regions) if opaque.regions else None
        if opaque.kind == "call" and active is not None and (opaque.function, opaque.line) not in followed:
            _add(found[active].callables, _unless_library(_judge_opaque(opaque), library))
    return list(found.values())


# Methods of tensors and of Python's own types: `y.detach()`, `outs.append(y)` on a value
# graphlint did not type are operations, not captured user code to list as unresolved.
_BUILTIN_TYPES = (list, dict, set, frozenset, tuple, str, bytes, int, float)
_TENSOR_METHODS = frozenset(
    {
        "to", "cpu", "split", "unbind", "repeat", "repeat_interleave", "view_as", "reshape_as", "type",
        "argsort", "masked_select", "masked_scatter_", "index_add_", "index_copy_", "index_put_", "index_fill_",
        "scatter_", "scatter_add_", "sub_", "div_", "pow_", "clamp_min", "clamp_max", "addmm", "baddbmm",
        "addcmul_", "addcdiv_", "lerp_", "uniform_", "normal_", "bernoulli_", "exponential_", "random_",
        "requires_grad_", "retain_grad", "backward", "pin_memory", "tensor_split", "split_with_sizes",
        "as_strided", "unfold", "cumprod", "fmod", "remainder", "floor_divide", "exp_", "sqrt_", "neg_", "abs_",
        "sigmoid_", "tanh_", "relu_", "div", "squeeze_", "unsqueeze_", "t_", "transpose_", "resize_", "set_",
        "copy", "masked_fill", "any", "all", "dim", "size", "stride",
    }
)  # fmt: skip
_LIBRARY_METHODS = (
    TENSOR_ONLY_METHODS
    | PY_METHODS
    | MASK_METHODS
    | _TENSOR_METHODS
    | {name for kind in _BUILTIN_TYPES for name in dir(kind) if not name.startswith("_")}
)


def _library_methods(project: Project) -> frozenset[str]:
    """The library method names no project class defines (one that does may be meant)."""
    defined = {name for cls in project.classes.values() for name in cls.methods}
    return frozenset(_LIBRARY_METHODS - defined)


def _is_function(target: CallTarget) -> bool:
    return isinstance(target, FunctionTarget)  # `pkg.get(...)`: a module's function, not a method


def _unless_library(captured: Captured | None, library: frozenset[str]) -> Captured | None:
    """None for a method call that is not resolved and names a library method: an operation."""
    if captured is None or captured.status == RESOLVED or "." not in captured.text:
        return captured
    return None if captured.text.rpartition(".")[2] in library else captured


def _entry_regions(project: Project, origins: CaptureOrigins, path: str, summary: ModuleSummary) -> list[CaptureRegion]:
    by_line: dict[tuple[int, str], CaptureRegion] = {}

    def region_for(line: int, kind: str, function: str) -> CaptureRegion:
        label = "torch.compile(mode=...)" if kind == COMPILE else "make_graphed_callables(...)"
        shown = "compiled cudagraph" if kind == COMPILE else "graphed callable"
        key = (line, kind)
        if key not in by_line:
            by_line[key] = CaptureRegion(path, line, shown, f"{label} in `{function}`")
        return by_line[key]

    followed: set[tuple[str, int]] = set()  # (function, line) of captured values the flow resolved
    texts = {(o.function, o.line): o.text for o in summary.opaque if o.kind != "call"}
    for entry in summary.entries:
        text = texts.get((entry.function, entry.line))
        judged = _judge_entry(project, entry, text)
        if isinstance(entry.target, ValueCall) and (judged is None or judged.status != RESOLVED):
            judged = _placed(origins, entry.target.key, entry.target, text, judged)
        _add(region_for(entry.line, entry.kind, entry.function).callables, judged)
        if judged is not None and isinstance(entry.target, ValueCall):
            followed.add((entry.function, entry.line))
    for opaque in summary.opaque:
        if opaque.kind != "call" and (opaque.function, opaque.line) not in followed:
            _add(region_for(opaque.line, opaque.kind, opaque.function).callables, _judge_opaque(opaque))
    return list(by_line.values())


def _unseen(project: Project, path: str, summary: ModuleSummary) -> list[UnseenContext]:
    found = []
    for region_id, region in enumerate(summary.regions):
        if region.target is None or project.region_active(summary, region_id):
            continue
        target = region.target
        if (
            isinstance(target, FunctionTarget)
            and _CAPTURE_LIKE.search(region.label)
            and not project.resolve_target(target)
        ):
            dotted = target.name
            if dotted.partition(".")[0] not in LIBRARY_ROOTS and not _analysed_under_another_name(project, dotted):
                found.append(UnseenContext(path, region.line, region.label, dotted))
    return found


def _analysed_under_another_name(project: Project, dotted: str) -> bool:
    """`pkg.sub.mod.fn` where `sub.mod` or `mod` is an analysed module: a file of this project
    whose module name lacks its namespace-package prefix, not code graphlint cannot read."""
    parts = dotted.split(".")
    prefixes = {".".join(parts[:end]) for end in range(1, len(parts))}
    return any(prefix == name or prefix.endswith(f".{name}") for prefix in prefixes for name in project.modules)


def _wrapper_kind(project: Project, target: CallTarget) -> str:
    if project.is_entry_point(target):
        return "configured entry point"
    if isinstance(target, FunctionTarget):
        cls = project.resolve_name(target.name)
        if cls in project.classes and project.capture_classes.enters_capture(cls):
            return "capture class"  # __enter__ begins a capture that __exit__ ends (a breakable graph)
    return "wrapper"


def _judge_call(project: Project, call: CallRef, function: FunctionSummary, text: str | None) -> Captured | None:
    """What a call in a region runs; None for a library operation, and for a call only the
    value flow could name that it did not resolve (its expression is an opaque call)."""
    target = call.target
    if isinstance(target, FunctionTarget) and target.name.partition(".")[0] in LIBRARY_ROOTS:
        return None  # an operation, not captured user code
    targets = tuple(
        project.call_graph.devices.cuda_callees(function.qualname, project.call_callees(function, call, {}))
    )
    if targets:
        shown = text if text is not None and isinstance(target, ValueCall) else target.text()
        return Captured(shown, RESOLVED, targets=targets)
    if isinstance(target, ValueCall):
        return None
    if isinstance(target, PARAMETER_TARGETS):
        return Captured(target.text(), OUTSIDE, f"a parameter of `{function.display}`")
    if isinstance(target, FunctionTarget) and not defined_in_project(project, target.name):
        return Captured(target.text(), OUTSIDE, _not_analysed(target.name))
    if isinstance(target, MethodTarget) and project.resolve_name(target.owner) in project.protocols:
        why = f"`{target.owner}` is a typing.Protocol: the class that implements it is not named here"
        return Captured(target.text(), UNRESOLVED, why)
    if isinstance(target, MethodTarget):
        why = (
            f"no method `{target.name}` on `{target.owner}` or its bases; "
            "the callable stored in that attribute is not followed"
        )
        return Captured(target.text(), UNRESOLVED, why)
    return Captured(target.text(), UNRESOLVED, "no definition found for this target")


def _judge_entry(project: Project, entry: EntryRef, text: str | None) -> Captured | None:
    target = entry.target
    targets = tuple(project.resolve_target(target))
    if targets:
        shown = text if text is not None and isinstance(target, ValueCall) else target.text()
        return Captured(shown, RESOLVED, targets=targets)
    if isinstance(target, ValueCall):
        return None  # not followed: its expression is listed as an opaque captured callable
    if isinstance(target, FunctionTarget) and not defined_in_project(project, target.name):
        return Captured(target.text(), OUTSIDE, _not_analysed(target.name))
    return Captured(target.text(), UNRESOLVED, "no definition found for this target")


def _placed(
    origins: CaptureOrigins, key: CallKey, target: CallTarget, text: str | None, judged: Captured | None
) -> Captured | None:
    """A callable not resolved, placed by its provenance (`capture_origins`): outside when
    every source of its value is, unresolved otherwise. A parameter is outside only when its
    callers are: one the analysed code calls with values graphlint cannot follow is not."""
    if judged is not None and judged.status == OUTSIDE and not isinstance(target, PARAMETER_TARGETS):
        return judged  # a name from a library that is not analysed
    shown = text if text is not None and isinstance(target, ValueCall) else target.text()
    why = origins.outside(key)
    if why is not None:
        return Captured(shown, OUTSIDE, why)
    if judged is not None and judged.status == OUTSIDE:  # a parameter the analysed code passes
        hint = "" if origins.flow.solved else " (`--follow-values` follows it)"
        return Captured(shown, UNRESOLVED, f"{judged.detail}; what its callers pass is not followed{hint}")
    if judged is None and text is None:
        return None  # a ValueCall with no expression kept: not a captured callable
    return (
        judged
        if judged is not None
        else Captured(shown, UNRESOLVED, "the expression's value is not known to graphlint")
    )


def _not_analysed(dotted: str) -> str:
    return f"defined in `{dotted.rpartition('.')[0] or dotted}`, which is not analysed"


def _judge_opaque(opaque: OpaqueCall) -> Captured:
    if opaque.parameter:
        return Captured(opaque.text, OUTSIDE, f"a parameter of `{opaque.function}`")
    return Captured(opaque.text, UNRESOLVED, "the expression's value is not known to graphlint")


def _add(callables: list[Captured], found: Captured | None) -> None:
    if found is not None and found not in callables:
        callables.append(found)


def _reached(graph: nx.DiGraph, region: CaptureRegion) -> set[str]:
    import networkx

    seeds = {t for c in region.callables for t in c.targets}
    reached = set(seeds)
    for seed in seeds:
        if seed in graph:
            reached |= networkx.descendants(graph, seed)
    return reached
