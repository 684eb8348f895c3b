"""Duck typing under a capture: `if hasattr(module, "need_dw"): module.backward_dw()` runs
`backward_dw` of the project classes that have `need_dw` (Transformer Engine's delayed
weight-gradient graph is written so). The test shows it only where it holds: in the branch, in
the rest of a block after `if not hasattr(...): continue`, and not past either; an attribute
that many classes have says too little and leaves the call unresolved."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import run_cli


def _reach(root: Path, monkeypatch: pytest.MonkeyPatch) -> set[str]:
    from graphlint.config import ConfigResolver
    from graphlint.engine import CheckOptions, load_project

    monkeypatch.chdir(root)
    _, project = load_project(["."], ConfigResolver(cwd=root), CheckOptions(jobs=1, cache_dir=None))
    return set(project.capture_reach())


CLASSES = """\
class Delayed:
    def need_dw(self):
        return True

    def backward_dw(self):
        return None


class DelayedLinear(Delayed):
    def backward_dw(self):
        return None


class Logger:
    def backward_dw(self):
        return None
"""

GUARDED = """\
import torch


def in_branch(modules, g):
    with torch.cuda.graph(g):
        for m in modules:
            if hasattr(m, "need_dw") and m.need_dw():
                m.backward_dw()


def after_the_branch(modules, g):
    with torch.cuda.graph(g):
        for m in modules:
            if hasattr(m, "need_dw"):
                pass
            m.backward_dw()
"""


def test_a_hasattr_test_runs_the_method_of_the_classes_with_the_attribute(write_tree, monkeypatch) -> None:
    root = write_tree({"mods.py": CLASSES, "graphs.py": GUARDED})
    reach = _reach(root, monkeypatch)
    assert {"mods.Delayed.need_dw", "mods.Delayed.backward_dw", "mods.DelayedLinear.backward_dw"} <= reach
    assert "mods.Logger.backward_dw" not in reach


def test_the_fact_ends_with_its_branch(write_tree, monkeypatch) -> None:
    only_after = "import torch\n\n\ndef after_the_branch" + GUARDED.split("def after_the_branch")[1]
    root = write_tree({"mods.py": CLASSES, "graphs.py": only_after})
    assert not any(name.startswith("mods.") for name in _reach(root, monkeypatch))


def test_an_early_continue_shows_the_attribute_to_the_rest_of_the_block(write_tree, monkeypatch) -> None:
    source = """\
import torch


def skipping(modules, g):
    with torch.cuda.graph(g):
        for m in modules:
            if not hasattr(m, "need_dw"):
                continue
            m.backward_dw()
        for m in modules:
            m.backward_dw()
"""
    root = write_tree({"mods.py": CLASSES, "graphs.py": source})
    reach = _reach(root, monkeypatch)
    assert "mods.DelayedLinear.backward_dw" in reach and "mods.Logger.backward_dw" not in reach
    text = run_cli("captures", "--no-cache", ".", cwd=root).stdout
    assert "runs m.backward_dw -> mods.Delayed.backward_dw, mods.DelayedLinear.backward_dw" in text
    assert "unresolved: `m.backward_dw`" in text  # the second loop: nothing known of m


def test_an_attribute_many_classes_have_says_too_little(write_tree, monkeypatch) -> None:
    many = "".join(
        f"class C{i}:\n    def reset(self):\n        pass\n\n    def step(self):\n        pass\n\n\n" for i in range(40)
    )
    source = """\
import torch


def graphed(objects, g):
    with torch.cuda.graph(g):
        for obj in objects:
            if hasattr(obj, "reset"):
                obj.step()
"""
    root = write_tree({"many.py": many, "graphs.py": source})
    assert not any(name.startswith("many.") for name in _reach(root, monkeypatch))
