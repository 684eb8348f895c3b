"""How a rule plugs into the machinery: one `Detector` subclass per rule, with `on_*` hooks.

The binder (the file phase's walk over one function) and the flows raise events, and the
detectors of enabled rules answer them:

- syntax events, named after the node: `on_Call(w, call, name)`, `on_Subscript(w, node)`,
  `on_JoinedStr(w, node)`, `on_Assign(w, stmt)`, `on_AugAssign(w, stmt)`;
- statement events: `on_test(w, test, what)` (the condition of an if/while/assert or a
  conditional expression), `on_capture(w, stmt, call)` (a `with torch.cuda.graph(...)`),
  `on_stream_context(w, stmt, stream)`, `on_autocast(w, stmt, call, inside)`;
- the flows' typed events, `on_<EventClass>` (see `replay_flow` and `stream_flow`);
- `holds(project, summary, hazard, kind)`, in the project phase: whether a candidate the rule
  recorded with a ``condition`` is a finding, once every file is known.

``w`` is the `FunctionWalker` of the function the event is in: detectors ask it for value
kinds (`w.ty`), names (`w.resolve`) and record candidates with `w.hazard`. Neither the binder
nor the project phase knows a rule by name, and a rule that is not enabled does not run: its
detector is never instantiated, and a flow runs only when an enabled detector listens to it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from functools import cache
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from graphlint.registry import load_rule_modules

if TYPE_CHECKING:
    from graphlint.checkers.machinery.core.model import ClassSummary, Hazard, ModuleSummary
    from graphlint.registry import Rule

_DETECTORS: dict[str, list[type[Detector]]] = {}
_HOOK_PREFIX = "on_"


class ProjectFacts(Protocol):
    """What a detector may ask of the whole project when it confirms a candidate."""

    def class_chain(self, class_qualname: str) -> Iterator[ClassSummary]:
        """The class's summary, then its project bases' (the class may be in another file)."""
        ...

    def region_active(self, summary: ModuleSummary, region_id: int) -> bool:
        """Whether a region of ``summary`` turned out to be a capture."""
        ...


class Detector:
    """Base of every rule's detector; subclasses set ``rule`` and define the hooks they need."""

    rule: ClassVar[Rule]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _DETECTORS.setdefault(cls.rule.code, []).append(cls)

    def holds(self, project: ProjectFacts, summary: ModuleSummary, hazard: Hazard, kind: str | None) -> bool:
        """Is a candidate this rule recorded a finding? Asked in the project phase for each
        candidate it reached: ``kind`` is the capture's kind (`GRAPH`, `COMPILE`), None for an
        ``always`` candidate. The file phase sees one file; a rule whose candidates depend on
        others (a class defined elsewhere, whether a `with` target is a capture) records a
        ``condition`` and overrides this to read it. Every candidate holds by default."""
        return True


class Hooks:
    """The hooks of the enabled rules' detectors, by event name (`Call`, `KeptOutputRead`...)."""

    def __init__(self, codes: frozenset[str]) -> None:
        load_rule_modules()
        self.codes = codes
        self.detectors: list[Detector] = [cls() for code in sorted(codes) for cls in _DETECTORS.get(code, ())]
        self.by_event: dict[str, list[Callable[..., None]]] = {}
        self.judges: dict[str, list[Callable[..., bool]]] = {}
        for detector in self.detectors:
            if type(detector).holds is not Detector.holds:
                self.judges.setdefault(detector.rule.code, []).append(detector.holds)
            for attribute in dir(type(detector)):
                if attribute.startswith(_HOOK_PREFIX):
                    event = attribute[len(_HOOK_PREFIX) :]
                    self.by_event.setdefault(event, []).append(getattr(detector, attribute))

    def get(self, event: str) -> list[Callable[..., None]]:
        return self.by_event.get(event, _NONE)

    def listens_to(self, events: Iterable[type]) -> bool:
        """Does an enabled detector answer one of these event classes? (Should a flow run?)"""
        return any(event.__name__ in self.by_event for event in events)

    def holds(self, project: ProjectFacts, summary: ModuleSummary, hazard: Hazard, kind: str | None) -> bool:
        """Do the detectors of the candidate's rule confirm it? (`Detector.holds`)"""
        return all(judge(project, summary, hazard, kind) for judge in self.judges.get(hazard.code, ()))

    def emit(self, walker: Any, event: object) -> None:
        """Hand a flow's typed event to the detectors that answer it."""
        for hook in self.by_event.get(type(event).__name__, _NONE):
            hook(walker, event)


_NONE: list[Callable[..., None]] = []


@cache
def hooks_for(codes: frozenset[str]) -> Hooks:
    """One `Hooks` per set of enabled codes (detectors are stateless, so they are shared)."""
    return Hooks(codes)


def static_codes() -> frozenset[str]:
    """Every code that has a detector: the default when a caller does not select."""
    load_rule_modules()
    return frozenset(_DETECTORS)
