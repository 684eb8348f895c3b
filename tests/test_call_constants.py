"""Constants a capture passes decide its callees' branches: `forward(x, in_capture=True)` under a
capture does not run `forward`'s `if not in_capture:` arm, so nothing there is reported and
nothing only that arm calls is reached; `graphlint captures` says which calls were ruled out and
by what. Anything less than certain (two sites passing different constants, a rebound
parameter, a spread `**kwargs`, an unbound method's shifted positions) decides nothing."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from conftest import check_json, run_cli
from graphlint.checkers.machinery.constants import param_tests


def _project(root: Path, monkeypatch: pytest.MonkeyPatch, follow_values: bool = False):
    from graphlint.config import ConfigResolver
    from graphlint.engine import CheckOptions, load_project

    monkeypatch.chdir(root)
    options = CheckOptions(jobs=1, cache_dir=None, follow_values=follow_values)
    return load_project(["."], ConfigResolver(cwd=root), options)[1]


def _lines(root: Path, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The lines of the GL101 findings (host syncs in capture) in the project at ``root``."""
    return sorted(f["line"] for f in check_json("--select", "GL101", ".", cwd=root))


RUNNER = """\
import torch


def prepare(batch):
    return batch.sum().item()                 # 5: only the eager path prepares


def forward(x, in_capture=False, metadata=None):
    if metadata is None:
        metadata = prepare(x)
    if not in_capture:
        print(x.sum().item())                 # 12
    return x * 2


def step(x, eager=False):
    if eager:
        x.max().item()                        # 18: the default keeps this arm out
    return x


def capture(x, meta):
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        forward(x, in_capture=True, metadata=0)
        step(x)
    return g
"""


def test_a_constant_the_capture_passes_rules_out_the_arm_it_decides(write_tree, monkeypatch) -> None:
    root = write_tree({"runner.py": RUNNER})
    assert _lines(root, monkeypatch) == []
    reach = _project(root, monkeypatch).capture_reach()
    assert "runner.forward" in reach and "runner.prepare" not in reach


def test_the_nearest_legal_look_alike_a_variable_decides_nothing(write_tree, monkeypatch) -> None:
    """The same calls with values the checker cannot know: every arm may run."""
    source = RUNNER.replace("in_capture=True, metadata=0", "in_capture=meta, metadata=meta").replace(
        "step(x)", "step(x, meta)"
    )
    root = write_tree({"runner.py": source})
    assert _lines(root, monkeypatch) == [5, 12, 18]


def test_sites_that_pass_different_constants_decide_nothing(write_tree, monkeypatch) -> None:
    source = RUNNER.replace("        step(x)\n", "        step(x)\n        step(x, eager=True)\n")
    root = write_tree({"runner.py": source})
    assert _lines(root, monkeypatch) == [18]


PASSED_ON = """\
import torch


def inner(x, flag):
    if flag:
        return x
    return x.sum().item()                     # 7: after `if flag: return`, needs `not flag`


def outer(x, flag):
    return inner(x, flag)


def capture(x):
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        outer(x, True)
    return g
"""


def test_a_constant_passed_on_through_a_parameter_decides_the_callee(write_tree, monkeypatch) -> None:
    root = write_tree({"chain.py": PASSED_ON})
    assert _lines(root, monkeypatch) == []


def test_a_rebound_parameter_is_not_the_constant_passed(write_tree, monkeypatch) -> None:
    source = PASSED_ON.replace("def inner(x, flag):\n", "def inner(x, flag):\n    flag = x.dim() > 1\n")
    root = write_tree({"chain.py": source})
    assert _lines(root, monkeypatch) == [8]


def test_spread_arguments_leave_the_defaults_unknown(write_tree, monkeypatch) -> None:
    source = RUNNER.replace("        step(x)\n", "        step(x, **options)\n").replace(
        "def capture(x, meta):", "def capture(x, meta, **options):"
    )
    root = write_tree({"runner.py": source})
    assert _lines(root, monkeypatch) == [18]


UNBOUND = """\
import torch


class Base:
    def run(self, x, eager=False):
        if eager:
            x.sum().item()                    # 7
        return x


class Child(Base):
    def run(self, x, eager=False):
        return Base.run(self, x, eager)       # positions shifted by `self`: not read


def capture(model: Child, x):
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        model.run(x, True)
    return g
"""


