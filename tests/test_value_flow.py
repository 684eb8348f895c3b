"""The value flow of callables: which functions a call runs when the callee is a value that
was stored, passed, returned or decorated (`value_facts` records, `value_flow` solves)."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from conftest import followed_call_graph
from graphlint.checkers.machinery.project.callgraph_json import call_graph
from graphlint.config import ConfigResolver
from graphlint.engine import CheckOptions, load_project


def _graph(write_tree, monkeypatch: pytest.MonkeyPatch, files: dict[str, str]) -> dict[str, list[str]]:
    return followed_call_graph(write_tree(files), monkeypatch)


HELD = """\
import functools


def target(x):
    return x


def other(x):
    return x


class Holder:
    def __init__(self, func):
        self.func = func

    def run(self, x):
        return self.func(x)


def make():
    def made(x):
        return x

    return made


def apply(fn, x):
    return fn(x)


class Model:
    def loss(self, x):
        return x


Holder(target).run(1)
part = functools.partial(other, 2)
part()
made = make()
made(3)
apply(Model().loss, 4)
table = {"a": target}
table["a"](5)
"""


def test_a_callable_stored_passed_returned_or_held_in_a_container_is_followed(write_tree, monkeypatch) -> None:
    graph = _graph(write_tree, monkeypatch, {"main.py": HELD})
    assert graph["main.Holder.run"] == ["main.target"]  # self.func set in __init__
    assert graph["main.apply"] == ["main.Model.loss"]  # a bound method passed as an argument
    assert {"main.other", "main.make.made", "main.target"} <= set(graph["main"])  # partial, factory, dict
    assert "functools.partial" in graph["main"]  # a call outside the project is a leaf


DECORATED = """\
def keeps(f):
    return f


def wraps(f):
    def wrapper():
        return f()

    return wrapper


@keeps
def plain():
    pass


@wraps
def wrapped():
    pass


def caller():
    plain()
    wrapped()
"""


def test_a_decorator_that_returns_a_new_function_redirects_the_call(write_tree, monkeypatch) -> None:
    graph = _graph(write_tree, monkeypatch, {"main.py": DECORATED})
    assert graph["main.caller"] == ["main.plain", "main.wraps.wrapper"]
    assert graph["main.wraps.wrapper"] == ["main.wrapped"]
    assert graph["main"] == ["main.keeps", "main.wraps"]  # decorators run where the function is defined


MRO = """\
class Base:
    def __init__(self):
        self.hook = self.default

    def default(self):
        pass

    def step(self):
        self.hook()


class Child(Base):
    def __init__(self):
        super().__init__()
        self.hook = self.custom

    def custom(self):
        pass


Child().step()
"""


def test_super_and_attributes_follow_the_instance_class(write_tree, monkeypatch) -> None:
    graph = _graph(write_tree, monkeypatch, {"main.py": MRO})
    assert graph["main.Child.__init__"] == ["<builtin>.super", "main.Base.__init__"]
    assert graph["main.Base.step"] == ["main.Base.default", "main.Child.custom"]


FACTORY = """\
class Runner:
    @classmethod
    def make(cls):
        return cls()

    def run(self):
        pass


class Fast(Runner):
    def run(self):
        pass


def main():
    Fast.make().run()
"""


def test_a_classmethod_called_on_a_subclass_builds_that_subclass(write_tree, monkeypatch) -> None:
    """`Fast.make()` binds `cls` to `Fast` though `make` is defined on `Runner`: what it builds
    runs `Fast.run`."""
    graph = _graph(write_tree, monkeypatch, {"main.py": FACTORY})
    assert "main.Fast.run" in graph["main.main"]


ANNOTATED = {
    "model.py": """\
class Transformer:
    def forward(self, x):
        return x
""",
    "generate.py": """\
from model import Transformer


def decode(model: Transformer, x):
    return model(x)


def unknown(model, x):
    return model(x)
""",
}


def test_an_annotation_names_the_class_and_nothing_is_guessed_without_one(write_tree, monkeypatch) -> None:
    graph = _graph(write_tree, monkeypatch, ANNOTATED)
    assert graph["generate.decode"] == ["model.Transformer.forward"]
    assert graph["generate.unknown"] == []


STARRED = """\
def target(*args):
    pass


