"""`graphlint sanitize` runs the program as a shell would: SIGINT and SIGTERM are passed on
and the program is waited for (its own cleanup runs; its exit status is returned), torch is
imported only when the program imports it, and any interpreter or console script named
after `--` is the one that runs. An unwritable `--graphlint-report` of the pytest plugin is a
warning, not a failed suite."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import plugin_args, run_cli

posix_only = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals and shebangs")

# Waits for a signal; on it, "saves a checkpoint" for longer than a hard kill would allow.
PROGRAM = """\
import signal, sys, time
from pathlib import Path

def on_term(signum, frame):
    raise KeyboardInterrupt

signal.signal(signal.SIGTERM, on_term)
try:
    print("ready", flush=True)  # inside the try: a signal right after it is still handled
    time.sleep(60)
except KeyboardInterrupt:
    time.sleep(1)
    Path(sys.argv[1]).write_text("saved")
    sys.exit(7)
sys.exit(0)
"""


def _sanitize(tmp_path: Path, ignoring_sigint: bool = False) -> subprocess.Popen:
    script = tmp_path / "train.py"
    script.write_text(PROGRAM)
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    command = [sys.executable, "-m", "graphlint", "sanitize", "--", "python", str(script), str(tmp_path / "ckpt")]
    # `cmd &` in a script or a CI step starts graphlint with SIGINT ignored; a program started
    # before graphlint's handlers are in would inherit that and never see the SIGINT passed on
    ignore = (lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if ignoring_sigint else None
    process = subprocess.Popen(
        command,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=ignore,
    )
    assert process.stdout is not None and process.stdout.readline() == "ready\n"
    return process


@posix_only
@pytest.mark.parametrize("ignoring_sigint", [False, True], ids=["", "started-with-SIGINT-ignored"])
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_is_passed_on_and_the_program_finishes_its_cleanup(
    tmp_path: Path, signum: int, ignoring_sigint: bool
) -> None:
    process = _sanitize(tmp_path, ignoring_sigint)
    try:
        process.send_signal(signum)  # to graphlint only, as `kill` or a scheduler sends it
        assert process.wait(timeout=60) == 7
        assert (tmp_path / "ckpt").read_text() == "saved"
    finally:
        process.kill()
        process.communicate()


def test_a_program_that_does_not_use_torch_does_not_import_it() -> None:
    result = run_cli("sanitize", "--", "python", "-c", "import sys; print('torch' in sys.modules)")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"
    assert "did not import torch" in result.stderr


@posix_only
def test_the_interpreter_named_after_the_separator_runs(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    named = bin_dir / "python3.99"
    named.symlink_to(os.path.realpath(sys.executable))
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    result = run_cli("sanitize", "--", "python3.99", "-c", "import sys; print(sys.executable); sys.exit(5)", env=env)
    assert result.returncode == 5, result.stderr
    assert result.stdout.strip() == str(named)


@posix_only
def test_a_console_script_named_after_the_separator_runs(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tool = bin_dir / "mytool"
    tool.write_text(f"#!{sys.executable}\nimport sys\nprint('tool', sys.argv[1:])\nsys.exit(3)\n")
    tool.chmod(0o755)
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    result = run_cli("sanitize", "--", "mytool", "a", "b", env=env)
    assert result.returncode == 3, result.stderr
    assert "tool ['a', 'b']" in result.stdout
    missing = run_cli("sanitize", "--", "no-such-tool-here", env=env)
    assert missing.returncode == 2 and "no such program: no-such-tool-here" in missing.stderr


def test_an_unwritable_plugin_report_is_a_warning_not_a_failed_suite(pytester, tmp_path: Path) -> None:
    pytester.makepyfile("def test_adds():\n    assert 1 + 1 == 2\n")
    report = tmp_path / "missing-folder" / "findings.json"
    result = pytester.runpytest(*plugin_args(), "--graphlint-sanitize", f"--graphlint-report={report}")
    result.assert_outcomes(passed=1)
    assert result.ret == 0
    assert "cannot write --graphlint-report" in result.stdout.str()


def test_the_sanitize_report_names_a_console_script(tmp_path: Path) -> None:
    report = tmp_path / "findings.json"
    result = run_cli("sanitize", "--report", str(report), "--", "pytest", "--version")
    assert result.returncode == 0, result.stderr
    assert json.loads(report.read_text())[0]["path"] == "pytest"


# A program that is up before the sanitizer gets its handlers in would miss a signal sent then:
# here the signal comes while the program is being started, before `Popen` even returns.
EARLY_SIGNAL = """\
import signal, subprocess
from graphlint.runtime_sanitizer import run_program

class Child:
    received = []

    def __init__(self, argv, env):
        signal.raise_signal(signal.SIGTERM)  # the default action would end this process here

    def poll(self):
        return None

    def send_signal(self, signum):
        Child.received.append(signum)

    def wait(self):
        return 0

subprocess.Popen = Child
print(run_program._wait_forwarding_signals(["train.py"], {}), Child.received == [signal.SIGTERM])
"""


@posix_only
def test_a_signal_sent_while_the_program_starts_is_passed_on_once_it_has() -> None:
    result = subprocess.run([sys.executable, "-c", EARLY_SIGNAL], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["0", "True"]