def test_an_unbound_method_call_is_read_by_keyword_only(write_tree, monkeypatch) -> None:
    root = write_tree({"models.py": UNBOUND})
    assert _lines(root, monkeypatch) == [7]
    keyword = UNBOUND.replace("Base.run(self, x, eager)", "Base.run(self, x, eager=eager)").replace(
        "model.run(x, True)", "model.run(x, False)"
    )
    root = write_tree({"models.py": keyword})
    assert _lines(root, monkeypatch) == []


OWN_CAPTURE = """\
import torch


def graphed(x, warm=True):
    if warm:
        x.sum().item()                        # 6: the caller below passes warm=False
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        if not warm:
            x.max().item()                    # 10: its own capture, whoever calls it
    return g


def capture(x):
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        graphed(x, warm=False)
    return g
"""


def test_a_functions_own_capture_is_not_decided_by_the_callers_of_it(write_tree, monkeypatch) -> None:
    root = write_tree({"own.py": OWN_CAPTURE})
    assert _lines(root, monkeypatch) == [10]


def test_captures_shows_the_calls_the_constants_rule_out(write_tree) -> None:
    root = write_tree({"runner.py": RUNNER})
    text = run_cli("captures", "--no-cache", ".", cwd=root)
    assert text.returncode == 0, text.stderr
    assert "calls the constants it passes rule out:" in text.stdout
    assert "runner.py:10 in forward: `metadata is None` is False with metadata=0" in text.stdout
    report = run_cli("captures", "--no-cache", "--format", "json", ".", cwd=root)
    (region,) = json.loads(report.stdout)["regions"]
    assert region["pruned_calls"] == [
        {
            "path": "./runner.py",
            "function": "forward",
            "line": 10,
            "test": "metadata is None",
            "value": False,
            "constants": "metadata=0",
        }
    ]


@pytest.mark.parametrize(
    ("test", "constants", "expected"),
    [
        ("p", {"p": {"True"}}, True),
        ("not p", {"p": {"0"}}, True),
        ("p is None", {"p": {"'x'"}}, False),
        ("p is not None", {"p": {"None"}}, False),
        ("p == 'decode'", {"p": {"'decode'", "'extend'"}}, None),
        ("p in (1, 2)", {"p": {"2"}}, True),
        ("p and other", {"p": {"False"}}, False),
        ("p or other", {"p": {"False"}}, None),
        ("p or q", {"p": {"False"}, "q": {"None"}}, False),
        ("p is 3", {"p": {"3"}}, None),
        ("p", {}, None),
    ],
)
def test_tests_on_parameters_are_three_valued(test: str, constants: dict, expected: bool | None) -> None:
    read = param_tests.read_test(ast.parse(test, mode="eval").body, frozenset({"p", "q"}))
    assert read is not None
    assert param_tests.evaluate(read, {k: frozenset(v) for k, v in constants.items()}) is expected


def test_odd_constants_are_left_unknown_not_a_crash(write_tree, monkeypatch) -> None:
    """A 4,000-digit integer (near Python's digit limit for its repr) and `1e999` (`inf`, whose
    repr does not read back) are not kept as constants; the file is checked as usual."""
    huge = "1" * 4000
    source = f"""\
import torch


def step(x, n=0):
    if n:
        x.sum().item()
    return x


def capture(x):
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        step(x, {huge})
        step(x, 1e999)
        step(x, -{huge})
    return g
"""
    root = write_tree({"odd.py": source})
    findings = check_json(".", cwd=root)
    assert [(f["code"], f["line"]) for f in findings] == [("GL101", 6)]


def test_nested_and_sibling_branches_are_each_decided(write_tree, monkeypatch) -> None:
    source = """\
import torch


def step(x, a=False, b=True):
    if a:
        x.sum().item()                        # 6: ruled out by a
    if b:
        if a:
            x.mean().item()                   # 9: ruled out by a, inside b's arm
        x.max().item()                        # 10: runs
    else:
        x.min().item()                        # 12: ruled out by b
    return x


def capture(x):
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        step(x)
    return g
"""
    root = write_tree({"nested.py": source})
    assert _lines(root, monkeypatch) == [10]


