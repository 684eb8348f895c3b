"""One sanitized program run in this interpreter (the child that `graphlint sanitize` starts):
install the guard when the program imports torch and the sanitizer can work here, and when the
interpreter exits write what it found, whether it ran and why not, to the JSON file the parent
reads.

Writing at exit (atexit) keeps Python's own behaviour for everything else: the program's
traceback, its exit status, its flags. A program that never reaches a normal exit (a crash,
``os._exit``) leaves no file, and the parent says so rather than report a clean run.
"""

from __future__ import annotations

import atexit
import json
import os
import warnings
from pathlib import Path
from typing import Any

from graphlint.runtime_sanitizer.availability import availability
from graphlint.runtime_sanitizer.import_trigger import after_import


def start(report_path: str) -> None:
    """Arrange for the report to be written at exit, and install the guard once the program
    imports torch (`import_trigger`): a program that never does is not made to import it."""
    session = _Session(report_path)
    atexit.register(session.finish)
    after_import("torch", session.arm)


class _Session:
    def __init__(self, report_path: str) -> None:
        self.report_path = report_path
        self.guard: Any = None
        self.reason = "the program did not import torch"
        self.untested = ""

    def arm(self) -> None:
        """Install the guard (if active). The program's own warning filters (`-W error`) do not
        apply to the sanitizer's imports: a warning they raise is shown, not turned into a failure."""
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("default")
                state = availability()
                self.reason, self.untested = state.reason, state.untested
                if state.active:
                    from graphlint.runtime_sanitizer.guard.replay_guard import ReplayGuard

                    graph_dir = os.environ.pop("GRAPHLINT_SANITIZE_GRAPH_DIR", None)
                    poison = os.environ.pop("GRAPHLINT_SANITIZE_POISON", "") == "1"
                    coverage = os.environ.pop("GRAPHLINT_SANITIZE_COVERAGE", "1") != "0"
                    compare = os.environ.pop("GRAPHLINT_SANITIZE_COMPARE_EAGER", "") == "1"
                    self.guard = ReplayGuard(
                        graph_dir=graph_dir, poison=poison, coverage=coverage, compare_eager=compare
                    ).install()
        except Exception as error:  # the program still runs; the report says the sanitizer did not
            self.guard = None
            self.reason = f"the sanitizer could not start: {type(error).__name__}: {error}"

    def finish(self) -> None:
        guard = self.guard
        if guard is not None:
            guard.uninstall()
        data = {
            "reason": self.reason,
            "untested": self.untested,
            "findings": [f.to_dict() for f in (guard.findings if guard else [])],
            "graphs": guard.graphs.to_dict() if guard else None,
        }
        _write(self.report_path, data)


def _write(report_path: str, data: dict[str, Any]) -> None:
    Path(report_path).write_text(json.dumps(data), encoding="utf-8")
