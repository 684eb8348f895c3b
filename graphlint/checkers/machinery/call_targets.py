"""Call targets: what a call runs, named by the file phase and resolved by the project phase.

One file cannot see the others' definitions, so the file phase names a call symbolically
(it runs `pkg.f`; the method `step` of `pkg.Runner`; whatever class the caller passes as
parameter `model`) and the project phase maps the name to function qualnames. The same
names say which arguments carry a known class, so a callee's parameter calls can be
resolved per caller.

Every cached summary holds these by the hundred thousand and the project phase keys memo
dicts with them, so each is a frozen, slotted dataclass: hashable, equal only to its own
kind (two kinds with the same fields stay distinct keys), and pickled as its class and
field values (`_Compact`), not as an attribute dict.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union


class _Compact:
    """Pickle as (class, field values): smaller and faster to load than the default state."""

    __slots__ = ()

    def __reduce__(self) -> tuple[type, tuple[str, ...]]:
        return (type(self), tuple(getattr(self, name) for name in self.__slots__))


@dataclass(frozen=True, slots=True)
class FunctionTarget(_Compact):
    """``pkg.f(...)``: a function, or a class to construct (its ``__init__`` runs)."""

    name: str  # dotted name as the file sees it; re-exports are followed project-wide

    def text(self) -> str:
        """The call as `graphlint captures` shows it."""
        return self.name


@dataclass(frozen=True, slots=True)
class MethodTarget(_Compact):
    """``obj.name(...)`` on an instance of a known class: a method, or a callable attribute
    (an attribute that holds an instance of another project class)."""

    owner: str  # class qualname
    name: str

    def text(self) -> str:
        return f"{self.owner}.{self.name}"


@dataclass(frozen=True, slots=True)
class InstanceCall(_Compact):
    """``obj(...)`` on an instance of a known class: its ``forward`` or ``__call__`` runs."""

    cls: str  # class qualname

    def text(self) -> str:
        return f"{self.cls}(...) instance call"


@dataclass(frozen=True, slots=True)
class SuperCall(_Compact):
    """``super().name(...)`` in a method of ``owner``: looked up from its bases."""

    owner: str  # the class whose method makes the call
    name: str

    def text(self) -> str:
        return f"super({self.owner}).{self.name}"


@dataclass(frozen=True, slots=True)
class ParamCall(_Compact):
    """``param(...)``: runs whatever the callers pass; resolved from their argument classes."""

    param: str

    def text(self) -> str:
        return self.param


@dataclass(frozen=True, slots=True)
class ParamMethodCall(_Compact):
    """``param.name(...)``: a method of whatever the callers pass as ``param``."""

    param: str
    name: str

    def text(self) -> str:
        return f"{self.param}.{self.name}"


CallTarget = Union[FunctionTarget, MethodTarget, InstanceCall, SuperCall, ParamCall, ParamMethodCall]  # noqa: UP007 (runtime alias for 3.10)
PARAMETER_TARGETS = (ParamCall, ParamMethodCall)  # resolved only with the caller's bindings


@dataclass(frozen=True, slots=True)
class ClassArg(_Compact):
    """An argument known to be an instance of ``cls`` (a class qualname)."""

    cls: str


@dataclass(frozen=True, slots=True)
class ParamArg(_Compact):
    """An argument that is the caller's own parameter ``param``: it passes on what it received."""

    param: str


ArgValue = Union[ClassArg, ParamArg]  # noqa: UP007 (runtime alias for 3.10)
