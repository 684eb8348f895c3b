"""The output formats ruff users reach for besides text: concise, pylint, gitlab, and SARIF's
fingerprints and rule help."""

from __future__ import annotations

import json

from conftest import HAZARD, run_cli


def _report(root, fmt: str) -> str:
    result = run_cli("check", "--no-cache", "--format", fmt, "bad.py", cwd=root)
    assert result.returncode == 1, result.stderr
    return result.stdout


def test_concise_is_one_line_per_finding_then_the_summary(write_tree) -> None:
    root = write_tree({"bad.py": HAZARD})
    *lines, summary = _report(root, "concise").splitlines()
    assert [line.split(" ", 2)[:2] for line in lines] == [["bad.py:6:9:", "GL101"], ["bad.py:7:9:", "GL111"]]
    assert summary == "Found 2 findings (2 errors) in 1 file checked."


def test_pylint_lines(write_tree) -> None:
    root = write_tree({"bad.py": HAZARD})
    lines = _report(root, "pylint").splitlines()
    assert [line.split(" ", 2)[:2] for line in lines] == [["bad.py:6:", "[GL101]"], ["bad.py:7:", "[GL111]"]]


def _gitlab(root) -> list[dict]:
    return json.loads(_report(root, "gitlab"))


def test_gitlab_code_quality_issues_keep_their_fingerprint_when_lines_move(write_tree) -> None:
    root = write_tree({"bad.py": HAZARD})
    issues = _gitlab(root)
    assert [(i["check_name"], i["severity"], i["location"]["path"]) for i in issues] == [
        ("GL101", "major", "bad.py"),
        ("GL111", "major", "bad.py"),
    ]
    assert issues[0]["location"]["positions"]["begin"] == {"line": 6, "column": 9}
    assert len({i["fingerprint"] for i in issues}) == 2
    (root / "bad.py").write_text("# a comment above\n" + HAZARD)
    moved = _gitlab(root)
    assert [i["location"]["positions"]["begin"]["line"] for i in moved] == [7, 8]
    assert [i["fingerprint"] for i in moved] == [i["fingerprint"] for i in issues]


def test_identical_findings_get_distinct_fingerprints(write_tree) -> None:
    root = write_tree({"bad.py": HAZARD + "    y = x.sum().item()\n"})
    issues = [i for i in _gitlab(root) if i["check_name"] == "GL101"]
    assert len(issues) == 2 and issues[0]["description"] == issues[1]["description"]
    assert issues[0]["fingerprint"] != issues[1]["fingerprint"]


def test_sarif_results_carry_partial_fingerprints_and_rules_markdown_help(write_tree) -> None:
    root = write_tree({"bad.py": HAZARD})
    run = json.loads(_report(root, "sarif"))["runs"][0]
    gitlab = {i["check_name"]: i["fingerprint"] for i in _gitlab(root)}
    assert {r["ruleId"]: r["partialFingerprints"]["graphlint/v1"] for r in run["results"]} == gitlab
    rule = next(r for r in run["tool"]["driver"]["rules"] if r["id"] == "GL101")
    assert rule["help"]["markdown"].startswith("# GL101 [host-sync-in-capture]")
    assert "```" not in rule["help"]["text"] and rule["help"]["text"]


_AUTOCAST = """import torch

g = torch.cuda.CUDAGraph()
x = torch.zeros(4, device="cuda")
with torch.autocast("cuda"):
    with torch.cuda.graph(g):
        y = x * 2
"""


def _apply(text: str, suggestions: list[dict]) -> str:
    """Apply reviewdog suggestions (1-based lines and columns) the way reviewdog does."""
    lines = text.splitlines(keepends=True)
    for suggestion in sorted(suggestions, key=lambda s: (s["range"]["start"]["line"], s["range"]["start"]["column"])):
        start, end = suggestion["range"]["start"], suggestion["range"]["end"]
        before = lines[start["line"] - 1][: start["column"] - 1]
        after = lines[end["line"] - 1][end["column"] - 1 :]
        lines[start["line"] - 1 : end["line"]] = [before + suggestion["text"] + after]
    return "".join(lines)


def test_rdjson_gives_reviewdog_its_diagnostics_and_the_fix_as_a_suggestion(write_tree) -> None:
    root = write_tree({"bad.py": HAZARD, "amp.py": _AUTOCAST})
    result = run_cli("check", "--no-cache", "--format", "rdjson", ".", cwd=root)
    report = json.loads(result.stdout)
    assert report["source"]["name"] == "graphlint"
    found = {
        (d["location"]["path"], d["code"]["value"], d["location"]["range"]["start"]["line"])
        for d in report["diagnostics"]
    }
    assert found == {("bad.py", "GL101", 6), ("bad.py", "GL111", 7), ("amp.py", "GL107", 5)}
    assert {d["severity"] for d in report["diagnostics"]} == {"ERROR"}
    (autocast,) = [d for d in report["diagnostics"] if d["code"]["value"] == "GL107"]
    suggested = _apply(_AUTOCAST, autocast["suggestions"])
    run_cli("check", "--no-cache", "--fix", "amp.py", cwd=root)
    assert suggested == (root / "amp.py").read_text()  # the suggestion is what --fix writes
    assert "cache_enabled=False" in suggested
