"""graphlint's own failures in the project phase, kept per step instead of ending the run.

One function, capture region or file that trips a graphlint bug must not cost the user the
findings of every other one: each step runs under `ErrorLog.guard`, and what failed is
reported as GL002 on the file it was about.
"""

from __future__ import annotations

import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass


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

    @contextmanager
    def guard(self, path: str, line: int, step: str) -> Iterator[None]:
        """Record an exception in ``step`` as an internal error on ``path`` and go on."""
        try:
            yield
        except (KeyboardInterrupt, MemoryError):
            raise
        except Exception as error:
            message = f"{step} failed: {type(error).__name__}: {error}"
            self.errors.append(InternalError(path, line, message, traceback.format_exc()))
