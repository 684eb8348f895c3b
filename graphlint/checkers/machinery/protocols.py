"""typing.Protocol classes: a static type, never the class of a value that runs.

A parameter annotated with a Protocol (`model: SupportsEncoderCudaGraph`) holds an instance of
some class that implements it, which the annotation does not name; the Protocol's own methods
are stubs (`...`). Taking the annotation for the class would resolve a call to the stub: code
that never runs in place of the code that does. So a value typed only by a Protocol is
unresolved, and a method looked up on a Protocol itself resolves to nothing. A class that
subclasses a Protocol explicitly is an ordinary class (its inherited methods do run).
"""

from __future__ import annotations

from collections.abc import Mapping

from graphlint.checkers.machinery.core.model import ClassSummary

PROTOCOL_BASES = frozenset({"typing.Protocol", "typing_extensions.Protocol"})


def protocol_classes(classes: Mapping[str, ClassSummary]) -> frozenset[str]:
    """The project classes that list Protocol among their own bases (`class P(Protocol[T])` too)."""
    return frozenset(q for q, summary in classes.items() if PROTOCOL_BASES.intersection(summary.bases))
