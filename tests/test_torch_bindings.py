"""torch under any binding: a test's `torch = pytest.importorskip("torch")`, a plugin's
`importlib.import_module("torch")`, `__import__`, and a module alias of torch's own modules
(`cuda = torch.cuda`) are torch to the checker, as `import torch` is."""

from __future__ import annotations

import pytest

from conftest import check_json

# GL201's example (`graphlint rule GL201`), in a test that imports torch the pytest way.
REPLAY_TEST = """\
{binding}


def test_replay(loader):
    static_x = torch.zeros(4, device="cuda")
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        static_out = static_x * 2
    results = []
    for batch in loader:
        static_x.copy_(batch)
        g.replay()
        results.append(static_out)
    return results
"""

BINDINGS = {
    "import": "import torch",
    "importorskip": 'import pytest\n\ntorch = pytest.importorskip("torch")',
    "importorskip-from": 'from pytest import importorskip\n\ntorch = importorskip("torch", minversion="2.0")',
    "import_module": 'import importlib\n\ntorch = importlib.import_module("torch")',
    "__import__": 'torch = __import__("torch")',
}


@pytest.mark.parametrize("binding", BINDINGS.values(), ids=BINDINGS.keys())
def test_gl201_is_found_whatever_binds_torch(write_tree, binding: str) -> None:
    source = REPLAY_TEST.format(binding=binding)
    root = write_tree({"test_replay.py": source})
    line = source.splitlines().index("        results.append(static_out)") + 1
    assert [(f["code"], f["line"]) for f in check_json(".", cwd=root)] == [("GL201", line)]


def test_a_module_bound_to_another_library_is_not_torch(write_tree) -> None:
    binding = 'import pytest\n\ntorch = pytest.importorskip("numpy")'
    root = write_tree({"test_replay.py": REPLAY_TEST.format(binding=binding)})
    assert [f["code"] for f in check_json(".", cwd=root) if f["code"] == "GL201"] == []


ALIASED = """\
import torch

cuda = torch.cuda
graph = torch.cuda.graph


def run(x):
    g = cuda.CUDAGraph()
    with graph(g):
        return x.sum().item()
"""


def test_a_module_level_alias_of_torchs_attributes_is_torch(write_tree) -> None:
    root = write_tree({"aliased.py": ALIASED})
    assert [(f["code"], f["line"]) for f in check_json(".", cwd=root)] == [("GL101", 10)]


def test_an_alias_bound_twice_is_not_trusted(write_tree) -> None:
    root = write_tree(
        {"aliased.py": ALIASED.replace("graph = torch.cuda.graph\n", "graph = torch.cuda.graph\ngraph = print\n")}
    )
    assert [f["code"] for f in check_json(".", cwd=root)] == []
