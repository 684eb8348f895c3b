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


PROTOCOL = """\
from typing import Protocol, TypeVar

import torch

T = TypeVar("T")


class Encoder(Protocol):
    def encode(self, x): ...


class Generic(Protocol[T]):
    def encode(self, x): ...


class Counts(Protocol):
    def tick(self): ...

    def tick_twice(self):
        self.tick()
        self.tick()


class Clock(Counts):
    def tick(self):
        return 1


class Runner:
    def __init__(self, model: Encoder, other: Generic):
        self.model = model
        self.other = other

    def capture(self, x):
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            self.model.encode(x)
            self.other.encode(x)
            Clock().tick_twice()
"""


def test_a_protocol_names_no_code_that_runs(write_tree) -> None:
    root = write_tree({"proto.py": PROTOCOL})
    for mode in ((), ("--no-follow-values",)):
        captured = _captured(root, *mode)
        assert captured["proto.Encoder.encode"] == [], "a stub of a Protocol is not what runs"
        assert captured["proto.Generic.encode"] == [], "Protocol[T] is a Protocol too"
        assert captured["proto.Clock.tick_twice"] == ["proto.Counts.tick_twice"], "inherited explicitly: it runs"
    graph = json.loads(run_cli("callgraph", "--no-cache", ".", cwd=root).stdout)
    assert graph["proto.Counts.tick_twice"] == ["proto.Clock.tick"], "`self` is the implementation, not the stub"


def test_a_protocol_is_named_as_the_reason_a_method_is_unresolved(write_tree) -> None:
    root = write_tree({"proto.py": PROTOCOL})
    result = run_cli("captures", "--no-cache", ".", cwd=root)
    assert result.returncode == 0, result.stderr
    assert "`proto.Encoder` is a typing.Protocol" in result.stdout
