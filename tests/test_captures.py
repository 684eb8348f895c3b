"""`graphlint captures`: what graphlint thinks runs inside a graph, as a user reads it."""

from __future__ import annotations

import json

from conftest import run_cli

RUNNER = """\
import torch
from helpers import step
from outside_pkg import kernel_launcher
from outside_pkg import graph_capture as vendor_graph_capture


def graph_process(func, *args):
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        func(*args)
    return g


class Runner:
    def __init__(self, fn):
        self.fn = fn
        self.graph = torch.cuda.CUDAGraph()

    def capture(self, x):
        with torch.cuda.graph(self.graph):
            self.out = self.fn(x)
            step(x)
            kernel_launcher(x)
            torch.matmul(x, x)


def make(x):
    g = torch.cuda.CUDAGraph()
    with vendor_graph_capture(g):
        x.add_(1)


compiled = torch.compile(step, mode="reduce-overhead")
"""

HELPERS = """\
def inner(x):
    return x * 2


def step(x):
    return inner(x) + 1
"""


def _report(write_tree) -> dict:
    root = write_tree({"runner.py": RUNNER, "helpers.py": HELPERS})
    result = run_cli("captures", "--follow-values", "--no-cache", "--format", "json", ".", cwd=root)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_each_region_says_what_it_captures_and_how_far_it_was_followed(write_tree) -> None:
    report = _report(write_tree)
    regions = {(r["line"], r["kind"]): r for r in report["regions"]}
    assert set(regions) == {(9, "CUDA graph"), (20, "CUDA graph"), (33, "compiled cudagraph")}

    (param,) = regions[(9, "CUDA graph")]["callables"]
    assert (param["expression"], param["status"]) == ("func", "outside")
    assert "parameter `func` of `graph_process`, which no analysed code calls" in param["detail"]

    runner = {c["expression"]: c for c in regions[(20, "CUDA graph")]["callables"]}
    assert runner["helpers.step"]["status"] == "resolved" and runner["helpers.step"]["targets"] == ["helpers.step"]
    assert runner["outside_pkg.kernel_launcher"]["status"] == "outside"
    held = runner["runner.Runner.fn"]  # set from Runner(fn), which no analysed code constructs
    assert held["status"] == "outside" and "parameter `fn` of `Runner.__init__`" in held["detail"]
    assert not any("matmul" in name for name in runner), "torch operations are not captured callables"
    assert regions[(20, "CUDA graph")]["functions_reached"] == 2  # step and the inner function it calls
    assert regions[(33, "compiled cudagraph")]["functions_reached"] == 2
    assert report["functions_reached"] == 2


def test_a_capture_like_context_it_cannot_read_comes_with_the_config_that_declares_it(write_tree) -> None:
    (unseen,) = _report(write_tree)["unseen_contexts"]
    assert unseen["line"] == 29
    assert unseen["snippet"] == '[tool.graphlint]\ncapture-entry-points = ["outside_pkg.graph_capture"]'


def test_text_output_names_the_unresolved_expression(write_tree) -> None:
    root = write_tree({"runner.py": RUNNER, "helpers.py": HELPERS})
    result = run_cli("captures", "--follow-values", "--no-cache", ".", cwd=root)
    assert result.returncode == 0, result.stderr
    assert "./runner.py:20: CUDA graph: torch.cuda.graph(self.graph)" in result.stdout
    assert "passed in from outside: `runner.Runner.fn`, set from parameter `fn` of `Runner.__init__`" in result.stdout
    assert "passed in from outside: `func`, parameter `func` of `graph_process`" in result.stdout
    assert "3 capture regions, 2 with a resolved callable, 2 functions reached." in result.stdout


BREAKABLE = """\
import torch
from functools import partial


class Segments:
    def __enter__(self):
        self._begin()
        return self

    def __exit__(self, *exc):
        self._graph.capture_end()

    def _begin(self):
        self._graph = torch.cuda.CUDAGraph()
        self._graph.capture_begin()


def layer(x):
    return x * 2


def run(x, runner, saver):
    with Segments():
        layer(x)
    graph_ctx = partial(saver.cuda_graph) if saver else runner.device_module.graph
    with graph_ctx(cuda_graph=torch.cuda.CUDAGraph()):
        layer(x)
"""


def test_regions_reached_through_values_say_what_they_capture(write_tree) -> None:
    root = write_tree({"breakable.py": BREAKABLE})
    result = run_cli("captures", "--no-cache", "--format", "json", ".", cwd=root)
    assert result.returncode == 0, result.stderr
    regions = {r["line"]: r for r in json.loads(result.stdout)["regions"]}
    assert regions[23]["kind"] == "capture class", "__enter__ begins what __exit__ ends: the with body is captured"
    assert regions[26]["kind"] == "CUDA graph" and regions[26]["label"].startswith("graph_ctx(")
    for line in (23, 26):
        (called,) = regions[line]["callables"]
        assert (called["status"], called["targets"]) == ("resolved", ["breakable.layer"])