def test_captures_lists_only_what_the_final_constants_rule_out(write_tree) -> None:
    """`step` is first entered with `eager=False` (its default), then, two calls deeper through
    `outer`, with a value nobody knows: the eager arm may run, so it is reported and no
    ruled-out call is listed (one an earlier visit of `step` ruled out was listed before)."""
    source = """\
import torch


def helper(t):
    return t.sum().item()


def step(x, eager=False):
    if eager:
        helper(x)
    return x


def middle(x, eager):
    return step(x, eager)


def outer(x, eager):
    return middle(x, eager)


def capture(x, flag):
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        step(x)
    h = torch.cuda.CUDAGraph()
    with torch.cuda.graph(h):
        outer(x, flag)
    return g, h
"""
    root = write_tree({"late.py": source})
    assert [(f["code"], f["line"]) for f in check_json("--select", "GL101", ".", cwd=root)] == [("GL101", 5)]
    report = json.loads(run_cli("captures", "--no-cache", "--format", "json", ".", cwd=root).stdout)
    assert [region.get("pruned_calls", []) for region in report["regions"]] == [[], []]


def test_an_assert_on_a_parameter_decides_the_rest_of_its_block(write_tree, monkeypatch) -> None:
    """vLLM's Kimi vision towers return early on the metadata path, then `assert grid is not None`
    before their host-side sizing; their encoder graphs pass `grid=None`. A sizing path that
    cannot pass its assert under the capture is not the graph's; an assert the constant keeps
    (or one on anything else) decides nothing."""
    source = """\
import torch


def tower(x, grid=None, *, meta=None):
    if meta is not None:
        return x * 2
    assert grid is not None, "the eager path needs the grid"
    return x.sum() * len(grid.tolist())       # 8: the assert fails first with grid=None


def sized(x, grid=None):
    assert grid is None or grid.numel() > 0
    return x.max().item()                     # 13: grid=None passes the assert


def checked(x, ready):
    assert ready
    return x.min().item()                     # 18: a variable decides nothing


def capture(x, meta, ready):
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        tower(x, None, meta=meta)
        sized(x)
        checked(x, ready)
    return g
"""
    root = write_tree({"tower.py": source})
    assert _lines(root, monkeypatch) == [13, 18]


THROUGH_A_PARAMETER = """\
import torch


class Backend:
    def init_out(self, batch, in_capture=False):
        if in_capture:
            batch.sum().item()                # 7
        return batch


class Glue:
    def run(self, backend, batch):
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            backend.init_out(batch)
        return g


def serve(batch):
    Glue().run(Backend(), batch)
"""


def test_a_default_no_argument_can_reach_decides_a_call_through_a_value(write_tree) -> None:
    """SGLang's metadata glue graph captures `attn_backend.init_forward_metadata_out_graph(fb_view)`:
    whether `self` is bound or passed, one argument cannot reach `in_capture`, so it is False."""
    root = write_tree({"glue.py": THROUGH_A_PARAMETER})
    select = ("--follow-values", "--select", "GL101", ".")
    assert [f["line"] for f in check_json(*select, cwd=root)] == []
    # The nearest look-alike: a second argument may be `in_capture` (a bound call) or `batch` (a
    # class's function called with the instance first): the default is not known to hold.
    root = write_tree({"glue.py": THROUGH_A_PARAMETER.replace("backend.init_out(batch)", "backend.init_out(batch, 0)")})
    assert [f["line"] for f in check_json(*select, cwd=root)] == [7]


def test_a_partial_of_the_callee_may_pass_what_the_call_does_not_show(write_tree) -> None:
    """`functools.partial(backend.init_out, in_capture=True)` called with one argument: the
    partial passed `in_capture`, so its default is not what the capture runs with."""
    partial = THROUGH_A_PARAMETER.replace("            backend.init_out(batch)", "            backend(batch)").replace(
        "    Glue().run(Backend(), batch)",
        "    import functools\n\n    Glue().run(functools.partial(Backend().init_out, in_capture=True), batch)",
    )
    root = write_tree({"glue.py": partial})
    assert [f["line"] for f in check_json("--follow-values", "--select", "GL101", ".", cwd=root)] == [7]
