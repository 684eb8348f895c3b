"""The tools that judge the runtime sanitizer on PyTorch's own graph tests
(`scripts/pytorch_graph_suite.sh`): the per-test outcome comparison, and the conftest that lets
a newer test file run on an older torch. A wrong verdict here would misreport the done-when
"the same outcome per test with and without the sanitizer"."""

from __future__ import annotations

import importlib.util
import sys
import unittest
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"suite_tools_{name}", SCRIPTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _junit(path: Path, outcomes: dict[str, str]) -> str:
    cases = []
    for name, outcome in outcomes.items():
        inner = {"passed": "", "failed": "<failure message='x'/>", "skipped": "<skipped message='y'/>"}[outcome]
        cases.append(f'<testcase classname="test_cuda.TestCuda" name="{name}">{inner}</testcase>')
    path.write_text(f"<testsuites><testsuite>{''.join(cases)}</testsuite></testsuites>")
    return str(path)


def test_a_test_whose_outcome_changed_is_named_and_fails_the_comparison(tmp_path, capsys) -> None:
    outcomes = _load("junit_outcomes")
    plain = _junit(tmp_path / "plain.xml", {"test_a": "passed", "test_b": "failed", "test_c": "skipped"})
    same = _junit(tmp_path / "same.xml", {"test_a": "passed", "test_b": "failed", "test_c": "skipped"})
    changed = _junit(tmp_path / "changed.xml", {"test_a": "failed", "test_b": "failed", "test_c": "skipped"})
    assert outcomes.main([plain, same]) == 0
    assert outcomes.main([plain, changed]) == 1
    assert "test_cuda.TestCuda::test_a: passed -> failed" in capsys.readouterr().out
    assert outcomes.main([plain, str(tmp_path / "never-ran.xml")]) == 2


def test_names_a_newer_test_file_imports_become_flags_or_skips(tmp_path, monkeypatch) -> None:
    compat = _load("pytorch_suite_compat")
    package = tmp_path / "torchstandin"  # a module name starting with "torch", as the file's imports do
    package.mkdir()
    (package / "__init__.py").write_text("PRESENT = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "torchstandin", raising=False)
    source = tmp_path / "test_file.py"
    source.write_text("from torchstandin import PRESENT, TEST_NEW_FEATURE, new_decorator\n")
    assert compat.stub_missing(source) == ["torchstandin.TEST_NEW_FEATURE", "torchstandin.new_decorator"]
    import torchstandin

    assert torchstandin.PRESENT == 1 and torchstandin.TEST_NEW_FEATURE is False

    @torchstandin.new_decorator
    def test_uses_it() -> None:
        raise AssertionError("a test decorated with a missing name must skip, not run")

    with pytest.raises(unittest.SkipTest, match="new_decorator is missing"):
        test_uses_it()
    with pytest.raises(unittest.SkipTest):
        torchstandin.new_decorator()  # called inside a test
