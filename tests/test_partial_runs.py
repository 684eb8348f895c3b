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


PACKAGE_RUNNER = RUNNER.replace("import helper", "from tools import helper")
BROKEN_CONFIG = "[tool.graphlint\nselect = [\n"


def _gl101(root: Path, named: str) -> list[tuple[str, int, str]]:
    result = run_cli("check", "--no-cache", "--format", "json", "--select", "GL101", named, cwd=root)
    assert result.returncode == 1, result.stderr
    return [(f["path"], f["line"], f["call_path"][0]["path"]) for f in json.loads(result.stdout)]


def test_a_script_in_no_project_has_what_it_can_import_for_context(write_tree) -> None:
    """A script in /tmp or a home folder: its context is its folder's files and the packages it
    can import, not every folder below (other projects, with configs that are not its own: a
    broken one there stopped the run, and the walk read all of them)."""
    root = write_tree(
        {
            "runner.py": PACKAGE_RUNNER,
            "tools/__init__.py": "",
            "tools/helper.py": HELPER,
            "someone_else/pyproject.toml": BROKEN_CONFIG,
            "someone_else/pkg/__init__.py": "",
            "notes/graphlint.toml": BROKEN_CONFIG,  # not a package: nothing imports from it
        }
    )
    assert _gl101(root, "runner.py") == [("tools/helper.py", 5, "runner.py")]


def test_inside_a_project_the_projects_nested_in_it_are_not_context(write_tree) -> None:
    """A project without a graphlint config (a .git at its root): a named file's context is its
    folder, less the projects nested in it (a vendored checkout with its own pyproject.toml); a
    package with a setup.py of its own (an extension's build) is still part of it."""
    root = write_tree(
        {
            ".git/HEAD": "ref: refs/heads/main\n",
            "src/runner.py": RUNNER.replace("import helper", "from tools import helper"),
            "src/tools/__init__.py": "",
            "src/tools/setup.py": "",
            "src/tools/helper.py": HELPER,
            "src/vendored/pyproject.toml": BROKEN_CONFIG,
            "src/scripts/graphlint.toml": "",  # part of the project: still walked, still read
        }
    )
    assert _gl101(root / "src", "runner.py") == [("tools/helper.py", 5, "runner.py")]
    (root / "src/scripts/graphlint.toml").write_text(BROKEN_CONFIG)
    broken = run_cli("check", "--no-cache", "runner.py", cwd=root / "src")
    assert broken.returncode == 2 and "scripts/graphlint.toml" in broken.stderr


def test_force_exclude_applies_to_named_files(write_tree) -> None:
    root = write_tree({"pyproject.toml": '[tool.graphlint]\nextend-exclude = ["gen"]\n', "gen/bad.py": HAZARD})
    assert run_cli("check", "--no-cache", "gen/bad.py", cwd=root).returncode == 1
    forced = run_cli("check", "--no-cache", "--force-exclude", "gen/bad.py", cwd=root)
    assert forced.returncode == 0 and "No Python files found" in forced.stderr