def run(args):
    unknown(*args)(1)
    target(*[target])
"""


def test_starred_arguments_anywhere_are_followed(write_tree, monkeypatch) -> None:
    """`unknown(*args)`: a starred argument of a call nothing resolves is still evaluated."""
    graph = _graph(write_tree, monkeypatch, {"main.py": STARRED})
    assert graph["main.run"] == ["main.target"]


REBOUND = """\
def first():
    pass


def second():
    pass


f = first
f = second
f()


def later():
    f()
"""


def test_a_name_rebound_at_top_level_calls_what_it_holds_at_that_point(write_tree, monkeypatch) -> None:
    graph = _graph(write_tree, monkeypatch, {"main.py": REBOUND})
    assert graph["main"] == ["main.second"]
    assert graph["main.later"] == ["main.first", "main.second"]  # runs later: either, context-insensitive


def test_a_warm_run_follows_the_same_values(write_tree, monkeypatch, tmp_path) -> None:
    """The project phase solves from the cached summaries alone: a warm run, which parses
    nothing, must give the same graph."""
    root: Path = write_tree({"main.py": HELD})
    monkeypatch.chdir(root)
    options = CheckOptions(jobs=1, cache_dir=tmp_path / "cache", follow_values=True)
    cold = call_graph(load_project(["."], ConfigResolver(cwd=root), options)[1])
    _, warm_project = load_project(["."], ConfigResolver(cwd=root), options)
    assert call_graph(warm_project) == cold
    (summary,) = warm_project.summaries.values()
    restored = pickle.loads(pickle.dumps(summary))
    assert restored.flow and restored.flow == summary.flow


CONTAINERS = """\
from settings import CHOSEN


def first():
    pass


def second():
    pass


def third():
    pass


table = {"a": first, 1: second, "1": third}
table["a"]()
table[1]()
table[True]()


def by_key():
    table["1"]()


pair = [[first], second]
pair[0][0]()


def by_position():
    pair[1]()


trio = [first, second, third]
tail = trio[1:3]


def from_slice():
    tail[0]()


def by_constant():
    trio[CHOSEN]()


def by_unknown(key):
    trio[key]()


handlers = {"go": third}
handlers.update({"stop": first}, run=second)


def stop():
    handlers["stop"]()


def run():
    handlers["run"]()


def each():
    for fn in handlers.values():
        fn()
"""


def test_a_container_holds_its_values_per_constant_key(write_tree, monkeypatch) -> None:
    graph = _graph(write_tree, monkeypatch, {"main.py": CONTAINERS, "settings.py": "CHOSEN = 2\n"})
    assert graph["main"] == ["main.first", "main.second"]
    assert graph["main.by_key"] == ["main.third"]
    assert graph["main.by_position"] == ["main.second"]
    assert graph["main.from_slice"] == ["main.second"]
    assert graph["main.by_constant"] == ["main.third"]
    assert graph["main.by_unknown"] == ["main.first", "main.second", "main.third"]
    assert graph["main.stop"] == ["main.first"]
    assert graph["main.run"] == ["main.second"]
    assert graph["main.each"] == ["main.first", "main.second", "main.third"]


MOVED = """\
import random

from settings import CHOSEN


def first():
    pass


def second():
    pass


popped = [first, second]
popped.pop(0)


def after_pop():
    popped[0]()


shuffled = [first, second]
random.shuffle(shuffled)


def after_shuffle():
    shuffled[0]()


counted = [first, second]
print(len(counted))


def after_len():
    counted[0]()


def later_index():
    counted[CHOSEN]()


def first_of(items):
    a, *rest = items
    a()
    for fn in rest:
        fn()


first_of(counted)
"""


def test_a_list_whose_positions_may_move_reads_every_position(write_tree, monkeypatch) -> None:
    graph = _graph(
        write_tree,
        monkeypatch,
        {"main.py": MOVED, "settings.py": "CHOSEN = 0\n", "other.py": "import settings\n\nsettings.CHOSEN = 1\n"},
    )
    assert graph["main.after_pop"] == ["main.first", "main.second"]
    assert graph["main.after_shuffle"] == ["main.first", "main.second"]
    assert graph["main.after_len"] == ["main.first"]
    # another module stores to the constant: the index is unknown
    assert graph["main.later_index"] == ["main.first", "main.second"]
    assert graph["main.first_of"] == ["main.first", "main.second"]


STORED = """\
def first():
    pass


