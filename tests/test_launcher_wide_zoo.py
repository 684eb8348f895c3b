"""The wide zoo's same-graph variant (`launcher_wide_zoo.copy_on_launcher_graph`), driven by a
stand-in driver on the CPU: the copy recipe runs on a clone of the launcher's graph template,
instantiated apart and destroyed after timing. Its first GPU run (2026-12-07) lost every row
to a result unwrapped twice; the driver calls' order is what these tests hold."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import launcher_wide_zoo

from graphlint.runtime_sanitizer import driver


class _Driver:
    """The cuda-bindings calls the variant makes: each returns `(status, value)`, as they do."""

    class CUresult:
        CUDA_SUCCESS = 0

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def CUgraph(self, raw: int) -> tuple:
        return ("graph", raw)

    def CUstream(self, raw: int) -> tuple:
        return ("stream", raw)

    def cuGraphClone(self, graph: tuple) -> tuple:
        self.calls.append(("clone", graph))
        return (0, ("clone", graph))

    def cuGraphInstantiate(self, graph: tuple, flags: int) -> tuple:
        self.calls.append(("instantiate", graph))
        return (0, ("executable", graph))

    def cuGraphLaunch(self, executable: tuple, stream: tuple) -> tuple:
        self.calls.append(("launch", executable))
        return (0,)

    def cuGraphExecDestroy(self, executable: tuple) -> tuple:
        self.calls.append(("destroy executable", executable))
        return (0,)

    def cuGraphDestroy(self, graph: tuple) -> tuple:
        self.calls.append(("destroy", graph))
        return (0,)


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> _Driver:
    fake = _Driver()
    monkeypatch.setattr(driver, "bindings", lambda: fake)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda: SimpleNamespace(cuda_stream=7))
    return fake


def _launcher(inputs: list[torch.Tensor], outputs: list[torch.Tensor]) -> SimpleNamespace:
    graph = SimpleNamespace(raw_cuda_graph=lambda: 1234)
    return SimpleNamespace(_capture=SimpleNamespace(graph=graph), kept_static_inputs=inputs, outputs=outputs)


def test_the_copy_recipe_runs_on_a_clone_of_the_launchers_template(fake: _Driver) -> None:
    static_in, static_out = torch.zeros(3), torch.full((2,), 5.0)
    replay, close = launcher_wide_zoo.copy_on_launcher_graph(_launcher([static_in], [static_out]))
    clone = ("clone", ("graph", 1234))
    assert fake.calls == [("clone", ("graph", 1234)), ("instantiate", clone)]

    returned = replay([torch.tensor([1.0, 2.0, 3.0])])
    assert static_in.tolist() == [1.0, 2.0, 3.0]  # copied in
    assert fake.calls[-1] == ("launch", ("executable", clone))
    assert returned[0].tolist() == [5.0, 5.0] and returned[0].data_ptr() != static_out.data_ptr()  # cloned out

    close()
    assert fake.calls[-2:] == [("destroy executable", ("executable", clone)), ("destroy", clone)]
