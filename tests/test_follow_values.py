"""Reach through the value flow is opt-in: `follow-values` in the config or `--follow-values`.

By default `graphlint check` resolves a capture's calls by name; a callable held in an
attribute is not followed (on the real-code corpus, following values today reaches code that
only runs outside captures, so it stays opt-in until its reach is precise). The exported call
graph always follows values.
"""

from __future__ import annotations

import json

from conftest import run_cli

HELD = """\
import torch


def sync_step(x):
    return x.sum().item()


class Runner:
    def __init__(self, fn):
        self.fn = fn

    def capture(self, x):
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            self.fn(x)


Runner(sync_step)
"""


def _codes(root, *args: str, cache: bool = False) -> list[str]:
    flags = ["--cache-dir", str(root / ".cache")] if cache else ["--no-cache"]
    result = run_cli("check", "--format", "json", "--exit-zero", *flags, *args, ".", cwd=root)
    assert result.returncode == 0, result.stderr
    return [finding["code"] for finding in json.loads(result.stdout)]


def test_held_callables_are_followed_only_when_asked(write_tree) -> None:
    root = write_tree({"main.py": HELD})
    assert _codes(root) == []
    assert _codes(root, "--follow-values") == ["GL101"]


def test_the_config_turns_it_on_and_the_command_line_wins(write_tree) -> None:
    root = write_tree({"main.py": HELD, "pyproject.toml": "[tool.graphlint]\nfollow-values = true\n"})
    assert _codes(root) == ["GL101"]
    assert _codes(root, "--no-follow-values") == []


def test_a_cached_run_of_one_mode_is_not_reused_for_the_other(write_tree) -> None:
    root = write_tree({"main.py": HELD})
    assert _codes(root, cache=True) == []
    assert _codes(root, "--follow-values", cache=True) == ["GL101"]
    assert _codes(root, cache=True) == []


def test_a_setting_that_is_not_a_boolean_is_a_clear_error(write_tree) -> None:
    root = write_tree({"main.py": HELD, "pyproject.toml": '[tool.graphlint]\nfollow-values = "yes"\n'})
    result = run_cli("check", "--no-cache", ".", cwd=root)
    assert result.returncode == 2
    assert "'follow-values' must be true or false" in result.stderr


def test_the_exported_call_graph_always_follows_values(write_tree) -> None:
    root = write_tree({"main.py": HELD})
    result = run_cli("callgraph", "--no-cache", ".", cwd=root)
    assert result.returncode == 0, result.stderr
    assert "main.sync_step" in json.loads(result.stdout)["main.Runner.capture"]
