"""A factory that switches on an argument's type returns, to each caller, only what that type
gets (`values/return_guards.py`), with values followed.

The shape is SGLang's quantisation configs: `get_quant_method(self, layer)` returns a linear
method under `isinstance(layer, LinearBase)` and an MoE method under `isinstance(layer, MoE)`,
each layer stores `config.get_quant_method(self)` and calls its `apply` in `forward`. A captured
linear layer runs the linear method only; a captured MoE layer still runs the MoE one.
"""

from __future__ import annotations

import json

from conftest import run_cli

FACTORY = """\
import torch


class LinearMethod:
    def apply(self, layer, x):
        return x @ layer.weight


class MoEMethod:
    def apply(self, layer, x):
        counts = layer.router(x).argmax(-1).bincount()
        return x * counts.max().item()


class Config:
    def get_quant_method(self, layer):
        if isinstance(layer, LinearBase):
            return LinearMethod()
        elif isinstance(layer, MoE):
            return MoEMethod()
        return None


class LinearBase(torch.nn.Module):
    def __init__(self, config):
        super().__init__()
        self.quant_method = config.get_quant_method(self)

    def forward(self, x):
        return self.quant_method.apply(self, x)


class ColumnLinear(LinearBase):
    pass


class MoE(torch.nn.Module):
    def __init__(self, config, experts=4):
        super().__init__()
        self.experts = experts
        self.router = torch.nn.Linear(8, experts)
        self.quant_method = config.get_quant_method(self)

    def forward(self, hidden):
        routed = self.quant_method.apply(self, hidden)
        return routed / self.experts


def capture(layer, x):
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        layer(x)


capture(ColumnLinear(Config()), torch.randn(8, 8, device="cuda"))
"""

CAPTURE_MOE = """
capture(MoE(Config()), torch.randn(8, 8, device="cuda"))
"""


def _findings(root) -> list[tuple[str, int]]:
    result = run_cli("check", "--format", "json", "--exit-zero", "--no-cache", "--follow-values", ".", cwd=root)
    assert result.returncode == 0, result.stderr
    return [(f["code"], f["line"]) for f in json.loads(result.stdout)]


def test_a_captured_linear_layer_does_not_run_the_method_the_factory_gives_moe_layers(write_tree) -> None:
    root = write_tree({"layers.py": FACTORY})
    assert _findings(root) == []


def test_a_captured_moe_layer_still_runs_its_own_method(write_tree) -> None:
    root = write_tree({"layers.py": FACTORY + CAPTURE_MOE})
    assert ("GL101", 12) in _findings(root)


def test_a_factory_that_does_not_test_the_type_still_gives_every_caller_both(write_tree) -> None:
    untested = FACTORY.replace("isinstance(layer, LinearBase)", "layer.kind == 'linear'").replace(
        "isinstance(layer, MoE)", "layer.kind == 'moe'"
    )
    root = write_tree({"layers.py": untested})
    assert ("GL101", 12) in _findings(root)
