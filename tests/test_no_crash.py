"""No input makes graphlint crash: a failure on one file or region is GL002 there, the rest runs.

The generative tests build many small projects out of the statements real capture code is
made of (captures, streams, replays, calls across files, closures, `match`, `except*`) and
run the whole pipeline on them; hypothesmith adds arbitrary syntax for the file phase.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from conftest import run_cli  # noqa: E402
from graphlint import cli  # noqa: E402
from graphlint.analysis import summarize_source  # noqa: E402
from graphlint.config import ConfigResolver  # noqa: E402
from graphlint.engine import CheckOptions, check  # noqa: E402

CALLED_TWICE = """\
import torch

def f(x):
    return x.sum().item()

g = torch.cuda.CUDAGraph()
x = torch.zeros(3, device="cuda")
with torch.cuda.graph(g):
    f(x)
    f(x)
"""

TWO_COMPILES = """\
import torch

def step(x):
    return x.sum().item()

a = torch.compile(step, mode="reduce-overhead")
b = torch.compile(step, mode="reduce-overhead")
"""

TWO_CAPTURES = """\
import torch

def f(x):
    return x.item()

g, h = torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()
x = torch.zeros(3, device="cuda")
with torch.cuda.graph(g):
    f(x)
with torch.cuda.graph(h):
    f(x)
