"""The sanitizer's front ends on a machine without a GPU: they must say so and change nothing."""

from __future__ import annotations

import json

import pytest

from conftest import plugin_args, run_cli


def _has_cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


# These check what users see without a GPU; the CLI ones hide the GPU from the child instead.
NO_GPU = pytest.mark.skipif(_has_cuda(), reason="a CUDA device is present: these check the inactive sanitizer")
HIDE_GPU = {"CUDA_VISIBLE_DEVICES": ""}

SIMPLE_TEST = """
def test_adds():
    assert 1 + 1 == 2
"""


def test_plugin_off_adds_nothing(pytester) -> None:
    pytester.makepyfile(SIMPLE_TEST)
    result = pytester.runpytest(*plugin_args())
    result.assert_outcomes(passed=1)
    assert "graphlint sanitizer" not in result.stdout.str()


@NO_GPU
def test_plugin_without_a_gpu_says_why_once_and_reports_it(pytester, tmp_path) -> None:
    pytest.importorskip("torch", reason="needs torch: without it the sanitizer gives that reason, not the missing GPU")
    pytester.makepyfile(SIMPLE_TEST)
    report = tmp_path / "findings.json"
    args = ("--graphlint-sanitize=error", "--graphlint-sanitize-allow-inactive", f"--graphlint-report={report}")
    result = pytester.runpytest(*plugin_args(), *args)
    result.assert_outcomes(passed=1)
    header = [line for line in result.stdout.lines if line.startswith("graphlint sanitizer:")]
    assert len(header) == 1 and "inactive (no CUDA device)" in header[0]
    rows = json.loads(report.read_text())
    assert [row["code"] for row in rows] == ["GL500"], rows  # never an empty, clean-looking report
    assert "no CUDA device" in rows[0]["message"] and rows[0]["severity"] == "info"
    assert rows[0]["path"] == "<pytest>"  # the session, not line 1 of its root folder


