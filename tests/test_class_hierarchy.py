"""Class-hierarchy reach: what runs when the value flow holds "an instance of C" whose real
class may be any project subclass (``self`` in a method of a class others derive from, a
parameter an `isinstance` test narrows). The shapes are those of the frameworks: layers
built from specs reach the runner only as ``self`` of their base's ``__call__`` (Megatron),
modules met in a forward hook narrowed by type (Transformer Engine)."""

from __future__ import annotations

import pytest

from conftest import followed_call_graph
from graphlint.checkers.machinery.values.value_flow import MAX_DECLARED, MAX_VALUES


def _graph(write_tree, monkeypatch: pytest.MonkeyPatch, files: dict[str, str]) -> dict[str, list[str]]:
    return followed_call_graph(write_tree(files), monkeypatch)


SPEC_BUILT = """\
import torch


class Runner:
    def __init__(self, module):
        self.func = super(Graphable, module).__call__

    def capture(self, x):
        return self.func(x)


class Graphable(torch.nn.Module):
    def __call__(self, x):
        return Runner(self).capture(x)


class Attention(Graphable):
    def forward(self, x):
        return x


class Mlp(Graphable):
    def forward(self, x):
        return x


class Unrelated(torch.nn.Module):
    def forward(self, x):
        return x


def build(spec):
    return spec.module()  # the class comes from a config: no instance the flow can follow
"""


def test_self_in_a_base_method_may_be_any_subclass(write_tree, monkeypatch) -> None:
    graph = _graph(write_tree, monkeypatch, {"layers.py": SPEC_BUILT})
    # Module.__call__ after Graphable runs each graphable subclass's forward; never Unrelated's.
    assert sorted(graph["layers.Runner.capture"]) == ["layers.Attention.forward", "layers.Mlp.forward"]


HOOKED = """\
class Base:
    def backward_dw(self):
        pass


class Grouped(Base):
    def backward_dw(self):
        pass


class Plain(Base):
    pass


class Op:
    def backward_dw(self):
        pass


class Fused(Op):
    pass


def make(model):
    seen = {}

    def hook(module, inputs, index=0):
        found = set()
        if isinstance(module, (Base,)):
            found.add(module)
        elif isinstance(module, Op) and module.enabled:
            found.add(module)
        elif isinstance(module, int):
            found.add(module)
        seen[index] = found

    model.register_forward_hook(hook)
    for module in seen[0]:
        module.backward_dw()
"""


def test_an_isinstance_test_narrows_a_parameter_to_the_class_and_its_subclasses(write_tree, monkeypatch) -> None:
    graph = _graph(write_tree, monkeypatch, {"hooks.py": HOOKED})
    # Plain inherits Base's; Fused inherits Op's; `int` is no project class and adds nothing.
    assert sorted(c for c in graph["hooks.make"] if c.startswith("hooks.")) == [
        "hooks.Base.backward_dw",
        "hooks.Grouped.backward_dw",
        "hooks.Op.backward_dw",
    ]


def test_a_class_nothing_derives_from_keeps_its_own_methods(write_tree, monkeypatch) -> None:
    source = "class A:\n    def run(self):\n        self.step()\n\n    def step(self):\n        pass\n\n\nA().run()\n"
    assert _graph(write_tree, monkeypatch, {"main.py": source})["main.A.run"] == ["main.A.step"]


def test_an_override_in_a_subclass_is_what_self_may_run(write_tree, monkeypatch) -> None:
    source = (
        "class A:\n    def run(self):\n        self.step()\n\n    def step(self):\n        pass\n\n\n"
        "class B(A):\n    def step(self):\n        pass\n"
    )
    assert sorted(_graph(write_tree, monkeypatch, {"main.py": source})["main.A.run"]) == ["main.A.step", "main.B.step"]


def test_too_many_overrides_are_unresolved_rather_than_a_fan_out(write_tree, monkeypatch) -> None:
    subclasses = "".join(f"class S{i}(A):\n    def step(self):\n        pass\n\n\n" for i in range(MAX_VALUES + 1))
    source = "class A:\n    def run(self):\n        self.step()\n\n    def step(self):\n        pass\n\n\n" + subclasses
    # `!A` alone still names A.step; the cone's MAX_VALUES + 2 methods are too many to call through.
    assert _graph(write_tree, monkeypatch, {"main.py": source})["main.A.run"] == ["main.A.step"]


