"""`super(Cls, obj)` with both arguments: the attribute is looked up on what ``obj`` holds,
after ``Cls``; and `super(Cls, module).__call__` on a torch.nn.Module runs the module's forward."""

from __future__ import annotations

from pathlib import Path

import pytest

from graphlint.checkers.machinery.project.callgraph_json import call_graph
from graphlint.config import ConfigResolver
from graphlint.engine import CheckOptions, load_project

SOURCE = """\
import torch


class Base(torch.nn.Module):
    def reset(self):
        pass


class Layer(Base):
    def forward(self, x):
        return x

    def reset(self):
        pass


class Plain:
    def forward(self, x):
        return x


def run(module, plain):
    super(Base, module).__call__(1)
    super(Plain, plain).__call__(1)
    super(Layer, module).reset()
"""


def test_two_argument_super_looks_up_after_the_named_class_on_the_object(write_tree, monkeypatch) -> None:
    root: Path = write_tree({"main.py": SOURCE + "\n\nrun(Layer(), Plain())\n"})
    monkeypatch.chdir(root)
    options = CheckOptions(jobs=1, cache_dir=None, follow_values=True)
    _, project = load_project(["."], ConfigResolver(cwd=root), options)
    called = call_graph(project)["main.run"]
    # Module.__call__ runs Layer's forward; Plain is no Module (object has no __call__ to run);
    # after Layer, `reset` is Base's.
    assert sorted(called) == ["<builtin>.super", "main.Base.reset", "main.Layer.forward"]


def test_without_a_caller_that_passes_an_instance_nothing_is_guessed(
    write_tree, monkeypatch: pytest.MonkeyPatch
) -> None:
    root: Path = write_tree({"main.py": SOURCE})
    monkeypatch.chdir(root)
    _, project = load_project(["."], ConfigResolver(cwd=root), CheckOptions(jobs=1, cache_dir=None, follow_values=True))
    assert call_graph(project)["main.run"] == ["<builtin>.super"]
