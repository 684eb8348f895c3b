"""One sanitized program run in this interpreter (the child that `graphlint sanitize` starts):
install the guard when the sanitizer can work here, and when the interpreter exits write what
it found, whether it ran and why not, to the JSON file the parent reads.

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


def start(report_path: str) -> None:
    """Install the guard (if active) and arrange for the report to be written at exit. The
    program's own warning filters (`-W error`) do not apply to the sanitizer's imports: a
    warning torch raises on import is shown, as it would be, not turned into a failure here."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("default")
            state = availability()
            guard = None
            if state.active:
                from graphlint.runtime_sanitizer.guard.replay_guard import ReplayGuard

                guard = ReplayGuard(graph_dir=os.environ.pop("GRAPHLINT_SANITIZE_GRAPH_DIR", None)).install()
    except Exception as error:  # the program still runs; the report says the sanitizer did not
        _write(report_path, {"reason": f"the sanitizer could not start: {type(error).__name__}: {error}"})
        return
    atexit.register(_finish, report_path, guard, state.reason, state.untested)


def _finish(report_path: str, guard: Any, reason: str, untested: str) -> None:
    if guard is not None:
        guard.uninstall()
    data = {
        "reason": reason,
        "untested": untested,
        "findings": [f.to_dict() for f in (guard.findings if guard else [])],
        "graphs": guard.graphs.to_dict() if guard else None,
    }
    _write(report_path, data)


def _write(report_path: str, data: dict[str, Any]) -> None:
    Path(report_path).write_text(json.dumps(data), encoding="utf-8")