def test_a_late_import_inside_a_function_binds_the_imported_name(write_tree, monkeypatch) -> None:
    files = {
        "pkg/__init__.py": "",
        "pkg/mgr.py": "class Manager:\n    def __call__(self, x):\n        return x\n",
        "pkg/mod.py": (
            "class Holder:\n    def __init__(self):\n        from pkg.mgr import Manager\n"
            "        self.manager = Manager()\n\n    def run(self, x):\n        return self.manager(x)\n"
        ),
    }
    assert _graph(write_tree, monkeypatch, files)["pkg.mod.Holder.run"] == ["pkg.mgr.Manager.__call__"]


def test_an_empty_set_call_is_a_container_what_is_added_to_it_comes_back(write_tree, monkeypatch) -> None:
    source = "def f():\n    pass\n\n\ndef run():\n    fs = set()\n    fs.add(f)\n    for g in fs:\n        g()\n"
    assert _graph(write_tree, monkeypatch, {"main.py": source})["main.run"] == ["<builtin>.set", "main.f"]


PROTOCOL_IMPLEMENTED = """\
from typing import Protocol


class Encodes(Protocol):
    def encode(self, x): ...


class Text(Encodes):
    def encode(self, x):
        return x


class Image(Encodes):
    def encode(self, x):
        return x


class Manager:
    def __init__(self, model: Encodes):
        self.model = model

    def capture(self, x):
        return self.model.encode(x)
"""


def test_a_protocol_annotation_holds_the_classes_that_implement_it_by_name(write_tree, monkeypatch) -> None:
    graph = _graph(write_tree, monkeypatch, {"main.py": PROTOCOL_IMPLEMENTED})
    # never the Protocol's stub: each implementation that names the Protocol among its bases
    assert sorted(graph["main.Manager.capture"]) == ["main.Image.encode", "main.Text.encode"]


GENERATED = """\
import torch


class Codegen(torch.fx.GraphModule):
    def reload(self):
        def forward_wrapper(self, *args):
            return self.helper(*args)

        self.forward = forward_wrapper.__get__(self, type(self))

    def helper(self, *args):
        return args


class Wrapper:
    def __init__(self, runnable):
        self.runnable = runnable

    def __call__(self, *args):
        return self.runnable(*args)


def graph_pass(gm):
    if not isinstance(gm, torch.fx.GraphModule):
        raise TypeError("a GraphModule is needed")
    gm.forward = Wrapper(gm.forward)
    return gm
"""


def test_a_library_class_narrowing_reaches_the_project_classes_derived_from_it(write_tree, monkeypatch) -> None:
    # torchtitan's cudagraph pass: a GraphModule (generated code, outside) or the project's
    # own subclass, whose forward is a function bound with `__get__`.
    graph = _graph(write_tree, monkeypatch, {"passes.py": GENERATED})
    assert graph["passes.Wrapper.__call__"] == ["passes.Codegen.reload.forward_wrapper"]
    assert graph["passes.Codegen.reload.forward_wrapper"] == ["passes.Codegen.helper"]


def _implementations(count: int) -> str:
    classes = "".join(f"class M{i}(Encodes):\n    def encode(self, x):\n        return x\n\n\n" for i in range(count))
    return PROTOCOL_IMPLEMENTED.replace("class Text(Encodes)", classes + "class Text(Encodes)")


def test_a_declared_type_fans_out_further_than_self_but_not_without_bound(write_tree, monkeypatch) -> None:
    # vLLM's SupportsEncoderCudaGraph has 21 implementations: each may be what a capture runs.
    many = _graph(write_tree, monkeypatch, {"main.py": _implementations(MAX_VALUES)})["main.Manager.capture"]
    assert len(many) == MAX_VALUES + 2
    assert _graph(write_tree, monkeypatch, {"main.py": _implementations(MAX_DECLARED)})["main.Manager.capture"] == []
