"""The pre-commit hook, installed from this checkout into a throwaway repository."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import HELPER, RUNNER

ROOT = Path(__file__).resolve().parent.parent
HAZARD = """\
import torch

g = torch.cuda.CUDAGraph()
x = torch.zeros(4, device="cuda")
with torch.cuda.graph(g):
    y = x.sum().item()
"""


def _git(repo: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=False, env=env)


@pytest.mark.slow
def test_hook_blocks_a_hazard_and_passes_a_clean_commit_and_sees_the_project(tmp_path: Path) -> None:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    pre_commit = shutil.which("pre-commit") or str(Path(sys.executable).with_name("pre-commit"))
    if not Path(pre_commit).exists():
        pytest.skip("pre-commit is not installed (pip install -e '.[test]')")
    # The hook repository: a snapshot of this checkout as a git repo with one commit.
    hook_repo = tmp_path / "hook-repo"
    shutil.copytree(
        ROOT,
        hook_repo,
        ignore=shutil.ignore_patterns(
            ".git", ".venv", "*.egg-info", "__pycache__", ".graphlint_cache", "fixtures", "tests", "bench-data", ".whl"
        ),
    )
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
        "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home"),
    }
    _git(hook_repo, "init", "-q", env=env)
    _git(hook_repo, "add", "-A", env=env)
    assert _git(hook_repo, "commit", "-qm", "snapshot", env=env).returncode == 0
    rev = _git(hook_repo, "rev-parse", "HEAD", env=env).stdout.strip()

    project = tmp_path / "project"
    project.mkdir()
    _git(project, "init", "-q", env=env)
    (project / ".pre-commit-config.yaml").write_text(
        f"repos:\n  - repo: {hook_repo}\n    rev: {rev}\n    hooks:\n      - id: graphlint\n"
    )
    (project / "clean.py").write_text("import torch\n\nprint(torch.zeros(2).sum().item())\n")
    _git(project, "add", "-A", env=env)
    install = subprocess.run([pre_commit, "install"], cwd=project, capture_output=True, text=True, env=env)
    assert install.returncode == 0, install.stderr

    clean = _git(project, "commit", "-m", "clean", env=env)
    assert clean.returncode == 0, clean.stdout + clean.stderr

    (project / "capture.py").write_text(HAZARD)
    _git(project, "add", "capture.py", env=env)
    blocked = _git(project, "commit", "-m", "hazard", env=env)
    assert blocked.returncode != 0
    output = blocked.stdout + blocked.stderr
    assert "GL101" in output and "capture.py:6:9" in output
    assert "hazard" not in _git(project, "log", "--format=%s", env=env).stdout

    # Cross-file: helper.py is committed (no capture in it, so it passes); committing runner.py,
    # which captures helper.f, reports the .item() in helper.py although only runner.py is staged.
    _git(project, "reset", "-q", env=env)
    (project / "capture.py").unlink()
    (project / "helper.py").write_text(HELPER)
    _git(project, "add", "helper.py", env=env)
    assert _git(project, "commit", "-m", "helper", env=env).returncode == 0
    (project / "runner.py").write_text(RUNNER)
    _git(project, "add", "runner.py", env=env)
    cross = _git(project, "commit", "-m", "runner", env=env)
    assert cross.returncode != 0
    output = cross.stdout + cross.stderr
    assert "helper.py:5:12: GL101" in output and "called in capture via runner.py:8" in output
