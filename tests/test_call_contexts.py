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


def _findings(root) -> set[tuple[str, int]]:
    result = run_cli("check", "--follow-values", "--no-cache", "--format", "json", "--exit-zero", ".", cwd=root)
    assert result.returncode == 0, result.stderr
    return {(finding["path"].removeprefix("./"), finding["line"]) for finding in json.loads(result.stdout)}


HELPERS = """\
import torch


def direct(compute):
    return compute()


def closure(compute, key=None):
    def keyed():
        return compute()

    return run_once(keyed if key is not None else nothing)


def run_once(fn):
    return fn()


def nothing():
    return None


def forwarded(compute):
    return direct(compute)


def reads_back(x):
    return x.sum().item()


def waits(x):
    torch.cuda.synchronize()
    return x
"""

PIPELINES = """\
from helpers import closure, direct, forwarded, reads_back, waits


def encode(x):
    direct(lambda: reads_back(x))
    forwarded(lambda: reads_back(x))
    return closure(lambda: waits(x), key="enc")
"""

CAPTURED = """\
import torch

from helpers import closure, direct, forwarded


def first(x):
    return x.sum().item()


def second(x):
    return x.max().item()


def third(x):
    return x.min().item()


def capture(x):
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        direct(lambda: first(x))
        closure(lambda: second(x), key="cap")
        forwarded(lambda: third(x))
"""


def test_a_parameter_called_under_a_capture_runs_what_that_call_site_passes(write_tree) -> None:
    root = write_tree({"helpers.py": HELPERS, "pipelines.py": PIPELINES, "captured.py": CAPTURED})
    found = _findings(root)
    assert {("captured.py", 7), ("captured.py", 11), ("captured.py", 15)} <= found, "direct, closure, passed on"
    assert ("helpers.py", 28) not in found and ("helpers.py", 32) not in found, "other callers' lambdas run elsewhere"


ESCAPING = """\
import torch


def logged(fn):
    def wrapper(*args):
        return fn(*args)

    return wrapper


@logged
def reads_back(x):
    return x.sum().item()


def quiet(x):
    return x


def capture(x):
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        reads_back(x)
        logged(quiet)(x)
"""


def test_a_closure_that_leaves_its_function_keeps_every_value(write_tree) -> None:
    root = write_tree({"main.py": ESCAPING})
    assert ("main.py", 13) in _findings(root), "`wrapper` was made at import for `reads_back`, not in the capture"


UNKNOWN = """\
import torch

from helpers import direct


def capture(x, args):
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        direct(*args)
"""


def test_a_site_whose_arguments_the_flow_cannot_place_keeps_every_value(write_tree) -> None:
    root = write_tree({"helpers.py": HELPERS, "pipelines.py": PIPELINES, "captured.py": UNKNOWN})
    assert ("helpers.py", 28) in _findings(root), "`direct(*args)`: any caller's callable may be passed"
