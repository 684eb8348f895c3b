"""Every path a file system can hold is a GL000 finding or a skip, never a whole-run crash or
hang: symlink loops, file names that are not UTF-8, FIFOs and devices named `*.py`, non-ASCII
paths on an ASCII stdout; unwritable outputs and broken configurations are clean exit-2
messages."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import HAZARD, run_cli

posix_only = pytest.mark.skipif(sys.platform == "win32", reason="needs POSIX symlinks, FIFOs and byte file names")


def _cli(*args: str, cwd: Path, encoding: str = "utf-8") -> subprocess.CompletedProcess:
    """The CLI with a hard timeout (a hang fails the test) and a stdout of ``encoding``."""
    env = {**os.environ, "NO_COLOR": "1", "PYTHONIOENCODING": encoding}
    return subprocess.run(
        [sys.executable, "-m", "graphlint", *args], cwd=cwd, env=env, capture_output=True, timeout=120
    )


@posix_only
def test_special_files_and_symlink_loops_are_gl000_findings(tmp_path: Path) -> None:
    (tmp_path / "hazard.py").write_text(HAZARD)
    os.mkfifo(tmp_path / "fifo.py")
    os.symlink("/dev/zero", tmp_path / "zero.py")
    os.symlink("loop_b.py", tmp_path / "loop_a.py")
    os.symlink("loop_a.py", tmp_path / "loop_b.py")
    for args in (["."], ["loop_a.py", "fifo.py", "hazard.py"]):
        result = _cli("check", "--no-cache", "--format", "json", *args, cwd=tmp_path)
        assert result.returncode == 1, result.stderr
        found = {(f["path"].removeprefix("./"), f["code"]) for f in json.loads(result.stdout)}
        assert {("fifo.py", "GL000"), ("loop_a.py", "GL000"), ("hazard.py", "GL101")} <= found
    found = {
        f["path"]: f["message"]
        for f in json.loads(_cli("check", "--no-cache", "--format", "json", ".", cwd=tmp_path).stdout)
    }
    assert "not a regular file (a FIFO)" in found["./fifo.py"]
    assert "not a regular file (a character device)" in found["./zero.py"]


@posix_only
@pytest.mark.parametrize("fmt", ["text", "json", "sarif", "github"])
def test_a_file_name_that_is_not_utf8_is_reported_in_every_format(tmp_path: Path, fmt: str) -> None:
    name = os.fsencode(tmp_path) + b"/bad\xff.py"
    with open(name, "w") as handle:
        handle.write(HAZARD)
    for state in ("cold", "warm"):
        result = _cli("check", "--cache-dir", str(tmp_path / "cache"), "--format", fmt, ".", cwd=tmp_path)
        assert result.returncode == 1, (state, result.stderr)
        assert b"bad\\udcff.py" in result.stdout and b"Traceback" not in result.stderr


@posix_only
def test_callgraph_takes_a_file_name_that_is_not_utf8(tmp_path: Path) -> None:
    with open(os.fsencode(tmp_path) + b"/bad\xff.py", "w") as handle:
        handle.write("def f():\n    g()\n\ndef g():\n    pass\n")
    result = _cli("callgraph", "--no-cache", ".", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)


def test_a_non_ascii_path_on_an_ascii_stdout_is_escaped(tmp_path: Path) -> None:
    (tmp_path / "ünï.py").write_text(HAZARD)
    result = _cli("check", "--no-cache", ".", cwd=tmp_path, encoding="ascii")
    assert result.returncode == 1, result.stderr
    assert b"./\\xfcn\\xef.py:6:" in result.stdout


def test_an_output_file_that_is_a_directory_is_a_clean_error(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(HAZARD)
    (tmp_path / "report").mkdir()
    result = run_cli("check", "--no-cache", ".", "--output-file", "report", cwd=tmp_path)
    assert result.returncode == 2
    assert "graphlint: error: cannot write report" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b'tool = "x"\n', "'tool' must be a table"),
        (b"[tool.graphlint]\n# caf\xe9\nselect = ['GL1']\n", "invalid TOML: not UTF-8"),
        (b"[tool]\ngraphlint = 3\n", "[tool.graphlint] must be a table"),
    ],
    ids=["tool is a string", "latin-1", "graphlint is a number"],
)
def test_a_broken_pyproject_is_a_clean_error(tmp_path: Path, content: bytes, message: str) -> None:
    (tmp_path / "a.py").write_text(HAZARD)
    (tmp_path / "pyproject.toml").write_bytes(content)
    result = run_cli("check", "--no-cache", ".", cwd=tmp_path)
    assert result.returncode == 2
    assert message in result.stderr and "Traceback" not in result.stderr
    config = run_cli("check", "--no-cache", "--config", "pyproject.toml", ".", cwd=tmp_path)
    assert config.returncode == 2 and "Traceback" not in config.stderr