"""


@pytest.mark.parametrize("source", [CALLED_TWICE, TWO_COMPILES, TWO_CAPTURES], ids=["twice", "compiles", "captures"])
def test_one_function_reached_many_ways_is_checked_not_crashed(write_tree, source: str) -> None:
    """The crash of the real-code corpus: equal-length call paths to one function were compared."""
    root = write_tree({"m.py": source})
    result = run_cli("check", "--no-cache", "--format", "json", ".", cwd=root)
    assert result.returncode == 1, result.stderr
    assert "GL002" not in result.stdout and "internal error" not in result.stderr


def _boom_on(path_part: str, real):
    def wrapper(self, path, *args, **kwargs):
        if path_part in path:
            raise RuntimeError("simulated graphlint bug")
        return real(self, path, *args, **kwargs)

    return wrapper


def test_project_phase_failure_is_gl002_on_that_file_and_the_run_goes_on(
    write_tree, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    from graphlint.checkers.machinery.project.phase import Project

    root = write_tree({"bad.py": TWO_CAPTURES, "good.py": TWO_CAPTURES})
    monkeypatch.setattr(Project, "_judge", _boom_on("bad.py", Project._judge))
    monkeypatch.chdir(root)
    status = cli.main(["check", "--no-cache", "--format", "json", "."])
    out, err = capsys.readouterr()
    found = json.loads(out)
    assert status == 2
    assert {(f["path"], f["code"]) for f in found} >= {("./bad.py", "GL002"), ("./good.py", "GL101")}
    internal = next(f for f in found if f["code"] == "GL002")
    assert "RuntimeError: simulated graphlint bug" in internal["message"]
    assert "internal error" in err and "Traceback" not in err  # the traceback only under --verbose

    status = cli.main(["check", "--no-cache", "--verbose", "--select", "GL101", "."])
    out, err = capsys.readouterr()
    assert status == 2
    assert "GL002" in out, "an internal error is reported whatever the selection"
    assert "Traceback (most recent call last)" in err and "simulated graphlint bug" in err


def test_file_phase_failure_is_gl002_not_a_parse_error(write_tree, monkeypatch: pytest.MonkeyPatch) -> None:
    from graphlint.checkers.machinery.summarize import FileSummarizer

    real = FileSummarizer.run

    def run(self):
        if self.state.module == "bad":
            raise ValueError("simulated summariser bug")
        return real(self)

    monkeypatch.setattr(FileSummarizer, "run", run)
    root = write_tree({"bad.py": TWO_CAPTURES, "good.py": TWO_CAPTURES})
    result = check([str(root)], ConfigResolver(cwd=root), CheckOptions(cache_dir=root / ".cache"))
    codes = {(Path(f.path).name, f.code) for f in result.findings}
    assert ("bad.py", "GL002") in codes and ("good.py", "GL101") in codes
    assert ("bad.py", "GL000") not in codes
    # Not cached: the next run (the bug fixed) analyses the file again.
    monkeypatch.setattr(FileSummarizer, "run", real)
    again = check([str(root)], ConfigResolver(cwd=root), CheckOptions(cache_dir=root / ".cache"))
    assert ("bad.py", "GL101") in {(Path(f.path).name, f.code) for f in again.findings}


# -- generative: projects made of the statements capture code is made of -------------------

_NAMES = ("x", "y", "static_x", "out", "buf", "self.buf", "items[0]", "s", "g")
_FUNCS = ("f0", "f1", "helper.h0", "C0().forward", "self.m0", "fn")
_EXPRS = (
    'torch.zeros(4, device="cuda")',
    "{v}.clone()",
    "{f}({v})",
    "{v}.item()",
    "{v} @ {v}",
    "functools.partial({f}, {v})",
    "lambda a: {f}(a)",
    "[{v}, {v}]",
    "{{'k': {v}}}",
    "{v}[0]",
    "{v}[{v} > 0]",
    "torch.cuda.Stream()",
    "torch.cuda.current_stream()",
    "torch.cuda.CUDAGraph()",
    'torch.compile({f}, mode="reduce-overhead")',
    "torch.cuda.make_graphed_callables({f}, ({v},))",
    "{v}.to('cpu', non_blocking=True)",
    "[{f}(a) for a in {v}]",
    "({v} if {v} else {v})",
    "{v}.record_stream({v})",
    "super().forward({v})",
)
_SIMPLE = (
    "{v} = {e}",
    "{v} += 1",
    "{v}.copy_({e})",
    "del {v}",
    "{v}.replay()",
    "{v}.capture_begin()",
    "{v}.capture_end()",
    "{v}.wait_stream({v})",
    "torch.cuda.synchronize()",
    "{f}({v})",
    "return {e}",
    "yield {v}",
    "print({v})",
    "assert {v}",
    "{v}, {v} = {e}, {e}",
    "global x",
    "pass",
)
_BLOCKS = (
    "with torch.cuda.graph({v}):",
    "with torch.cuda.stream({v}):",
    "with torch.autocast('cuda'):",
    "for {v} in range(3):",
    "while {v}:",
    "if {v}:",
    "def fn({v}):",
    "async def fn():",
    "class Inner:",
    "try:",
    "match {v}:",
)


def _fill(template: str, draw) -> str:
    text = template
    while "{e}" in text:
        text = text.replace("{e}", draw(st.sampled_from(_EXPRS)), 1)
    while "{v}" in text or "{f}" in text:
        text = text.replace("{v}", draw(st.sampled_from(_NAMES)), 1)
        text = text.replace("{f}", draw(st.sampled_from(_FUNCS)), 1)
    return text.replace("{{", "{").replace("}}", "}")


@st.composite
def _block(draw, depth: int = 0) -> list[str]:
    lines: list[str] = []
    for _ in range(draw(st.integers(1, 4))):
        if depth < 3 and draw(st.integers(0, 3)) == 0:
            header = _fill(draw(st.sampled_from(_BLOCKS)), draw)
            body = [f"    {line}" for line in draw(_block(depth + 1))]
            if header == "try:":
                handler = draw(st.sampled_from(("except ValueError:", "except* ValueError:", "finally:")))
                lines += [header, *body, handler, *body]
            elif header.startswith("match"):
                lines += [header, "    case [a, *rest]:", *[f"    {b}" for b in body], "    case _:", "        pass"]
            elif header.startswith("if"):
                lines += [header, *body, "else:", *body]
            else:
                lines += [header, *body]
        else:
            lines.append(_fill(draw(st.sampled_from(_SIMPLE)), draw))
    return lines


@st.composite
def _module(draw, name: str) -> str:
    head = ["import functools", "import torch", "import helper", "from helper import h0 as fn", ""]
    parts = list(head)
    for index in range(2):
        parts += [f"def f{index}(x, y=None):", *[f"    {line}" for line in draw(_block(1))], ""]
    parts += ["class C0(torch.nn.Module):", "    def forward(self, x):"]
    parts += [f"        {line}" for line in draw(_block(2))]
    parts += ["    def m0(self, x):", *[f"        {line}" for line in draw(_block(2))], ""]
    parts += draw(_block(0))
    return "\n".join(parts) + "\n"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(main=_module("main"), helper=_module("helper"))
def test_generated_projects_never_raise_an_internal_error(tmp_path_factory, main: str, helper: str) -> None:
    root = tmp_path_factory.mktemp("gen")
    (root / "main.py").write_text(main)
    (root / "helper.py").write_text(
        helper.replace("from helper import h0 as fn", "fn = None") + "\ndef h0(x):\n    return x\n"
    )
    result = check([str(root)], ConfigResolver(cwd=root), CheckOptions())
    internal = [f for f in result.findings if f.code == "GL002"]
    assert not internal, (
        internal[0].message + "\n" + result.tracebacks[(internal[0].path, internal[0].line, internal[0].message)]
    )


@pytest.mark.skipif(sys.version_info < (3, 11), reason="hypothesmith's grammar follows the running Python")
def test_arbitrary_syntax_never_raises_in_the_file_phase() -> None:
    hypothesmith = pytest.importorskip("hypothesmith")

    @settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
    @given(source=hypothesmith.from_grammar())
    def run(source: str) -> None:
        summary = summarize_source(source.encode("utf-8", "surrogatepass"), "generated", False)
        assert summary.internal_error is None, summary.internal_traceback

    run()
