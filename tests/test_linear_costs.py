"""Costs linear in their input (benchmarks/worst_cases.py measures the ratios): call paths are
parent pointers, not a whole path per reached function; GL109 reads a function's stream
ordering once, not once per stream block; a call is checked against the branches around it,
not every branch of its function. What is reported is unchanged."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from conftest import ROOT
from graphlint.checkers.machinery.constants import call_constants
from graphlint.checkers.machinery.values import value_flow
from graphlint.checkers.rules.capture import gl109_unjoined_stream_in_capture as gl109
from graphlint.config import ConfigResolver, Selection
from graphlint.engine import CheckOptions, check, load_project

_spec = importlib.util.spec_from_file_location("worst_cases", ROOT / "benchmarks" / "worst_cases.py")
assert _spec is not None and _spec.loader is not None
worst_cases = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(worst_cases)
call_depth, stream_blocks = worst_cases.call_depth, worst_cases.stream_blocks
decided_branches = worst_cases.decided_branches
stacked_decorators = worst_cases.stacked_decorators


def _tree(tmp_path: Path, source: str) -> Path:
    (tmp_path / "case.py").write_text(source)
    return tmp_path


def test_a_deep_call_chain_shares_its_path_through_parent_pointers(tmp_path: Path) -> None:
    root = _tree(tmp_path, call_depth(300))
    _, project = load_project([str(root)], ConfigResolver(cwd=root), CheckOptions(cache_dir=None))
    reach = project.capture_reach()
    deepest, caller = reach["case.f299"], reach["case.f298"]
    assert deepest.parent is caller  # one step each, not 300 copies of the path
    assert len(deepest.path) == 300 and deepest.path[:-1] == caller.path


def test_a_deep_call_chain_reports_the_whole_path(tmp_path: Path) -> None:
    root = _tree(tmp_path, call_depth(300))
    result = check([str(root)], ConfigResolver(cwd=root), CheckOptions(cache_dir=None))
    (finding,) = [f for f in result.findings if f.code == "GL101"]
    assert [site.function for site in finding.call_path] == ["<module>", *(f"f{i}" for i in range(299))]


def test_gl109_reads_the_ordering_once_per_function(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    real = gl109._ordering_calls
    monkeypatch.setattr(gl109, "_ordering_calls", lambda w: calls.append(1) or real(w))
    source = (
        stream_blocks(40)
        + "\n\ndef other(side):\n    with torch.cuda.graph(g):\n        with torch.cuda.stream(side):\n            pass\n"
    )
    root = _tree(tmp_path, source)
    options = CheckOptions(selection=Selection(select=("GL109",)), cache_dir=None)
    result = check([str(root)], ConfigResolver(cwd=root), options)
    assert len(calls) == 2  # `step` (40 blocks) and `other`
    assert [(f.code, f.line) for f in result.findings] == [("GL109", source.count("\n") - 1)]


def test_stacked_decorators_are_read_once_per_level(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each decorator of a stack is applied to the values of the one below, not to its
    expression read again: 16 stacked decorators cost 16 applications a pass, not 2**16."""
    applied = []
    real = value_flow.ValueFlow._decorate
    monkeypatch.setattr(value_flow.ValueFlow, "_decorate", lambda self, e: applied.append(1) or real(self, e))
    root = _tree(tmp_path, stacked_decorators(16))
    result = check([str(root)], ConfigResolver(cwd=root), CheckOptions(cache_dir=None, follow_values=True))
    assert [f.code for f in result.findings] == ["GL101"]  # the capture still reaches through the stack
    assert len(applied) <= 16 * 8, f"{len(applied)} decorator applications for a stack of 16"


def test_a_call_is_checked_against_the_branches_around_it_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A captured call passes `mode=399` to a function with 400 `if mode == i:` arms: each call
    there looks at the arms around it (one), not at all 400 (160,000 looks)."""
    looks = []
    real = call_constants._Spans._end
    monkeypatch.setattr(call_constants._Spans, "_end", lambda self, i: looks.append(1) or real(self, i))
    root = _tree(tmp_path, decided_branches(400))
    result = check([str(root)], ConfigResolver(cwd=root), CheckOptions(cache_dir=None))
    assert [(f.code, f.line) for f in result.findings] == [("GL101", 8)]  # the helper, from the one live arm
    assert len(looks) <= 20 * 400, f"{len(looks)} looks at 400 branches"
