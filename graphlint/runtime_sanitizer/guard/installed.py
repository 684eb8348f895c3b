"""The guards installed in this interpreter, innermost last, and the channel to them: the rest of
the sanitizer (the launcher) publishes its findings to the installed guard, and marks its own
captures and replays as internal so the guard does not take them for the program's."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Protocol

from graphlint.findings import Finding


class InstalledGuard(Protocol):
    """What this channel and `sites` read of an installed guard."""

    findings: list[Finding]
    _internal: int  # >0 while the sanitizer runs its own captures
    _backward_sites: list[tuple[str, int]]  # the user lines of the backward() calls running


INSTALLED: list[InstalledGuard] = []


@contextlib.contextmanager
def sanitizer_internal() -> Iterator[None]:
    """The sanitizer's own captures and replays (the launcher's build, the analysis of graphed
    callables): the installed guard does not take them for the program's graphs."""
    guards = list(INSTALLED)
    for guard in guards:
        guard._internal += 1
    try:
        yield
    finally:
        for guard in guards:
            guard._internal -= 1


def publish(finding: Finding) -> None:
    """Hand a finding made elsewhere in the sanitizer (the launcher) to the installed guard."""
    if INSTALLED:
        INSTALLED[-1].findings.append(finding)
