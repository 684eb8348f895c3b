"""Captured callables the flow cannot resolve: outside only when every source of the value is."""

from __future__ import annotations

import json

from conftest import run_cli

WRAPPER = """\
import torch


class GraphWrapper:
    def __init__(self, step_fn):
        self.step_fn = step_fn
        self.graph = torch.cuda.CUDAGraph()

    def capture(self, x):
        with torch.cuda.graph(self.graph):
            return self.step_fn(x)


def graph_process(func, x):
    with torch.cuda.graph(torch.cuda.CUDAGraph()):
        return func(x)
"""

# The same wrapper, constructed by the analysed code with a value graphlint cannot follow
# (a function of an analysed module looked up by name).
CONSTRUCTED = """\
import plugins
from wrapper import GraphWrapper, graph_process


def build(name):
    return GraphWrapper(getattr(plugins, name))


HANDLERS = {"graph": graph_process}
"""

PLUGINS = """\
def double(x):
    return x * 2
"""

# Constructed with a library module: the callable is torch's, not the project's.
LIBRARY = """\
import torch

from wrapper import GraphWrapper


def build():
    return GraphWrapper(torch.nn.Linear(4, 4))
"""


def _regions(write_tree, files: dict[str, str]) -> list[dict]:
    """The capture regions `graphlint captures --follow-values` reports on a tree of ``files``."""
    result = run_cli("captures", "--follow-values", "--no-cache", "--format", "json", ".", cwd=write_tree(files))
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)["regions"]


def _callables(write_tree, files: dict[str, str]) -> dict[int, dict]:
    regions = _regions(write_tree, files)
    return {r["line"]: r["callables"][0] for r in regions if r["path"].endswith("wrapper.py")}


def test_a_callable_from_a_constructor_no_analysed_code_calls_is_outside(write_tree) -> None:
    found = _callables(write_tree, {"wrapper.py": WRAPPER})
    assert found[10]["status"] == "outside"
    assert "parameter `step_fn` of `GraphWrapper.__init__`, which no analysed code calls" in found[10]["detail"]
    assert found[15]["status"] == "outside" and "`graph_process`, which no analysed code calls" in found[15]["detail"]


def test_a_callable_the_analysed_code_passes_without_graphlint_following_it_stays_unresolved(write_tree) -> None:
    found = _callables(write_tree, {"wrapper.py": WRAPPER, "build.py": CONSTRUCTED, "plugins.py": PLUGINS})
    assert found[10]["status"] == "unresolved", "build() passes a function of plugins.py graphlint cannot name"
    assert found[15]["status"] == "unresolved", "graph_process is stored in a table: any caller may use it"


def test_a_library_object_passed_by_the_analysed_code_is_outside(write_tree) -> None:
    found = _callables(write_tree, {"wrapper.py": WRAPPER, "build.py": LIBRARY})
    assert found[10]["status"] == "outside"
    assert "torch.nn.Linear" in found[10]["detail"]


# A public API that graphs the modules it is given, through a list and a helper's return.
GRAPHED = """\
import torch


def _warm(func, x):
    return func(x)


def graph_all(modules, x):
    funcs = []
    for module in modules:
        funcs.append(module)
    for func in funcs:
        _warm(func, x)
        with torch.cuda.graph(torch.cuda.CUDAGraph()):
            func(x)
"""


def test_modules_a_public_function_is_given_stay_outside_through_lists_and_loops(write_tree) -> None:
    (region,) = _regions(write_tree, {"wrapper.py": GRAPHED})
    (called,) = region["callables"]  # `torch.cuda.CUDAGraph()` is an operation, not a captured callable
    assert called["status"] == "outside"
    assert "parameter `modules` of `graph_all`, which no analysed code calls" in called["detail"]


def test_a_module_constant_does_not_break_the_provenance_index(write_tree) -> None:
    # A module-level constant is recorded as a ("K", location, key) fact, whose location is a
    # plain string: read as an expression, a module named `c...` looked like a call.
    source = "VERBOSE = False\n\n\n" + WRAPPER
    statuses = [c["status"] for r in _regions(write_tree, {"config_wrapper.py": source}) for c in r["callables"]]
    assert statuses == ["outside", "outside"]


# A public API that graphs what it is given, through a queue of (index, callable, output)
# triples and a loop over zip: each name unpacked holds its own position's source.
QUEUED = """\
import torch


def graph_queued(modules, inputs):
    pending = []
    for index, (module, x) in enumerate(zip(modules, inputs)):
        pending.append((index, module, module(x)))
    while pending:
        index, module, out = pending.pop()
        with torch.cuda.graph(torch.cuda.CUDAGraph()):
            module(out)
"""


def test_a_callable_unpacked_from_a_queue_of_tuples_is_outside_by_its_own_source(write_tree) -> None:
    (region,) = _regions(write_tree, {"wrapper.py": QUEUED})
    (called,) = region["callables"]
    assert called["status"] == "outside"
    assert "parameter `modules` of `graph_queued`, which no analysed code calls" in called["detail"]
