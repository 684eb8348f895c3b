"""The project's classes below each class: what an instance "of class C" may really be.

Python dispatches a method on the object's own class, so `self.forward()` in a method of
``C`` runs the override of whichever project subclass ``self`` is, and a value narrowed by
`isinstance(x, C)` may be an instance of any class derived from ``C``. Frameworks rarely
construct those subclasses where a value flow can see it: Megatron builds its layers from
`ModuleSpec`s, Transformer Engine meets its modules in a forward hook torch calls. The value
flow therefore also knows *cone* values: an instance of ``C`` or of any project class derived
from it (class-hierarchy analysis, as in Dean, Grove and Chambers), ``+C`` where a type is
declared (an `isinstance` test, a Protocol annotation) and ``&C`` for ``self``. This module
answers which classes a cone holds; `value_flow` looks methods up on them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from graphlint.checkers.machinery.core.model import ClassSummary


class ClassHierarchy:
    """The project subclasses of each project class, from every class's chain of bases.

    A `typing.Protocol` (``protocols``) is never an instance's class: its cone holds only the
    classes that derive from it by name, its nominal implementers (vLLM's models list
    `SupportsEncoderCudaGraph` among their bases), and its own stub methods never run."""

    def __init__(
        self,
        classes: Iterable[str],
        chain: Callable[[str], tuple[ClassSummary, ...]],
        protocols: frozenset[str],
        resolve: Callable[[str], str | None],
    ) -> None:
        below: dict[str, set[str]] = {}
        for cls in sorted(classes):
            if cls in protocols:
                continue
            for ancestor in chain(cls):
                if ancestor.qualname != cls:
                    below.setdefault(ancestor.qualname, set()).add(cls)
                for base in ancestor.bases:  # a library base (`torch.fx.GraphModule`): ``?name``
                    if resolve(base) is None:
                        below.setdefault("?" + base, set()).add(cls)
        self._below = {cls: tuple(sorted(found)) for cls, found in below.items()}
        self._protocols = protocols

    def subclasses(self, cls: str) -> tuple[str, ...]:
        """The project classes derived from ``cls``, directly or not, sorted (not ``cls``, no
        Protocol)."""
        return self._below.get(cls, ())

    def cone(self, cls: str) -> tuple[str, ...]:
        """``cls`` and every project class derived from it: the project classes ``+cls`` may
        be (for a library class ``?name``, only those derived from it)."""
        below = self.subclasses(cls)
        return below if cls in self._protocols or cls[0] == "?" else (cls, *below)

    def instance(self, cls: str) -> str | None:
        """The value for "an instance of ``cls``, whichever project subclass": the cone, or a
        plain instance where nothing derives from ``cls``; for a Protocol, the cone of its
        implementers, and for a library class ``?name`` the cone of the project classes
        derived from it (an instance of the library class itself is outside), or None when
        there are none."""
        if cls in self._protocols or cls[0] == "?":
            return "+" + cls if cls in self._below else None
        return ("+" if cls in self._below else "!") + cls
