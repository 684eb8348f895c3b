"""Call targets: what a call runs, named by the file phase and resolved by the project phase.

One file cannot see the others' definitions, so the file phase names a call symbolically
(it runs `pkg.f`; the method `step` of `pkg.Runner`; whatever class the caller passes as
parameter `model`) and the project phase maps the name to function qualnames. The same
names say which arguments carry a known class, so a callee's parameter calls can be
resolved per caller.

Each kind is a small immutable class over a tuple ``(kind, *fields)``: every cached summary
holds these by the hundred thousand, and the project phase looks one up in a memo dict per
call of the project, so they must pickle compactly (as their class and fields) and hash
and compare in C, which a tuple does and a dataclass does not. The leading kind keeps two
kinds with the same fields apart (`FunctionTarget("pkg.C")` is not `InstanceCall("pkg.C")`).
"""

from __future__ import annotations

from typing import Union, get_args


class _Target(tuple):
    """A tuple ``(kind, *fields)``; each kind's ``__new__`` adds its kind, pickles drop it."""

    __slots__ = ()

    def __getnewargs__(self) -> tuple[str, ...]:
        return tuple(self[1:])

    def __repr__(self) -> str:
        return f"{type(self).__name__}{tuple(self[1:])!r}"


class FunctionTarget(_Target):
    """``pkg.f(...)``: a function, or a class to construct (its ``__init__`` runs)."""

    __slots__ = ()

    def __new__(cls, name: str) -> FunctionTarget:
        return tuple.__new__(cls, ("function", name))

    @property
    def name(self) -> str:
        """The dotted name as the file sees it; re-exports are followed project-wide."""
        return self[1]

    def text(self) -> str:
        """The call as `graphlint captures` shows it."""
        return self.name


class _OwnedTarget(_Target):
    """A kind over ``(kind, owner, name)``: a name looked up on a class."""

    __slots__ = ()

    @property
    def owner(self) -> str:
        """The class qualname (for a super call, the class whose method makes it)."""
        return self[1]

    @property
    def name(self) -> str:
        return self[2]


class MethodTarget(_OwnedTarget):
    """``obj.name(...)`` on an instance of a known class: a method, or a callable attribute
    (an attribute that holds an instance of another project class)."""

    __slots__ = ()

    def __new__(cls, owner: str, name: str) -> MethodTarget:
        return tuple.__new__(cls, ("method", owner, name))

    def text(self) -> str:
        return f"{self.owner}.{self.name}"


class InstanceCall(_Target):
    """``obj(...)`` on an instance of a known class: its ``forward`` or ``__call__`` runs."""

    __slots__ = ()

    def __new__(cls, cls_name: str) -> InstanceCall:
        return tuple.__new__(cls, ("instance", cls_name))

    @property
    def cls(self) -> str:
        """The class qualname."""
        return self[1]

    def text(self) -> str:
        return f"{self.cls}(...) instance call"


class SuperCall(_OwnedTarget):
    """``super().name(...)`` in a method of ``owner``: looked up from its bases."""

    __slots__ = ()

    def __new__(cls, owner: str, name: str) -> SuperCall:
        return tuple.__new__(cls, ("super", owner, name))

    def text(self) -> str:
        return f"super({self.owner}).{self.name}"


class ParamCall(_Target):
    """``param(...)``: runs whatever the callers pass; resolved from their argument classes."""

    __slots__ = ()

    def __new__(cls, param: str) -> ParamCall:
        return tuple.__new__(cls, ("param", param))

    @property
    def param(self) -> str:
        return self[1]

    def text(self) -> str:
        return self.param


class ParamMethodCall(_Target):
    """``param.name(...)``: a method of whatever the callers pass as ``param``."""

    __slots__ = ()

    def __new__(cls, param: str, name: str) -> ParamMethodCall:
        return tuple.__new__(cls, ("param method", param, name))

    @property
    def param(self) -> str:
        return self[1]

    @property
    def name(self) -> str:
        return self[2]

    def text(self) -> str:
        return f"{self.param}.{self.name}"


class ValueCall(_Target):
    """A call (or a captured callable) the file cannot name, spanning ``line``/``column`` to
    ``end_line``/``end_column`` in the function ``scope``: what it runs comes from the
    project's value flow (`value_flow`)."""

    __slots__ = ()

    def __new__(cls, scope: str, line: int, column: int, end_line: int, end_column: int) -> ValueCall:
        return tuple.__new__(cls, ("value", scope, line, column, end_line, end_column))

    @property
    def key(self) -> tuple[str, int, int, int, int]:
        """The call site as the value flow names it (its start and end: `value_flow.CallKey`)."""
        return (self[1], self[2], self[3], self[4], self[5])

    def text(self) -> str:
        return f"the value called at line {self[2]}"


class DuckCall(_Target):
    """``obj.name(...)`` where the code first checked ``hasattr(obj, attr)`` and knows nothing
    else of ``obj``: ``name`` of each project class that has ``attr`` (defines it or inherits it)."""

    __slots__ = ()

    def __new__(cls, attr: str, name: str, receiver: str) -> DuckCall:
        return tuple.__new__(cls, ("duck", attr, name, receiver))

    @property
    def attr(self) -> str:
        return self[1]

    @property
    def name(self) -> str:
        return self[2]

    def text(self) -> str:
        return f"{self[3]}.{self.name}"  # as written: `module.backward_dw`


CallTarget = Union[  # noqa: UP007 (runtime alias for 3.10)
    FunctionTarget, MethodTarget, InstanceCall, SuperCall, ParamCall, ParamMethodCall, ValueCall, DuckCall
]
PARAMETER_TARGETS = (ParamCall, ParamMethodCall)  # resolved only with the caller's bindings


class ClassArg(_Target):
    """An argument known to be an instance of a project class."""

    __slots__ = ()

    def __new__(cls, cls_name: str) -> ClassArg:
        return tuple.__new__(cls, ("class argument", cls_name))

    @property
    def cls(self) -> str:
        """The class qualname."""
        return self[1]


class ParamArg(_Target):
    """An argument that is the caller's own parameter: it passes on what the caller received."""

    __slots__ = ()

    def __new__(cls, param: str) -> ParamArg:
        return tuple.__new__(cls, ("parameter argument", param))

    @property
    def param(self) -> str:
        return self[1]


ArgValue = Union[ClassArg, ParamArg]  # noqa: UP007 (runtime alias for 3.10)
# Every kind a summary can hold: the cache's format is made from this, so a kind added to either
# union above is stored like the others (a kind it could not store made every run cold).
ALL_TARGETS: tuple[type[_Target], ...] = (*get_args(CallTarget), *get_args(ArgValue))