@NO_GPU
def test_plugin_error_mode_without_a_gpu_fails_the_session_with_the_reason(pytester, tmp_path) -> None:
    pytest.importorskip("torch", reason="needs torch: without it the sanitizer gives that reason, not the missing GPU")
    pytester.makepyfile(SIMPLE_TEST)
    report = tmp_path / "findings.json"
    result = pytester.runpytest(*plugin_args(), "--graphlint-sanitize=error", f"--graphlint-report={report}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "inactive (no CUDA device)" in result.stderr.str()
    assert "--graphlint-sanitize-allow-inactive" in result.stderr.str()
    assert [row["code"] for row in json.loads(report.read_text())] == ["GL500"]


@NO_GPU
@pytest.mark.parametrize(
    "flags",
    [
        ["--graphlint-sanitize"],
        ["--graphlint-sanitize=warn"],
        ["--graphlint-sanitize=error", "--graphlint-sanitize-allow-inactive"],
    ],
)
def test_plugin_flag_does_not_swallow_the_path_after_it(pytester, flags: list[str]) -> None:
    pytester.makepyfile(**{"tests/test_inner": SIMPLE_TEST, "test_outer": "def test_outer():\n    assert False\n"})
    result = pytester.runpytest(*plugin_args(), *flags, "tests/")
    result.assert_outcomes(passed=1)  # only the path given ran: test_outer (failing) was not collected


def test_plugin_rejects_an_unknown_mode(pytester) -> None:
    pytester.makepyfile(SIMPLE_TEST)
    result = pytester.runpytest(*plugin_args(), "--graphlint-sanitize=loud")
    assert result.ret == pytest.ExitCode.USAGE_ERROR


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
    result = run_cli("sanitize", "--", "python", str(script), "a", "b", env=HIDE_GPU)
    assert result.returncode == 3
    assert "args ['a', 'b']" in result.stdout
    assert "inactive" in result.stderr


def test_a_lost_report_under_poison_never_claims_the_program_ran_unchanged(tmp_path) -> None:
    """A program that ends without handing back the report (here `os._exit`; a crash or a
    timeout alike) may have been poisoned until then: under --poison the line must not say it
    ran unchanged, as it still does without --poison."""
    script = tmp_path / "prog.py"
    script.write_text("import os\nos._exit(0)\n")
    plain = run_cli("sanitize", "--", "python", str(script), env=HIDE_GPU)
    poisoned = run_cli("sanitize", "--poison", "--", "python", str(script), env=HIDE_GPU)
    assert "without handing back" in plain.stderr and "the program ran unchanged" in plain.stderr
    assert "without handing back" in poisoned.stderr and "the program ran unchanged" not in poisoned.stderr
    assert "--poison may have changed what it computed" in poisoned.stderr


def test_sanitize_runs_a_module(tmp_path) -> None:
    (tmp_path / "mymod.py").write_text("import sys\nprint('module ran', sys.argv[1:])\n")
    result = run_cli("sanitize", "--", "python", "-m", "mymod", "x", cwd=tmp_path, env={"PYTHONPATH": str(tmp_path)})
    assert result.returncode == 0 and "module ran ['x']" in result.stdout


def test_sanitize_a_script_that_raises_prints_its_traceback_and_exits_1(tmp_path) -> None:
    script = tmp_path / "boom.py"
    script.write_text("def f():\n    raise ValueError('boom')\n\nf()\n")
    result = run_cli("sanitize", "--", "python", str(script), env=HIDE_GPU)
    assert result.returncode == 1, result.stderr
    assert "Traceback (most recent call last)" in result.stderr and "ValueError: boom" in result.stderr
    assert f'File "{script}", line 2, in f' in result.stderr
    assert "internal error" not in result.stderr


def test_sanitize_runs_python_c_with_its_arguments(tmp_path) -> None:
    code = "import sys; print('argv', sys.argv); sys.exit(4)"
    result = run_cli("sanitize", "--", "python", "-c", code, "one", env=HIDE_GPU)
    assert result.returncode == 4, result.stderr
    assert "argv ['-c', 'one']" in result.stdout


def test_sanitize_passes_interpreter_flags_through(tmp_path) -> None:
    script = tmp_path / "asserts.py"
    script.write_text("import sys\nassert False, 'asserts run'\nprint('optimized', sys.flags.optimize)\n")
    plain = run_cli("sanitize", "--", "python", "-u", str(script), env=HIDE_GPU)
    assert plain.returncode == 1 and "AssertionError: asserts run" in plain.stderr
    optimized = run_cli("sanitize", "--", "python", "-O", "-u", str(script), env=HIDE_GPU)
    assert optimized.returncode == 0 and "optimized 1" in optimized.stdout, optimized.stderr
    warned = run_cli(
        "sanitize", "--", "python", "-W", "error", "-c", "import warnings; warnings.warn('w')", env=HIDE_GPU
    )
    assert warned.returncode == 1 and "UserWarning: w" in warned.stderr


def test_sanitize_usage_errors_are_exit_2(tmp_path) -> None:
    missing = run_cli("sanitize", "--", "python", str(tmp_path / "missing.py"), env=HIDE_GPU)
    assert missing.returncode == 2  # what Python itself exits with for a missing script
    assert run_cli("sanitize").returncode == 2


def test_sanitize_report_says_the_sanitizer_was_inactive(tmp_path) -> None:
    pytest.importorskip("torch", reason="needs torch: without it the sanitizer gives that reason, not the missing GPU")
    report = tmp_path / "findings.json"
    result = run_cli("sanitize", "--report", str(report), "--", "python", "-c", "import torch", env=HIDE_GPU)
    assert result.returncode == 0
    rows = json.loads(report.read_text())
    assert [row["code"] for row in rows] == ["GL500"] and "no CUDA device" in rows[0]["message"]


def test_sanitize_locates_gl500_at_the_file_a_folder_runs(tmp_path) -> None:
    pytest.importorskip("torch", reason="needs torch: without it the sanitizer gives that reason, not the missing GPU")
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "__main__.py").write_text("pass\n")
    report = tmp_path / "findings.json"
    result = run_cli("sanitize", "--report", str(report), "--", "python", "app", cwd=tmp_path, env=HIDE_GPU)
    assert result.returncode == 0, result.stderr
    (row,) = json.loads(report.read_text())
    assert (row["code"], row["path"], row["line"]) == ("GL500", "app/__main__.py", 1)


def test_sanitize_error_mode_fails_when_inactive_unless_allowed(tmp_path) -> None:
    strict = run_cli("sanitize", "--mode", "error", "--", "python", "-c", "pass", env=HIDE_GPU)
    assert strict.returncode == 1 and "--allow-inactive" in strict.stderr
    allowed = run_cli("sanitize", "--mode", "error", "--allow-inactive", "--", "python", "-c", "pass", env=HIDE_GPU)
    assert allowed.returncode == 0, allowed.stderr


def test_sanitize_isolated_mode_is_reported_as_inactive(tmp_path) -> None:
    report = tmp_path / "findings.json"
    result = run_cli("sanitize", "--report", str(report), "--", "python", "-I", "-c", "print('ran')")
    assert result.returncode == 0 and "ran" in result.stdout
    assert "-I (isolated mode)" in json.loads(report.read_text())[0]["message"]
