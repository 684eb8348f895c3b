"""The project's call graph: one networkx graph that the findings, their call paths and the
`graphlint callgraph` export all read, and the typed call targets it is built from."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from graphlint.checkers.machinery.core.call_targets import FunctionTarget, InstanceCall, MethodTarget, ParamCall
from graphlint.checkers.machinery.core.model import COMPILE, GRAPH
from graphlint.checkers.machinery.project.call_graph import CaptureRoot
from graphlint.checkers.machinery.project.callgraph_json import call_graph
from graphlint.checkers.machinery.project.phase import Project
from graphlint.config import ConfigResolver
from graphlint.engine import CheckOptions, check, load_project

BOUND = """\
import torch


class Model:
    def forward(self, x):
        return x.sum().item()


class Other:
    def forward(self, x):
        return x.sum().item()


def step(model, x):
    return model(x)


g = torch.cuda.CUDAGraph()
model = Model()
x = torch.zeros(4, device="cuda")
with torch.cuda.graph(g):
    y = step(model, x)
step(Other(), x)
"""

SHORTEST = """\
import torch


def sink(x):
    return x.sum().item()


def far(x):
    return middle(x)


def middle(x):
    return sink(x)


def near(x):
    return sink(x)


g = torch.cuda.CUDAGraph()
x = torch.zeros(4, device="cuda")
with torch.cuda.graph(g):
    far(x)
    near(x)
"""

BOTH_KINDS = """\
import torch


def sink(x):
    return x.sum().item()


def inner(x):
    return sink(x)


def middle(x):
    return inner(x)


@torch.compile(mode="reduce-overhead")
def compiled(x):
    return sink(x)


g = torch.cuda.CUDAGraph()
x = torch.zeros(4, device="cuda")
with torch.cuda.graph(g):
    middle(x)
"""


def _project(root: Path, monkeypatch: pytest.MonkeyPatch) -> Project:
    monkeypatch.chdir(root)
    _, project = load_project(["."], ConfigResolver(cwd=root), CheckOptions(jobs=1, cache_dir=None))
    return project


def _gl101(root: Path) -> dict[int, tuple[str, list[int]]]:
    """GL101 findings by line (a full check run): message and the lines of the call path."""
    found = [f for f in check(["."], ConfigResolver(cwd=root), CheckOptions()).findings if f.code == "GL101"]
    return {f.line: (f.message, [site.line for site in f.call_path]) for f in found}


def test_a_parameter_call_is_an_edge_to_the_class_captured_code_passes(write_tree, monkeypatch) -> None:
    root = write_tree({"main.py": BOUND})
    project = _project(root, monkeypatch)
    graph = project.call_graph.graph
    assert graph.has_edge("main.step", "main.Model.forward")
    assert graph.edges["main.step", "main.Model.forward"]["bound"] is True
    assert graph.edges["main.step", "main.Model.forward"]["line"] == 15
    # `step(Other(), x)` runs outside the capture: no binding flows from it.
    assert not graph.has_edge("main.step", "main.Other.forward")
    found = _gl101(root)
    assert set(found) == {6} and found[6][1] == [22, 15]  # Other.forward (line 11) is not in capture
    assert call_graph(project)["main.step"] == ["main.Model.forward"]


def test_the_call_path_shown_is_the_shortest_whatever_the_call_order(write_tree, monkeypatch) -> None:
    root = write_tree({"main.py": SHORTEST})
    project = _project(root, monkeypatch)
    assert _gl101(root)[5][1] == [24, 17]  # near(x), then sink(x): not far -> middle -> sink
    assert [site.line for site in project.capture_reach()["main.middle"].path] == [23, 9]


def test_a_function_in_a_graph_capture_and_a_compiled_one_reports_the_graph_capture(write_tree, monkeypatch) -> None:
    root = write_tree({"main.py": BOTH_KINDS})
    project = _project(root, monkeypatch)
    reach = project.capture_reach()
    assert reach["main.compiled"].kind == COMPILE and reach["main.compiled"].path == ()
    assert reach["main.sink"].kind == GRAPH  # three calls from the graph capture, one from the compiled region
    assert [site.line for site in reach["main.sink"].path] == [24, 13, 9]
    message, _ = _gl101(root)[5]
    assert "torch.compile" not in message


def test_capture_roots_are_in_the_graph_but_not_in_the_export(write_tree, monkeypatch) -> None:
    project = _project(write_tree({"main.py": BOTH_KINDS}), monkeypatch)
    graph = project.call_graph.graph
    assert set(graph.successors(CaptureRoot(GRAPH))) == {"main.middle"}
    assert graph.edges[CaptureRoot(COMPILE), "main.compiled"]["weight"] == 0  # captured whole: no call hop
    assert set(call_graph(project)) == {"main", "main.sink", "main.inner", "main.middle", "main.compiled"}


def test_call_targets_are_distinct_by_kind_and_pickle_as_class_and_fields() -> None:
    assert FunctionTarget("pkg.f") != ParamCall("pkg.f")
    assert len({FunctionTarget("pkg.C"), InstanceCall("pkg.C"), FunctionTarget("pkg.C")}) == 2
    target = MethodTarget("pkg.Runner", "step")
    assert pickle.loads(pickle.dumps(target)) == target
    assert b"pkg.Runner" in pickle.dumps(target) and b"__dict__" not in pickle.dumps(target)
    assert not hasattr(target, "__dict__")
