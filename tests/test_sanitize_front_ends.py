"""The sanitizer's front ends on a machine without a GPU: they must say so and change nothing."""

from __future__ import annotations

import json

from conftest import plugin_args, run_cli

SIMPLE_TEST = """
def test_adds():
    assert 1 + 1 == 2
"""


def test_plugin_off_adds_nothing(pytester) -> None:
    pytester.makepyfile(SIMPLE_TEST)
    result = pytester.runpytest(*plugin_args())
    result.assert_outcomes(passed=1)
    assert "graphlint sanitizer" not in result.stdout.str()


def test_plugin_without_a_gpu_says_why_once_and_changes_nothing(pytester, tmp_path) -> None:
    pytester.makepyfile(SIMPLE_TEST)
    report = tmp_path / "findings.json"
    result = pytester.runpytest(*plugin_args(), "--graphlint-sanitize=error", f"--graphlint-report={report}")
    result.assert_outcomes(passed=1)
    header = [line for line in result.stdout.lines if line.startswith("graphlint sanitizer:")]
    assert len(header) == 1 and "inactive" in header[0]
    assert json.loads(report.read_text()) == []


def test_plugin_marker_and_ini_are_registered(pytester) -> None:
    pytester.makepyfile(
        """
import pytest

@pytest.mark.graphlint(ignore=["GL506"])
def test_marked(graphlint_findings):
    assert graphlint_findings == []
"""
    )
    pytester.makeini("[pytest]\ngraphlint_sanitize_ignore = GL508\n")
    result = pytester.runpytest(*plugin_args(), "--strict-markers", "--graphlint-sanitize")
    result.assert_outcomes(passed=1)


def test_sanitize_runs_a_script_and_keeps_its_exit_status(tmp_path) -> None:
    script = tmp_path / "prog.py"
    script.write_text("import sys\nprint('args', sys.argv[1:])\nsys.exit(3)\n")
    result = run_cli("sanitize", "--", "python", str(script), "a", "b")
    assert result.returncode == 3
    assert "args ['a', 'b']" in result.stdout
    assert "inactive" in result.stderr


def test_sanitize_runs_a_module(tmp_path) -> None:
    (tmp_path / "mymod.py").write_text("print('module ran')\n")
    result = run_cli("sanitize", "--", "python", "-m", "mymod", cwd=tmp_path, env={"PYTHONPATH": str(tmp_path)})
    assert result.returncode == 0 and "module ran" in result.stdout


def test_sanitize_usage_errors_are_exit_2(tmp_path) -> None:
    assert run_cli("sanitize", "--", "python", str(tmp_path / "missing.py")).returncode == 2
    assert run_cli("sanitize").returncode == 2
