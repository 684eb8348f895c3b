"""graphlint's own failures in the project phase, kept per step instead of ending the run.

One function, capture region or file that trips a graphlint bug must not cost the user the
findings of every other one: each step runs under `ErrorLog.guard`, and what failed is
reported as GL002 on the file it was about.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass
from types import TracebackType


@dataclass(frozen=True)
class InternalError:
    """graphlint failed on one step of the project phase; reported as GL002 on ``path``."""

    path: str
    line: int
    message: str
    traceback: str


class ErrorLog:
    """The internal errors of one project phase, in the order they happened."""

    def __init__(self) -> None:
        self.errors: list[InternalError] = []

    def guard(self, path: str, line: int, step: str) -> _Guard:
        """A context that records an exception in ``step`` as an internal error on ``path``
        and goes on (a class, not a generator: the call graph enters one per function)."""
        return _Guard(self.errors, path, line, step)


class _Guard:
    __slots__ = ("errors", "line", "path", "step")

    def __init__(self, errors: list[InternalError], path: str, line: int, step: str) -> None:
        self.errors, self.path, self.line, self.step = errors, path, line, step

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, _: TracebackType | None) -> bool:
        if error is None or isinstance(error, (KeyboardInterrupt, MemoryError)) or not isinstance(error, Exception):
            return False
        message = f"{self.step} failed: {type(error).__name__}: {error}"
        self.errors.append(InternalError(self.path, self.line, message, traceback.format_exc()))
        return True
