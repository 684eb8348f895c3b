"""The command-line contract of RULES.md, through the real `python -m graphlint` command."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

from conftest import HAZARD, run_cli

CLEAN = """\
import torch

x = torch.zeros(4)
print(x.sum().item())
"""


def test_version() -> None:
    result = run_cli("--version")
    assert result.returncode == 0
    assert result.stdout.startswith("graphlint ")


def test_exit_codes(write_tree) -> None:
    root = write_tree({"bad.py": HAZARD, "good.py": CLEAN})
    assert run_cli("check", "--no-cache", str(root / "good.py")).returncode == 0
    assert run_cli("check", "--no-cache", str(root / "bad.py")).returncode == 1
    assert run_cli("check", "--no-cache", "--exit-zero", str(root / "bad.py")).returncode == 0
    usage = run_cli("check", "--no-cache", "--jobs", "0", str(root))
    assert usage.returncode == 2 and "positive integer" in usage.stderr
    unknown = run_cli("check", "--no-cache", "--select", "GL999", str(root))
    assert unknown.returncode == 2 and "GL999" in unknown.stderr
    assert run_cli("check", "--bogus-flag").returncode == 2


def test_text_format_and_summary(write_tree) -> None:
    root = write_tree({"bad.py": HAZARD})
    result = run_cli("check", "--no-cache", "bad.py", cwd=root)
    lines = result.stdout.splitlines()
    assert lines[0].startswith("bad.py:6:9: GL101 [host-sync-in-capture] `x.sum().item()`")
    assert any(line.startswith("bad.py:7:9: GL111 [host-indexing-in-capture]") for line in lines)
    assert lines[-1].startswith("Found 2 findings (2 errors) in 1 file checked")


def test_json_format_matches_rules_md(write_tree) -> None:
    root = write_tree({"src/bad.py": HAZARD})
    result = run_cli("check", "--no-cache", "--format", "json", "src", cwd=root)
    findings = json.loads(result.stdout)
    first = findings[0]
    assert list(first) == [
        "code",
        "name",
        "severity",
        "message",
        "path",
        "line",
        "column",
        "end_line",
        "end_column",
        "fix",
        "call_path",
    ]
    assert (first["code"], first["path"], first["line"], first["column"]) == ("GL101", "src/bad.py", 6, 9)
    assert (first["end_line"], first["end_column"]) == (6, 23)
    assert first["fix"] is None and first["call_path"] == []
    assert findings == sorted(findings, key=lambda f: (f["path"], f["line"], f["column"], f["code"]))


def test_select_ignore_extend_select_by_prefix(write_tree) -> None:
    root = write_tree({"bad.py": HAZARD})

    def codes(*flags: str) -> list[str]:
        out = run_cli("check", "--no-cache", "--format", "json", *flags, "bad.py", cwd=root)
        return sorted(f["code"] for f in json.loads(out.stdout))

    assert codes() == ["GL101", "GL111"]
    assert codes("--select", "GL101") == ["GL101"]
    assert codes("--select", "GL1", "--ignore", "GL101") == ["GL111"]
    assert codes("--ignore", "GL1") == []
    assert codes("--select", "GL101", "--ignore", "GL1") == ["GL101"]  # the more specific selector wins
    assert codes("--select", "GL101", "--extend-select", "GL111") == ["GL101", "GL111"]
    assert codes("--select", "GL101,GL111", "--ignore", "GL111") == ["GL101"]


def test_output_file_and_statistics(write_tree, tmp_path: Path) -> None:
    root = write_tree({"bad.py": HAZARD})
    report = tmp_path / "out" / "report.json"
    result = run_cli("check", "--no-cache", "--format", "json", "--output-file", str(report), "bad.py", cwd=root)
    assert result.returncode == 1 and result.stdout == ""
    assert [f["code"] for f in json.loads(report.read_text())] == ["GL101", "GL111"]
    stats = run_cli("check", "--no-cache", "--statistics", "bad.py", cwd=root)
    assert stats.returncode == 1
    *rows, total = stats.stdout.splitlines()
    assert [line.split()[:2] for line in rows] == [["1", "GL101"], ["1", "GL111"]]
    assert total == "Found 2 findings (2 errors) in 1 file checked."
    stats_json = run_cli("check", "--no-cache", "--statistics", "--format", "json", "bad.py", cwd=root)
    assert json.loads(stats_json.stdout)[0] == {
        "code": "GL101",
        "name": "host-sync-in-capture",
        "count": 1,
        "fixable": False,
    }


def test_sarif_is_valid_2_1_0_with_rules_and_locations(write_tree) -> None:
    root = write_tree({"src/bad.py": HAZARD})
    result = run_cli("check", "--no-cache", "--format", "sarif", "src", cwd=root)
    log = json.loads(result.stdout)
    assert log["version"] == "2.1.0"
    run = log["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    ids = [rule["id"] for rule in rules]
    assert "GL101" in ids and all(rule["help"]["text"] for rule in rules)
    result0 = run["results"][0]
    assert ids[result0["ruleIndex"]] == result0["ruleId"] == "GL101"
    location = result0["locations"][0]["physicalLocation"]
    assert location["artifactLocation"]["uri"] == "src/bad.py"
    assert location["region"]["startLine"] == 6 and location["region"]["startColumn"] == 9
    assert result0["level"] == "error"


def test_github_annotations(write_tree) -> None:
    root = write_tree({"bad.py": HAZARD})
    result = run_cli("check", "--no-cache", "--format", "github", "bad.py", cwd=root)
    first = result.stdout.splitlines()[0]
    assert first.startswith(
        "::error file=bad.py,line=6,col=9,endLine=6,endColumn=23,title=GL101 [host-sync-in-capture]::GL101 "
    )


def test_junit_one_case_per_file(write_tree) -> None:
    root = write_tree({"bad.py": HAZARD, "good.py": CLEAN})
    result = run_cli("check", "--no-cache", "--format", "junit", ".", cwd=root)
    suites = ET.fromstring(result.stdout)
    cases = suites.findall("./testsuite/testcase")
    assert sorted(case.get("name") for case in cases) == ["./bad.py", "./good.py"]
    failures = {case.get("name"): case.find("failure") for case in cases}
    assert failures["./good.py"] is None
    assert "GL101" in failures["./bad.py"].get("message")
    assert suites.get("tests") == "2" and suites.get("failures") == "1"


def test_rule_and_rules_commands() -> None:
    page = run_cli("rule", "GL101")
    assert page.returncode == 0
    for section in (
        "# GL101 [host-sync-in-capture]",
        "## What it does",
        "## Why is this bad?",
        "## Example",
        "## Use instead",
    ):
        assert section in page.stdout
    assert run_cli("rule", "gl107").returncode == 0
    missing = run_cli("rule", "GL999")
    assert missing.returncode == 2 and "unknown rule" in missing.stderr
    table = run_cli("rules")
    assert table.returncode == 0
    assert [line.split()[0] for line in table.stdout.splitlines()][:4] == ["GL000", "GL001", "GL002", "GL101"]


def test_discovery_skips_vcs_venv_build_and_cache_folders(write_tree) -> None:
    root = write_tree(
        {
            "pkg/mod.py": HAZARD,
            ".git/hooks/x.py": HAZARD,
            "build/lib/x.py": HAZARD,
            "__pycache__/x.py": HAZARD,
            "myenv/pyvenv.cfg": "home = /usr\n",
            "myenv/lib/x.py": HAZARD,
            "notes.txt": "not python",
        }
    )
    result = run_cli("check", "--no-cache", "--format", "json", ".", cwd=root)
    assert {f["path"] for f in json.loads(result.stdout)} == {"./pkg/mod.py"}


def test_nonexistent_path_is_a_usage_error_naming_it(write_tree) -> None:
    root = write_tree({"bad.py": HAZARD})
    result = run_cli("check", "--no-cache", "--format", "json", "missing.py", "bad.py", cwd=root)
    assert result.returncode == 2
    assert "missing.py" in result.stderr and "no such file or directory" in result.stderr
    assert result.stdout == ""
    assert run_cli("check", "--no-cache", "nosuchdir", cwd=root).returncode == 2
