"""Which callee runs under a capture, call by call: chained calls keep apart, a parameter's call
runs what the call sites the capture went through pass (not what every caller passes), and a
Protocol's stub method is never taken for the code that runs."""

from __future__ import annotations

import json

from conftest import run_cli


def _captured(root, *args: str) -> dict[str, list[str]]:
    """Each captured expression (`graphlint captures --follow-values`) -> the functions it runs."""
    result = run_cli("captures", "--follow-values", "--no-cache", "--format", "json", *args, ".", cwd=root)
    assert result.returncode == 0, result.stderr
    found: dict[str, list[str]] = {}
    for region in json.loads(result.stdout)["regions"]:
        for called in region["callables"]:
            found[called["expression"]] = called.get("targets", [])
    return found


CHAINED = """\
import torch


class Pool:
    def release(self):
        return None


def current_pool():
    return Pool()


def replay(x):
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        current_pool().release()
"""


def test_a_chained_call_and_the_call_it_starts_with_run_their_own_functions(write_tree) -> None:
    root = write_tree({"pools.py": CHAINED})
    captured = _captured(root)
    assert captured["pools.current_pool"] == ["pools.current_pool"]
    assert captured["current_pool().release"] == ["pools.Pool.release"]