def test_without_following_values_a_parameter_says_how_to_follow_it(write_tree) -> None:
    root = write_tree({"runner.py": RUNNER, "helpers.py": HELPERS})
    result = run_cli("captures", "--no-cache", "--format", "json", ".", cwd=root)
    assert result.returncode == 0, result.stderr
    regions = {(r["line"], r["kind"]): r for r in json.loads(result.stdout)["regions"]}
    (param,) = regions[(9, "CUDA graph")]["callables"]
    assert param["status"] == "unresolved" and "`--follow-values` follows it" in param["detail"]


# Two scripts called train.py: the one the runner beside it means gets `train%1`, so its
# compiled step resolves to nothing, although its file is in the run.
SHADOWED_SCRIPTS = {
    "pyproject.toml": "",
    "a/train.py": "def other(x):\n    return x\n",
    "b/train.py": "def step(x):\n    return x.sum().item()\n",
    "b/runner.py": 'import torch\n\nimport train\n\nrun = torch.compile(train.step, mode="reduce-overhead")\n',
}


def test_a_capture_whose_callables_file_was_checked_under_another_name_is_a_warning(write_tree) -> None:
    root = write_tree(SHADOWED_SCRIPTS)
    for _ in range(2):  # cold, then from the result cache
        checked = run_cli("check", ".", cwd=root)
        assert checked.returncode == 0, checked.stderr
        (warning,) = [line for line in checked.stderr.splitlines() if "warning" in line]
        assert "./b/runner.py:5" in warning and "`train.step`" in warning
        assert "./b/train.py is checked (as module `train%1`)" in warning and "./a/train.py" in warning
    assert "warning" not in run_cli("check", ".", "--quiet", cwd=root).stderr
    captures = run_cli("captures", "--no-cache", ".", cwd=root)
    assert "warning: ./b/runner.py:5: the capture's callable `train.step` reaches nothing" in captures.stdout
    report = json.loads(run_cli("captures", "--no-cache", "--format", "json", ".", cwd=root).stdout)
    assert [(w["callable"], w["file"], w["analysed_as"]) for w in report["warnings"]] == [
        ("train.step", "./b/train.py", "train%1")
    ]


def test_a_callable_from_a_module_not_in_the_run_is_no_warning(write_tree) -> None:
    root = write_tree({"b/runner.py": SHADOWED_SCRIPTS["b/runner.py"]})
    assert "warning" not in run_cli("check", "--no-cache", ".", cwd=root).stderr
    assert json.loads(run_cli("captures", "--no-cache", "--format", "json", ".", cwd=root).stdout)["warnings"] == []


LIBRARY_CALLS = """\
import torch


class Runner:
    def __init__(self, model):
        self.model = model
        self.outs = []

    def capture(self, x, items):
        with torch.cuda.graph(torch.cuda.CUDAGraph()):
            z = self.model(x).detach()
            items.append(z)
            self.outs.append(x.view(-1).float())
            self.store.update(z)


class Store:
    def update(self, z):
        pass
"""


def test_library_methods_are_not_listed_as_unresolved_callables(write_tree) -> None:
    root = write_tree({"run.py": LIBRARY_CALLS})
    report = json.loads(run_cli("captures", "--no-cache", "--format", "json", ".", cwd=root).stdout)
    (region,) = report["regions"]
    # `update` is a method of a project class: that call may be it, so it stays listed.
    assert sorted(c["expression"] for c in region["callables"]) == ["run.Runner.model", "self.store.update"]


IDENTITY_HELPER = """\
import torch


def checked(module):
    if not hasattr(module, "forward"):
        raise TypeError(module)
    return module


class Norm(torch.nn.Module):
    def forward(self, x):
        return x


class Router(torch.nn.Module):
    def forward(self, x):
        return x


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm, self.router = Norm(), Router()

    def capture(self, x, outside):
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            checked(self.norm)(x)
        with torch.cuda.graph(g):
            checked(outside)(x)

    def route(self, x):
        return checked(self.router)(x)
"""


def test_a_capture_through_a_helper_that_returns_its_argument_runs_that_argument(write_tree) -> None:
    """The helper hands each call its own argument back: the norm's capture runs the norm, not
    every module the helper is given elsewhere, and a parameter handed through it is still
    reported as coming from outside."""
    root = write_tree({"block.py": IDENTITY_HELPER})
    result = run_cli("captures", "--follow-values", "--no-cache", "--format", "json", ".", cwd=root)
    assert result.returncode == 0, result.stderr
    regions = {r["line"]: r for r in json.loads(result.stdout)["regions"]}
    norm = regions[27]["callables"][0]
    assert (norm["status"], norm["targets"]) == ("resolved", ["block.Norm.forward"])
    outside = regions[29]["callables"][0]
    assert outside["status"] == "outside" and "parameter `outside`" in outside["detail"], outside
