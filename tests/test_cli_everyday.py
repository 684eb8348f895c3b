"""Everyday command-line paths a ruff user takes: empty folders, rule names, quiet and colour
output, statistics markers, unknown suppression codes, the list of what --fix changed."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import HAZARD, run_cli

# GL107 (safe fix) and GL106 (unsafe fix) in one capture.
FIXABLE = """\
import torch

model = torch.nn.Linear(4, 4)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
g = torch.cuda.CUDAGraph()
x = torch.zeros(4, device="cuda")
with torch.autocast("cuda"):
    with torch.cuda.graph(g):
        loss = model(x).sum()
        loss.backward()
        opt.step()
"""


def test_empty_directory_says_there_was_nothing_to_check(write_tree) -> None:
    root = write_tree({"empty/notes.txt": "no python here"})
    result = run_cli("check", "--no-cache", "empty", cwd=root)
    assert result.returncode == 0  # as ruff: a warning, not an error
    assert "No Python files found" in result.stderr
    assert "All checks passed" not in result.stdout
    quiet = run_cli("check", "--no-cache", "-q", "empty", cwd=root)
    assert quiet.returncode == 0 and quiet.stderr == ""


def test_rule_by_kebab_case_name() -> None:
    by_name = run_cli("rule", "static-output-aliased-across-replay")
    assert by_name.returncode == 0
    assert by_name.stdout.startswith("# GL201 [static-output-aliased-across-replay]")
    assert by_name.stdout == run_cli("rule", "GL201").stdout
    assert run_cli("rule", "no-such-rule").returncode == 2


def test_noqa_with_an_unknown_code_is_reported(write_tree) -> None:
    root = write_tree({"m.py": "import torch\n\nx = torch.zeros(2)  # noqa: GL999, E501\n"})
    result = run_cli("check", "--no-cache", "--format", "json", "m.py", cwd=root)
    assert result.returncode == 1
    (finding,) = json.loads(result.stdout)
    assert (finding["code"], finding["line"]) == ("GL001", 3)
    assert "unknown" in finding["message"] and "GL999" in finding["message"]
    assert "E501" not in finding["message"]  # another tool's code is left alone


def test_statistics_mark_only_safe_fixes(write_tree) -> None:
    root = write_tree({"fix.py": FIXABLE})
    stats = run_cli("check", "--no-cache", "--statistics", "--select", "GL106,GL107", "fix.py", cwd=root)
    *rows, total, hint = stats.stdout.splitlines()
    marks = {line.split()[1]: line.split()[2] for line in rows}
    assert marks == {"GL106": "[", "GL107": "[*]"}  # GL106's fix is unsafe: no [*]
    assert total == "Found 2 findings (2 errors) in 1 file checked."
    assert hint == "[*] 1 fixable with `--fix`; 1 more with `--fix --unsafe-fixes`."
    quiet = run_cli("check", "--no-cache", "--statistics", "-q", "--select", "GL106,GL107", "fix.py", cwd=root)
    assert quiet.stdout.splitlines() == rows
    as_json = run_cli("check", "--no-cache", "--statistics", "--format", "json", "fix.py", cwd=root)
    fixable = {row["code"]: row["fixable"] for row in json.loads(as_json.stdout)}
    assert fixable["GL106"] is False and fixable["GL107"] is True


def test_quiet_prints_findings_without_summary(write_tree) -> None:
    root = write_tree({"bad.py": HAZARD})
    result = run_cli("check", "--no-cache", "-q", "bad.py", cwd=root)
    assert result.returncode == 1
    assert result.stdout.splitlines()[0].startswith("bad.py:6:9: GL101")
    assert "Found" not in result.stdout


def test_color_always_and_never(write_tree) -> None:
    root = write_tree({"bad.py": HAZARD})
    always = run_cli("check", "--no-cache", "--color", "always", "bad.py", cwd=root)
    assert "\033[" in always.stdout  # even though stdout is a pipe and NO_COLOR is set
    never = run_cli("check", "--no-cache", "--color", "never", "bad.py", cwd=root)
    assert "\033[" not in never.stdout
    assert run_cli("check", "--color", "sometimes", "bad.py", cwd=root).returncode == 2


def test_show_fixes_lists_what_fix_changed(write_tree) -> None:
    root = write_tree({"fix.py": FIXABLE})
    result = run_cli("check", "--no-cache", "--fix", "--show-fixes", "--select", "GL107", "fix.py", cwd=root)
    assert "Fixed 1 finding:" in result.stderr
    assert "- fix.py:" in result.stderr and "GL107" in result.stderr
    assert "cache_enabled=False" in (root / "fix.py").read_text()


def test_version_and_rule_load_neither_networkx_nor_libcst() -> None:
    # Start-up time: the engine, networkx and libcst load only for commands that check.
    for argv in (["--version"], ["rule", "GL101"], ["rules"]):
        probe = (
            f"import sys\nfrom graphlint.cli import main\ntry:\n    main({argv!r})\nexcept SystemExit:\n    pass\n"
            "print('LOADED', sorted(m for m in ('networkx', 'libcst', 'graphlint.engine') if m in sys.modules))"
        )
        result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stderr
        assert result.stdout.splitlines()[-1] == "LOADED []", argv


def test_rules_are_not_cut_when_piped() -> None:
    from graphlint.registry import all_rules

    result = run_cli("rules")  # stdout is a pipe here
    lines = {line.split()[0]: line for line in result.stdout.splitlines()}
    for code, rule in all_rules().items():
        assert lines[code].endswith(rule.summary), code
    assert any(len(rule.summary) > 90 for rule in all_rules().values())  # there is something to cut
