"""Shared helpers: run the real `graphlint` entry point in-process or as a subprocess; the
`--update-snapshots` option of the fixture snapshots (tests/finding_snapshots.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from finding_snapshots import REWRITTEN, updating

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"

# A GL101 and a GL111 in one capture: the file the CLI and configuration tests select from.
HAZARD = """\
import torch

g = torch.cuda.CUDAGraph()
x = torch.zeros(4, device="cuda")
with torch.cuda.graph(g):
    y = x.sum().item()
    z = x[[0, 1]]
"""

# The cross-file case of partial runs: helper.py holds the `.item()`, runner.py captures it.
HELPER = """\
import torch


def f(x):
    return x.sum().item()
"""

RUNNER = """\
import torch

import helper

g = torch.cuda.CUDAGraph()
x = torch.zeros(4, device="cuda")
with torch.cuda.graph(g):
    y = helper.f(x)
"""


def run_cli(*args: str, cwd: Path | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    """The installed command line, exactly as a user runs it."""
    full_env = {**os.environ, "NO_COLOR": "1", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "graphlint", *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def check_json(*args: str, cwd: Path | None = None) -> list[dict]:
    result = run_cli("check", "--format", "json", "--no-cache", *args, cwd=cwd)
    assert result.returncode in (0, 1), result.stderr
    return json.loads(result.stdout)


@pytest.fixture
def write_tree(tmp_path: Path):
    """Write ``{relative path: text}`` under a fresh directory and return it."""

    def write(files: dict[str, str | bytes]) -> Path:
        for name, content in files.items():
            path = tmp_path / name
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                path.write_bytes(content)
            else:
                path.write_text(content, encoding="utf-8")
        return tmp_path

    return write


def followed_call_graph(root: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, list[str]]:
    """The call graph (PyCG's shape) of the project at ``root``, values followed, in process
    (module names are relative to ``root``, as `graphlint callgraph .` run there gives them)."""
    from graphlint.checkers.machinery.project.callgraph_json import call_graph
    from graphlint.config import ConfigResolver
    from graphlint.engine import CheckOptions, load_project

    monkeypatch.chdir(root)
    options = CheckOptions(jobs=1, cache_dir=None, follow_values=True)
    _, project = load_project(["."], ConfigResolver(cwd=root), options)
    return call_graph(project)


pytest_plugins = ["pytester"]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-snapshots",
        action="store_true",
        help="rewrite the fixture snapshots (fixtures/rules/**/*.snap) instead of failing on a difference",
    )


@pytest.fixture
def update_snapshots(request: pytest.FixtureRequest) -> bool:
    """Whether snapshot tests rewrite their snapshots (`--update-snapshots` or GRAPHLINT_UPDATE_SNAPSHOTS=1)."""
    return updating(request.config.getoption("--update-snapshots"))


def pytest_terminal_summary(terminalreporter) -> None:
    """Name every snapshot a run rewrote, so the update is reviewed rather than trusted."""
    if REWRITTEN:
        terminalreporter.section("snapshots rewritten")
        for path in sorted(REWRITTEN):
            terminalreporter.write_line(str(path.relative_to(ROOT)))


def plugin_args() -> list[str]:
    """Load the sanitizer plugin in a pytester run unless its entry point already does."""
    from importlib.metadata import entry_points

    registered = any(ep.value == "graphlint.runtime_sanitizer.pytest_plugin" for ep in entry_points(group="pytest11"))
    return [] if registered else ["-p", "graphlint.runtime_sanitizer.pytest_plugin"]
