"""What every reporter is told besides the findings. Its own module, so the reporters and the
package that picks one among them (`render`) import it without importing each other."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ReportContext:
    files: tuple[str, ...]  # display paths of every file checked, in order
    color: bool = False
    summary: bool = True  # False with `-q/--quiet`: findings only, no closing summary line