def second():
    pass


def wrap(fn):
    def wrapped():
        return fn()

    return wrapped


def log():
    pass


class Trainer:
    def __init__(self):
        self.step = first
        self.step = wrap(self.step)
        self.step()

    def later(self):
        self.step()


def replaced():
    d = {"a": {"b": first}}
    d["a"]["b"] = second
    d["a"]["b"]()


def updated():
    d = {"a": first}
    d.update({"a": second})
    d["a"]()


def after_a_call(other):
    d = {"a": first}
    d["a"] = second
    log()
    d["a"]()


def in_a_branch(flag):
    d = {"a": first}
    if flag:
        d["a"] = second
    d["a"]()
"""


def test_a_read_right_after_a_store_sees_only_the_stored_value(write_tree, monkeypatch) -> None:
    graph = _graph(write_tree, monkeypatch, {"main.py": STORED})
    assert graph["main.Trainer.__init__"] == ["main.wrap", "main.wrap.wrapped"]
    assert graph["main.Trainer.later"] == ["main.first", "main.wrap.wrapped"]  # elsewhere: either
    assert graph["main.replaced"] == ["main.second"]
    assert graph["main.updated"] == ["main.second"]
    # a call in between may change the dict; a branch may not have run
    assert graph["main.after_a_call"] == ["main.first", "main.log", "main.second"]
    assert graph["main.in_a_branch"] == ["main.first", "main.second"]


EVALUATED = """\
def first():
    pass


def second():
    pass


def run():
    eval("first()")
    exec("second()\\nx = 1")


def namespaced():
    eval("first()", {})


def broken():
    eval("first(")
"""


def test_a_constant_string_passed_to_eval_or_exec_calls_what_it_names(write_tree, monkeypatch) -> None:
    graph = _graph(write_tree, monkeypatch, {"main.py": EVALUATED})
    assert graph["main.run"] == ["<builtin>.eval", "<builtin>.exec", "main.first", "main.second"]
    assert graph["main.namespaced"] == ["<builtin>.eval"]  # its own globals: not the caller's names
    assert graph["main.broken"] == ["<builtin>.eval"]


WRAPPED = """\
def body():
    pass


def wrap(fn):
    def wrapped():
        return fn()

    return wrapped


class Trainer:
    def __init__(self, graphs):
        self.step = self.body
        if graphs:
            self.step = wrap(self.step)

    def body(self):
        pass

    def train(self):
        self.step()
"""


def test_a_wrapper_applied_in_a_branch_wraps_what_was_stored_just_before(write_tree, monkeypatch) -> None:
    graph = _graph(write_tree, monkeypatch, {"main.py": WRAPPED})
    assert graph["main.wrap.wrapped"] == ["main.Trainer.body"]  # never its own result
    assert graph["main.Trainer.train"] == ["main.Trainer.body", "main.wrap.wrapped"]


KEYS = """\
NAME = "go"


def first():
    pass


def second():
    pass


pair = (first, second)
pair[-1]()
named = {NAME: first, "stop": second}


def by_name():
    named["go"]()
"""


def test_a_negative_index_reads_every_position_and_a_constant_name_is_its_value(write_tree, monkeypatch) -> None:
    graph = _graph(write_tree, monkeypatch, {"main.py": KEYS})
    assert graph["main"] == ["main.first", "main.second"]
    assert graph["main.by_name"] == ["main.first"]


WEAK = """\
import weakref


class Owner:
    def __init__(self):
        proxy = weakref.proxy(self)
        ref = weakref.ref(self)

        def through_proxy():
            return proxy.step()

        def through_ref():
            return ref.step()

        self.calls = (through_proxy, through_ref)

    def step(self):
        return 1
"""


def test_a_weak_proxy_is_the_object_and_a_weak_ref_is_not(write_tree, monkeypatch) -> None:
    graph = _graph(write_tree, monkeypatch, {"weak.py": WEAK})
    assert graph["weak.Owner.__init__.through_proxy"] == ["weak.Owner.step"]
    assert "weak.Owner.step" not in graph["weak.Owner.__init__.through_ref"]


ITERATED = """\
class Batch:
    def close(self):
        return None


