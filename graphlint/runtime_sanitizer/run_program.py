"""`graphlint sanitize -- python SCRIPT ARGS` (or `-- python -m module ARGS`): run a program
in this process under sanitized replay and report what it found when it ends."""

from __future__ import annotations

import os
import runpy
import sys
from pathlib import Path

from graphlint.findings import Finding, sort_findings
from graphlint.runtime_sanitizer.availability import inactive_reason


class UsageError(Exception):
    pass


def parse_command(command: list[str]) -> tuple[str, str, list[str]]:
    """("path", script, argv) or ("module", name, argv) from `python SCRIPT ...` / `python -m mod ...`."""
    if command and Path(command[0]).name.startswith("python"):
        command = command[1:]
    if not command:
        raise UsageError("nothing to run: give `-- python SCRIPT [ARGS]` or `-- python -m MODULE [ARGS]`")
    if command[0] == "-m":
        if len(command) < 2:
            raise UsageError("`-m` needs a module name")
        return "module", command[1], command[1:]
    return "path", command[0], command


def run(command: list[str], graph_dir: str | None = None) -> tuple[int, list[Finding], str]:
    """Run the program; return its exit status, the findings, and why the guard was off (or "").
    With ``graph_dir``, each graph the sanitizer analyses is drawn there (SVG and HTML)."""
    kind, target, argv = parse_command(command)
    if kind == "path" and not os.path.isfile(target):
        raise UsageError(f"no such script: {target}")
    why_off = inactive_reason()
    guard = None
    if not why_off:
        from graphlint.runtime_sanitizer.replay_guard import ReplayGuard

        guard = ReplayGuard(graph_dir=graph_dir).install()
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    sys.argv = argv
    if kind == "path":
        sys.path.insert(0, str(Path(target).resolve().parent))
    status = 0
    try:
        if kind == "path":
            runpy.run_path(target, run_name="__main__")
        else:
            runpy.run_module(target, run_name="__main__", alter_sys=True)
    except SystemExit as exit_:
        code = exit_.code
        status = code if isinstance(code, int) else (0 if code is None else 1)
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path
        if guard is not None:
            guard.uninstall()
    return status, sort_findings(guard.findings if guard else []), why_off
