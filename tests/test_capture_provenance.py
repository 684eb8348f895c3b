"""Provenance of captured callables through the ways frameworks hand a user's model along:
keyword arguments forwarded by `**kwargs`, attributes set through `__dict__`, classes picked
into a local before being constructed, classes only named in `isinstance` or annotations,
and a call unpacked into several names. Each keeps the captured callable *outside* (the
user's), which the analysed code only passes on."""

from __future__ import annotations

import json

from conftest import run_cli

ENGINE = """\
import torch


class Engine:
    def __init__(self, model, optimizer=None):
        self._install(model)

    def _install(self, model):
        self.__dict__["model"] = model

    def capture(self, x):
        with torch.cuda.graph(torch.cuda.CUDAGraph()):
            return self.model(x)


class PipeEngine(Engine):
    def __init__(self, stages=1, *args, **kwargs):
        super().__init__(*args, **kwargs)


def is_pipe(engine: "Engine") -> bool:
    return isinstance(engine, (PipeEngine, int))


def initialize(model, pipe=False):
    engine_cls = PipeEngine if pipe else Engine
    return engine_cls(model=model, optimizer=make_optimizer())


def make_optimizer():
    return object()
"""

RUNNER = """\
import torch


class Runner:
    def run(self, model, x):
        graph, out = self._capture(model, x)
        return out

    @staticmethod
    def _capture(model, x):
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = model(x)
        return graph, out
"""


def _statuses(write_tree, files: dict[str, str]) -> dict[int, dict]:
    root = write_tree(files)
    result = run_cli("captures", "--follow-values", "--no-cache", "--format", "json", ".", cwd=root)
    assert result.returncode == 0, result.stderr
    return {r["line"]: r["callables"][0] for r in json.loads(result.stdout)["regions"]}


def test_a_model_forwarded_by_keyword_through_kwargs_and_dict_stores_is_outside(write_tree) -> None:
    found = _statuses(write_tree, {"engine.py": ENGINE})
    called = found[12]
    assert called["status"] == "outside", called
    # only `model=` reaches Engine's `model`: the optimizer the analysed code builds does not
    assert "parameter `model` of `Engine._install`" in called["detail"]


def test_the_same_model_stays_unresolved_once_analysed_code_passes_its_own(write_tree) -> None:
    built = ENGINE + "\n\ndef local_model(x):\n    return x\n\n\nENGINE = initialize(local_model)\n"
    found = _statuses(write_tree, {"engine.py": built})
    assert found[12]["status"] != "outside"


def test_a_call_unpacked_into_two_names_is_one_call_site(write_tree) -> None:
    found = _statuses(write_tree, {"runner.py": RUNNER})
    (called,) = [c for c in found.values()]
    assert called["status"] == "outside"
    assert "parameter `model` of `Runner._capture`" in called["detail"]


GUARDED = """\
import torch
import torch.fx


def graph_pass(gm, example):
    \"\"\"Wraps the module's forward.\"\"\"
    if not isinstance(gm, torch.fx.GraphModule):
        raise TypeError("needs a GraphModule")
    with torch.cuda.graph(torch.cuda.CUDAGraph()):
        gm.forward(*example)


PASSES = {"graph": graph_pass}
"""


def test_a_parameter_an_isinstance_guard_checks_against_a_library_class_is_outside(write_tree) -> None:
    (called,) = _statuses(write_tree, {"passes.py": GUARDED}).values()
    assert called["status"] == "outside"
    assert "an instance of `torch.fx.GraphModule` (checked by isinstance)" in called["detail"]


def test_the_guard_proves_nothing_when_the_project_derives_from_the_class_or_does_not_raise(write_tree) -> None:
    derived = GUARDED + "\n\nclass MyGraph(torch.fx.GraphModule):\n    def forward(self, x):\n        return x\n"
    (called,) = _statuses(write_tree, {"passes.py": derived}).values()
    # PASSES may call it with a MyGraph: the narrowing reaches the project's subclass (the
    # library's own GraphModule runs generated code, outside), so it is not proven outside
    assert (called["status"], called["targets"]) == ("resolved", ["passes.MyGraph.forward"])
    lenient = GUARDED.replace('raise TypeError("needs a GraphModule")', "print('not a GraphModule')")
    (called,) = _statuses(write_tree, {"passes.py": lenient}).values()
    assert called["status"] == "unresolved"


CONFIGURED = """\
import torch


class Model(torch.nn.Module):
    def __init__(self, encoder):
        super().__init__()
        self.encoder = encoder
        self.encoder.forward = torch.compile(self.encoder.forward, mode="reduce-overhead")


def predict(model: Model, x):
    return model(x)
"""


def test_a_class_only_annotated_may_be_built_from_a_config_so_its_arguments_stay_unresolved(write_tree) -> None:
    # Nothing here constructs Model, yet code uses Model instances: a config (Hydra's
    # `_target_`) may build it with the project's own encoder.
    (called,) = _statuses(write_tree, {"model.py": CONFIGURED}).values()
    assert called["status"] == "unresolved"
    alone = CONFIGURED.replace("def predict(model: Model, x):", "def predict(model, x):")
    (called,) = _statuses(write_tree, {"model.py": alone}).values()
    assert called["status"] == "outside"  # a public class nothing here uses: the user builds it
