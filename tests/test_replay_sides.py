"""A capture does not run a runner's replay side (`flows/replay/replay_sides`, `project/replayers`).

The shape is a serving engine's speculative decoding: a model runner keeps, in one attribute,
either a graph runner (whose `execute` loads the batch into static buffers with host work and
replays through its backend) or an eager runner, chosen by a flag at start-up. The draft model
runner is started with the eager one and its forward is captured by a draft graph runner. The
value flow cannot tell the two instances apart, so without this the draft capture seemed to run
the graph runner's host-side batch loading.
"""

from __future__ import annotations

import ast

import pytest

from conftest import check_json
from graphlint.checkers.machinery.flows.replay.replay_sides import always_replays, named_as_graph

RUNNERS = """\
import torch


class GraphBackend:
    def __init__(self):
        self.graphs = {}
        self.outputs = {}

    def replay(self, key):
        self.graphs[key].replay()
        return self.outputs[key]


class EagerRunner:
    def __init__(self, model):
        self.model = model

    def execute(self, batch):
        return self.model(batch)


class GraphRunner:
    def __init__(self, model):
        self.model = model
        self.backend = GraphBackend()
        self.static_tokens = torch.zeros(64, dtype=torch.long, device="cuda")

    def load_batch(self, batch):
        count = int(batch.lengths.sum().item())
        self.static_tokens[:count].copy_(batch.tokens)
        return count

    def execute(self, batch):
        key = self.load_batch(batch)
        return self.backend.replay(key)


class ModelRunner:
    def __init__(self, model):
        self.model = model
        self.runner = None

    def init_graphs(self, capture_decode=True):
        eager = EagerRunner(self.model)
        self.runner = GraphRunner(self.model) if capture_decode else eager

    def forward(self, batch):
        return self.runner.execute(batch)


class DraftGraphRunner:
    def __init__(self, draft: ModelRunner):
        self.draft = draft
        self.graph = torch.cuda.CUDAGraph()

    def capture(self, batch):
        with torch.cuda.graph(self.graph):
            self.out = self.draft.forward(batch)
"""

MODEL = """\
import torch


class Model(torch.nn.Module):
    def forward(self, batch):
        scale = batch.temperature.max().item()
        return batch.tokens * scale
"""

MAIN = """\
from model import Model
from runners import DraftGraphRunner, ModelRunner


def start(batch):
    target = ModelRunner(Model())
    target.init_graphs()
    draft = ModelRunner(Model())
    draft.init_graphs(capture_decode=False)
    DraftGraphRunner(draft).capture(batch)
    return target.forward(batch)
"""


def _found(root) -> set[tuple[str, str, int]]:
    return {(f["code"], f["path"].removeprefix("./"), f["line"]) for f in check_json("--follow-values", ".", cwd=root)}


def test_the_draft_capture_runs_the_eager_runner_not_the_graph_runners_batch_loading(write_tree) -> None:
    root = write_tree({"runners.py": RUNNERS, "model.py": MODEL, "main.py": MAIN})
    found = _found(root)
    assert ("GL101", "model.py", 6) in found  # the eager path: the model's own sync is captured
    assert not any(path == "runners.py" for _, path, _ in found)  # GraphRunner.load_batch is not


def test_a_replay_that_is_not_a_graphs_is_still_followed(write_tree) -> None:
    """A backend whose `replay` only restores a mode (a dispatch adapter's) replays no graph:
    an `execute` that always calls it is not a replay side."""
    adapter = RUNNERS.replace("        self.graphs[key].replay()\n", "        self.mode = key\n")
    root = write_tree({"runners.py": adapter, "model.py": MODEL, "main.py": MAIN})
    assert ("GL101", "runners.py", 29) in _found(root)


def test_a_wrapper_that_captures_on_its_first_call_is_still_followed(write_tree) -> None:
    """It replays only in one branch; the other captures what it wraps, and that is what an
    outer capture runs through it."""
    wrapper = """\
import torch


class Graphed:
    def __init__(self, fn):
        self.fn = fn
        self.graph = None

    def __call__(self, x):
        if self.graph is None:
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                self.out = self.fn(x)
            return self.out
        self.graph.replay()
        return self.out


def body(x):
    return x * x.sum().item()


def outer(x):
    inner = Graphed(body)
    with torch.cuda.graph(torch.cuda.CUDAGraph()):
        return inner(x)
"""
    root = write_tree({"wrapper.py": wrapper})
    assert ("GL101", "wrapper.py", 20) in _found(root)


def _sides(source: str) -> tuple[bool, list[str]]:
    function = ast.parse(source).body[0]
    assert isinstance(function, ast.FunctionDef)
    replays, delegated = always_replays(function.body, named_as_graph)
    return replays, [ast.unparse(call) for call in delegated]


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("def f(self):\n    self.graph.replay()\n", (True, [])),
        ("def f(self, k):\n    with scope():\n        self._graphs[k].replay()\n", (True, [])),
        ("def f(self):\n    if self.bad:\n        raise ValueError\n    self.graph.replay()\n", (True, [])),
        ("def f(self, e):\n    checkCudaErrors(cudaGraphLaunch(e, 0))\n", (True, [])),
        ("def f(self):\n    try:\n        return self.cudagraph.replay()\n    finally:\n        pass\n", (True, [])),
        ("def f(self, b):\n    if b:\n        self.graph.replay()\n", (False, [])),
        ("def f(self, b):\n    if b:\n        return None\n    self.graph.replay()\n", (False, [])),
        ("def f(self, b):\n    for g in b:\n        g.replay()\n", (False, [])),
        ("def f(self):\n    return lambda: self.graph.replay()\n", (False, [])),
        ("def f(self, b):\n    return b or self.graph.replay()\n", (False, [])),
        (
            "def f(self, k):\n    self.adapter.replay()\n    return self.backend.replay(k)\n",
            (False, ["self.adapter.replay()", "self.backend.replay(k)"]),
        ),
        ("def f(self):\n    def later():\n        return None\n    self.graph.replay()\n", (True, [])),
    ],
)
def test_what_always_replays(source: str, expected: tuple[bool, list[str]]) -> None:
    assert _sides(source) == expected