class Cursor:
    def __next__(self):
        return Batch()


class Source:
    def __iter__(self):
        return Cursor()

    def close(self):
        return None


class Loader:
    def __iter__(self):
        yield Batch()

    def close(self):
        return None


def first(source):
    batch = next(iter(source))
    batch.close()


def listed(source):
    for batch in list(source):
        batch.close()


def generated(loader):
    batch = next(iter(loader))
    batch.close()


first(Source())
listed(Source())
generated(Loader())
"""


def test_iter_and_list_of_an_object_give_what_iterating_it_gives_not_the_object(write_tree, monkeypatch) -> None:
    # torchrl's scripts take `data = next(iter(collector))`: the batch, which went on to be
    # every tensor of the RNN modules while it was read as the collector itself.
    graph = _graph(write_tree, monkeypatch, {"iterated.py": ITERATED})
    project = {name: [c for c in calls if c.startswith("iterated.")] for name, calls in graph.items()}
    assert project["iterated.first"] == ["iterated.Batch.close"]
    assert project["iterated.listed"] == ["iterated.Batch.close"]
    # a generator's yields are not followed: unresolved, and never the loader's own method
    assert project["iterated.generated"] == []


MODULES = """\
class Norm:
    def forward(self, x):
        return x


class Router:
    def forward(self, x):
        return x


class Gate:
    def forward(self, x):
        return x
"""

IDENTITY = (
    """\
def checked(module, *, strict=True):
    if strict and not hasattr(module, "forward"):
        raise TypeError(module)
    return module


def either(module, fallback):
    if module is None:
        module = fallback
    return module


"""
    + MODULES
    + """

class Layer:
    def __init__(self):
        self.norm = Norm()
        self.router = Router()
        self.gate = Gate()

    def normed(self, x):
        return checked(self.norm)(x)

    def routed(self, x):
        return checked(module=self.router)(x)

    def gated(self, x):
        return either(self.gate, self.norm)(x)

    def spread(self, x):
        return checked(*[self.gate])(x)
"""
)


def test_a_helper_that_returns_its_argument_gives_each_call_its_own(write_tree, monkeypatch) -> None:
    """Megatron calls `apply_module(self.norm)(x)` and `apply_module(self.router)(x)`: read
    context-insensitively, the identity helper returns every module it is ever given, and a
    capture of the norm runs the router. A parameter the helper may rebind is still the union,
    and so is an argument a starred call may pass there."""
    graph = _graph(write_tree, monkeypatch, {"main.py": IDENTITY})
    assert graph["main.Layer.normed"] == ["main.Norm.forward", "main.checked"]
    assert graph["main.Layer.routed"] == ["main.Router.forward", "main.checked"]
    assert graph["main.Layer.gated"] == ["main.Gate.forward", "main.Norm.forward", "main.either"]
    assert graph["main.Layer.spread"] == [
        "main.Gate.forward",
        "main.Norm.forward",
        "main.Router.forward",
        "main.checked",
    ]


REDEFINED = (
    MODULES
    + """

def pick(first, second, third):  # an overload a dispatch decorator registers
    return third


def pick(module):
    return module


def build(a, b, kind):
    if isinstance(kind, Norm):
        return Router()
    return Norm()


def build(kind):
    return Norm()


def run(x):
    return pick(Norm())(x)


def made(x):
    return build(Norm())(x)
"""
)


def test_a_function_defined_twice_reads_its_parameters_by_name(write_tree, monkeypatch) -> None:
    """A qualname defined twice (overloads under a dispatch decorator, as in torch.fx's
    unification code) keeps the last definition's parameters; a `return p` or an `isinstance`
    guard of the other definition names a parameter by position there, which crashed the solver
    (IndexError: each such file became an internal error) or read the wrong argument. By name, a
    parameter the kept definition lacks decides nothing, and the file is still analysed."""
    graph = _graph(write_tree, monkeypatch, {"main.py": REDEFINED})
    assert graph["main.run"] == ["main.Norm.forward", "main.pick"]
    assert graph["main.made"] == ["main.Norm.forward", "main.Router.forward", "main.build"]
