"""`graphlint callgraph`: every resolved call as an edge, named as PyCG names functions."""

from __future__ import annotations

import json

from conftest import run_cli

MAIN = """\
from helper import step


class Model:
    def __init__(self):
        self.scale = 2

    def forward(self, x):
        def inner(y):
            return step(y)

        return inner(x) * self.scale


def run(fn, x):
    return fn(x)


model = Model()
model.forward(1)
run(step, 2)


def never_called(fn):
    return fn(3)
"""

HELPER = """\
def step(x):
    return x + 1
"""


def test_callgraph_prints_resolved_edges_in_pycg_shape(write_tree) -> None:
    root = write_tree({"main.py": MAIN, "helper.py": HELPER})
    result = run_cli("callgraph", "--no-cache", ".", cwd=root)
    assert result.returncode == 0, result.stderr
    graph = json.loads(result.stdout)
    assert graph["main"] == ["main.Model.__init__", "main.Model.forward", "main.run"]
    assert graph["main.Model.forward"] == ["main.Model.forward.inner"]  # `<locals>` dropped, as PyCG does
    assert graph["main.Model.forward.inner"] == ["helper.step"]
    assert graph["main.run"] == ["helper.step"]  # `fn(x)`: the value flow knows `run(step, 2)` passes step
    assert graph["main.never_called"] == []  # nothing is passed to `fn`: unresolved, never guessed
    assert graph["helper.step"] == [] and "helper" in graph
