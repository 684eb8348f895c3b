"""`graphlint sanitize -- python [FLAGS] SCRIPT|-c CODE|-m MODULE [ARGS]`: run a program under
sanitized replay and collect what it found.

The program runs in a child interpreter (this one's executable) with the user's command line
unchanged, so every Python flag (`-c`, `-m`, `-u`, `-W`, `-X`, `-O`, ...), an uncaught
exception's traceback and the exit status are exactly Python's. A start-up hook
(`bootstrap/sitecustomize.py`, first on the child's PYTHONPATH) installs the guard before the
program runs and hands its findings back in a file when the child exits.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from graphlint.findings import Finding
from graphlint.runtime_sanitizer.analysis.graph_counts import GraphCounts

_BOOTSTRAP = str(Path(__file__).resolve().parent / "bootstrap")
# Flags after which the interpreter does not look at PYTHONPATH or site: the hook cannot run.
_NO_HOOK = {"-I": "-I (isolated mode) ignores PYTHONPATH", "-E": "-E ignores PYTHONPATH", "-S": "-S skips `site`"}
_WITH_VALUE = ("-W", "-X", "--check-hash-based-pycs")


class UsageError(Exception):
    pass


@dataclass
class RunOutcome:
    """The program's exit status, the guard's findings, why the sanitizer did not run ("" if it
    did), the untested versions it ran on anyway, and the graphs it saw."""

    status: int
    findings: list[Finding] = field(default_factory=list)
    reason: str = ""
    untested: str = ""
    graphs: GraphCounts = field(default_factory=GraphCounts)


def interpreter_arguments(command: list[str]) -> list[str]:
    """The arguments for the child interpreter: the command without its leading `python`."""
    if command and Path(command[0]).name.startswith("python"):
        command = command[1:]
    if not command:
        raise UsageError("nothing to run: give `-- python SCRIPT [ARGS]`, `-- python -m MODULE` or `-- python -c CODE`")
    return command


def program_name(arguments: list[str]) -> str:
    """What the interpreter will run: the script path, `-m module`, `-c`, or `-` (stdin)."""
    index = 0
    while index < len(arguments):
        arg = arguments[index]
        if arg in ("-c", "-m") or (arg[:2] in ("-c", "-m") and not arg.startswith("--")):
            value = arg[2:] or (arguments[index + 1] if index + 1 < len(arguments) else "")
            return "<string>" if arg.startswith("-c") else f"-m {value}"
        if arg in _WITH_VALUE:
            index += 2
            continue
        if arg == "--" or not arg.startswith("-") or arg == "-":
            following = arguments[index + 1] if arg == "--" and index + 1 < len(arguments) else arg
            return following
        index += 1
    return "<stdin>"


def hook_blocked(arguments: list[str]) -> str:
    """Why the start-up hook cannot run under these interpreter flags ("" if it can)."""
    for arg in arguments:
        if arg == "--" or not arg.startswith("-") or arg.startswith(("-c", "-m")):
            return ""
        if arg.startswith("-") and not arg.startswith("--"):
            for letter in arg[1:]:
                if f"-{letter}" in _NO_HOOK:
                    return _NO_HOOK[f"-{letter}"]
                if letter in "WX":
                    break
    return ""


def run(command: list[str], graph_dir: str | None = None) -> RunOutcome:
    """Run the program in a child interpreter under the sanitizer; wait for it.

    With ``graph_dir``, each graph the sanitizer analyses is drawn there (SVG and HTML)."""
    arguments = interpreter_arguments(command)
    blocked = hook_blocked(arguments)
    with tempfile.TemporaryDirectory(prefix="graphlint-sanitize-") as folder:
        report = Path(folder) / "report.json"
        env = dict(os.environ)
        original = env.get("PYTHONPATH", "")
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_BOOTSTRAP, original) if p)
        env.update(
            GRAPHLINT_SANITIZE_REPORT=str(report),
            GRAPHLINT_SANITIZE_PARENT=str(os.getpid()),
            GRAPHLINT_SANITIZE_PYTHONPATH=original,
        )
        if graph_dir:
            env["GRAPHLINT_SANITIZE_GRAPH_DIR"] = str(Path(graph_dir).resolve())
        status = _exit_status(subprocess.run([sys.executable, *arguments], env=env).returncode)
        if blocked:
            return RunOutcome(status, reason=f"the start-up hook could not run: {blocked}")
        if not report.exists():
            return RunOutcome(
                status,
                reason="the program ended without handing back the sanitizer's report "
                "(a crash, `os._exit`, or a start-up failure): what it did is unknown",
            )
        return _outcome(status, json.loads(report.read_text(encoding="utf-8")))


def _exit_status(code: int) -> int:
    """A child killed by a signal exits 128 + the signal's number, as a shell reports it."""
    return 128 - code if code < 0 else code


def _outcome(status: int, data: dict) -> RunOutcome:
    graphs = GraphCounts.from_dict(data["graphs"]) if data.get("graphs") else GraphCounts()
    findings = [Finding.from_dict(raw) for raw in data.get("findings", [])]
    return RunOutcome(status, findings, data.get("reason", ""), data.get("untested", ""), graphs)
