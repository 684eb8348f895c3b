"""Partial runs: stdin (`-` with `--stdin-filename`), named files checked with their project
(what pre-commit passes), and `--force-exclude`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import HAZARD, HELPER, RUNNER, run_cli

UNRELATED = """\
import torch

g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g):
    z = torch.zeros(2).sum().item()
"""

AUTOCAST = """\
import torch

g = torch.cuda.CUDAGraph()
x = torch.zeros(4, device="cuda")
with torch.autocast("cuda"):
    with torch.cuda.graph(g):
        y = x * 2
"""


def run_stdin(source: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "graphlint", "check", "--no-cache", *args],
        input=source,
        cwd=cwd,
        env={**os.environ, "NO_COLOR": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_stdin_is_checked_under_its_stdin_filename(write_tree) -> None:
    root = write_tree(
        {"pyproject.toml": '[tool.graphlint.per-file-ignores]\n"tests/*" = ["GL111"]\n', "tests/.keep": ""}
    )
    plain = run_stdin(HAZARD, "-", cwd=root)
    assert plain.returncode == 1 and plain.stdout.startswith("-:6:9: GL101")
    named = run_stdin(HAZARD, "--format", "json", "-", "--stdin-filename", "tests/t.py", cwd=root)
    assert [(f["path"], f["code"]) for f in json.loads(named.stdout)] == [("tests/t.py", "GL101")]  # GL111 ignored


def test_stdin_fix_prints_the_fixed_source(write_tree) -> None:
    root = write_tree({"keep.txt": ""})
    result = run_stdin(AUTOCAST, "--fix", "-", "--stdin-filename", "step.py", cwd=root)
    assert result.stdout == AUTOCAST.replace('autocast("cuda")', 'autocast("cuda", cache_enabled=False)')
    assert result.returncode == 0 and "GL107" not in result.stderr
    assert not (root / "step.py").exists()  # nothing written


def test_named_file_is_checked_with_its_project(write_tree) -> None:
    root = write_tree({"helper.py": HELPER, "runner.py": RUNNER, "other.py": UNRELATED})
    result = run_cli("check", "--no-cache", "--format", "json", "--select", "GL101", "runner.py", cwd=root)
    findings = json.loads(result.stdout)
    # helper.py's .item() is a hazard because runner.py captures helper.f: it is reported, with
    # the call path from the named file; other.py's own finding is not (it was not named).
    assert [(f["path"], f["line"], f["code"]) for f in findings] == [("helper.py", 5, "GL101")]
    assert findings[0]["call_path"][0]["path"] == "runner.py"
    # The same through stdin, as an editor sends an unsaved buffer:
    piped = run_stdin(RUNNER, "--format", "json", "--select", "GL101", "-", "--stdin-filename", "runner.py", cwd=root)
    assert [(f["path"], f["code"]) for f in json.loads(piped.stdout)] == [("helper.py", "GL101")]
    # Named alone, the helper is still reported: runner.py's capture (from the project context)
    # is what makes helper.f a hazard.
    helper = run_cli("check", "--no-cache", "--format", "json", "--select", "GL101", "helper.py", cwd=root)
    assert [(f["path"], f["line"]) for f in json.loads(helper.stdout)] == [("helper.py", 5)]


def test_force_exclude_applies_to_named_files(write_tree) -> None:
    root = write_tree({"pyproject.toml": '[tool.graphlint]\nextend-exclude = ["gen"]\n', "gen/bad.py": HAZARD})
    assert run_cli("check", "--no-cache", "gen/bad.py", cwd=root).returncode == 1
    forced = run_cli("check", "--no-cache", "--force-exclude", "gen/bad.py", cwd=root)
    assert forced.returncode == 0 and "No Python files found" in forced.stderr
