"""`graphlint sanitize -- python [FLAGS] SCRIPT|-c CODE|-m MODULE [ARGS]`: run a program under
sanitized replay and collect what it found.

The program runs as a shell would run it: `python` is this interpreter, any other interpreter
(`python3.12`, a path) or console script (`pytest`) is the one named, with the user's command
line unchanged, so every Python flag (`-c`, `-m`, `-u`, `-W`, `-X`, `-O`, ...), an uncaught
exception's traceback and the exit status are exactly Python's. SIGINT and SIGTERM sent to
`graphlint sanitize` are passed on to the program, which is waited for: its own cleanup
(a checkpoint saved on KeyboardInterrupt) runs, and its exit status is the one returned. A start-up hook
(`bootstrap/sitecustomize.py`, first on the child's PYTHONPATH) installs the guard before the
program runs and hands its findings back in a file when the child exits.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
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
    did), the untested versions it ran on anyway, and the graphs it saw. ``report_lost``: the
    program ended without handing back the report, so the guard may have run until then."""

    status: int
    findings: list[Finding] = field(default_factory=list)
    reason: str = ""
    untested: str = ""
    graphs: GraphCounts = field(default_factory=GraphCounts)
    report_lost: bool = False


_INTERPRETER = re.compile(r"(python|pypy)[0-9.]*[a-z]?(\.exe)?", re.IGNORECASE)


def _is_interpreter(program: str) -> bool:
    return _INTERPRETER.fullmatch(Path(program).name) is not None


def child_command(command: list[str]) -> list[str]:
    """The command to start. `python`, a flag or a script: this interpreter. Another
    interpreter (`python3.12`) or a console script (`pytest`): the one PATH names, as a
    shell would run it (a path is run as given)."""
    arguments = interpreter_arguments(command)
    first = command[0]
    if first == "python" or not (_is_interpreter(first) or _is_command_name(first)):
        return [sys.executable, *arguments]
    found = shutil.which(first)
    if found is None:
        raise UsageError(f"no such program: {first}")
    return [found, *command[1:]]


def _is_command_name(word: str) -> bool:
    """A program to look up (`pytest`), not a script, a folder or an interpreter flag."""
    return not word.startswith("-") and not word.endswith(".py") and os.sep not in word and "/" not in word


def interpreter_arguments(command: list[str]) -> list[str]:
    """The interpreter's arguments: the command without its leading interpreter (a console
    script and its arguments are kept whole)."""
    if command and _is_interpreter(command[0]):
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
            return _runnable_file(following)
        index += 1
    return "<stdin>"


def _runnable_file(program: str) -> str:
    """A folder (or zip) Python runs is its `__main__.py`: findings about the run are located
    there, not at a line of a folder."""
    if os.path.isdir(program):
        return os.path.join(program, "__main__.py")
    return program


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


def run(
    command: list[str],
    graph_dir: str | None = None,
    poison: bool = False,
    coverage: bool = True,
    compare_eager: bool = False,
) -> RunOutcome:
    """Run the program in a child interpreter under the sanitizer; wait for it.

    With ``graph_dir``, each graph the sanitizer analyses is drawn there (SVG and HTML). With
    ``poison``, refilled static inputs are poisoned after each replay (GL511): a program that
    reads stale memory computes NaN where it did not before, on purpose. With ``coverage``, the
    share of GPU work that ran from graphs is measured (`analysis/coverage.py`). With
    ``compare_eager``, each captured block is run again eagerly beside its replays (GL512)."""
    argv = child_command(command)
    blocked = hook_blocked(argv[1:]) if argv[0] == sys.executable or _is_interpreter(command[0]) else ""
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
        if poison:
            env["GRAPHLINT_SANITIZE_POISON"] = "1"
        if compare_eager:
            env["GRAPHLINT_SANITIZE_COMPARE_EAGER"] = "1"
        env["GRAPHLINT_SANITIZE_COVERAGE"] = "1" if coverage else "0"
        status = _exit_status(_wait_forwarding_signals(argv, env))
        if blocked:
            return RunOutcome(status, reason=f"the start-up hook could not run: {blocked}")
        if not report.exists():
            return RunOutcome(
                status,
                reason="the program ended without handing back the sanitizer's report "
                "(a crash, `os._exit`, or a start-up failure): what it did is unknown",
                report_lost=True,
            )
        return _outcome(status, json.loads(report.read_text(encoding="utf-8")))


def _wait_forwarding_signals(argv: list[str], env: dict[str, str]) -> int:
    """Start the program and wait for it, passing SIGINT and SIGTERM on, as a shell does.

    The handlers go in before the program starts. A signal caught here is reset to its default
    action in the program at exec, whereas one ignored here stays ignored there: graphlint
    started with SIGINT ignored (`graphlint sanitize ... &` in a script or a CI step) would
    otherwise start a program that never sees the SIGINT it passes on, and wait for it for
    good. A signal that arrives before the program exists is held and passed on once it does."""
    started: list[subprocess.Popen] = []
    held: list[int] = []

    def on_signal(signum: int, frame: object) -> None:
        if started:
            _forward(started[0], signum)
        else:
            held.append(signum)

    previous: dict[int, object] = {}
    if threading.current_thread() is threading.main_thread():
        for number in (signal.SIGINT, signal.SIGTERM):
            previous[number] = signal.signal(number, on_signal)
    try:
        try:
            started.append(subprocess.Popen(argv, env=env))
        except OSError as error:
            raise UsageError(f"cannot run {argv[0]}: {error.strerror or error}") from None
        while held:
            _forward(started[0], held.pop(0))
        return started[0].wait()
    finally:
        for restored, handler in previous.items():
            signal.signal(restored, handler)  # type: ignore[arg-type]


def _forward(child: subprocess.Popen, signum: int) -> None:
    if signum == signal.SIGINT and _terminal_sends_it_too():
        return  # Ctrl-C reached the program itself: a second one would cut its cleanup short
    if child.poll() is None:
        child.send_signal(signum)


def _terminal_sends_it_too() -> bool:
    """Whether this process is in the terminal's foreground group (then the program, in the
    same group, got the terminal's SIGINT directly)."""
    for descriptor in (0, 1, 2):
        try:
            if os.isatty(descriptor):
                return os.tcgetpgrp(descriptor) == os.getpgrp()
        except OSError:
            continue
    return False


def _exit_status(code: int) -> int:
    """A child killed by a signal exits 128 + the signal's number, as a shell reports it."""
    return 128 - code if code < 0 else code


def _outcome(status: int, data: dict) -> RunOutcome:
    graphs = GraphCounts.from_dict(data["graphs"]) if data.get("graphs") else GraphCounts()
    findings = [Finding.from_dict(raw) for raw in data.get("findings", [])]
    return RunOutcome(status, findings, data.get("reason", ""), data.get("untested", ""), graphs)
