"""`[tool.graphlint]` configuration and suppression comments, through the real command."""

from __future__ import annotations

import json

from conftest import HAZARD, run_cli


def _codes(result) -> list[tuple[str, str]]:
    assert result.returncode in (0, 1), result.stderr
    return sorted((f["path"], f["code"]) for f in json.loads(result.stdout))


def test_nearest_pyproject_governs_each_file(write_tree) -> None:
    root = write_tree(
        {
            "pyproject.toml": "[tool.graphlint]\nignore = ['GL111']\n",
            "a.py": HAZARD,
            "sub/pyproject.toml": "[tool.graphlint]\nselect = ['GL111']\n",
            "sub/b.py": HAZARD,
            "other/pyproject.toml": "[project]\nname = 'x'\n",  # no [tool.graphlint]: skipped
            "other/c.py": HAZARD,
        }
    )
    result = run_cli("check", "--no-cache", "--format", "json", ".", cwd=root)
    assert _codes(result) == [("./a.py", "GL101"), ("./other/c.py", "GL101"), ("./sub/b.py", "GL111")]


def test_per_file_ignores_and_exclude(write_tree) -> None:
    root = write_tree(
        {
            "pyproject.toml": (
                "[tool.graphlint]\n"
                "exclude = ['generated', 'legacy/*.py']\n"
                "[tool.graphlint.per-file-ignores]\n"
                "'tests/*' = ['GL1']\n"
                "'scripts/run.py' = ['GL111']\n"
            ),
            "tests/test_x.py": HAZARD,
            "scripts/run.py": HAZARD,
            "generated/g.py": HAZARD,
            "legacy/old.py": HAZARD,
            "src/m.py": HAZARD,
        }
    )
    result = run_cli("check", "--no-cache", "--format", "json", ".", cwd=root)
    assert _codes(result) == [("./scripts/run.py", "GL101"), ("./src/m.py", "GL101"), ("./src/m.py", "GL111")]


def test_config_errors_name_the_key_and_file(write_tree) -> None:
    root = write_tree({"pyproject.toml": "[tool.graphlint]\nselectt = ['GL1']\n", "a.py": HAZARD})
    result = run_cli("check", "--no-cache", ".", cwd=root)
    assert result.returncode == 2
    assert "selectt" in result.stderr and "pyproject.toml" in result.stderr
    (root / "pyproject.toml").write_text("[tool.graphlint]\nselect = 'GL1'\n")
    result = run_cli("check", "--no-cache", ".", cwd=root)
    assert result.returncode == 2 and "'select' must be a list" in result.stderr
    (root / "pyproject.toml").write_text("[tool.graphlint]\nignore = ['GL9']\n")
    result = run_cli("check", "--no-cache", ".", cwd=root)
    assert result.returncode == 2 and "GL9" in result.stderr
    (root / "pyproject.toml").write_text("[tool.graphlint\n")
    result = run_cli("check", "--no-cache", ".", cwd=root)
    assert result.returncode == 2 and "invalid TOML" in result.stderr


def test_explicit_config_file(write_tree) -> None:
    root = write_tree({"lint.toml": "select = ['GL111']\n", "a.py": HAZARD})
    result = run_cli("check", "--no-cache", "--format", "json", "--config", "lint.toml", "a.py", cwd=root)
    assert _codes(result) == [("a.py", "GL111")]
    missing = run_cli("check", "--no-cache", "--config", "nope.toml", "a.py", cwd=root)
    assert missing.returncode == 2 and "nope.toml" in missing.stderr


def test_capture_entry_points_from_config(write_tree) -> None:
    source = """\
from mylib.graphs import capture

def run(x):
    with capture(None):
        return x.sum().item()
"""
    root = write_tree({"a.py": source})
    assert _codes(run_cli("check", "--no-cache", "--format", "json", "a.py", cwd=root)) == []
    (root / "pyproject.toml").write_text("[tool.graphlint]\ncapture-entry-points = ['mylib.graphs.capture']\n")
    assert _codes(run_cli("check", "--no-cache", "--format", "json", "a.py", cwd=root)) == [("a.py", "GL101")]


def test_suppressions_and_unused_suppressions(write_tree) -> None:
    source = HAZARD.replace("    y = x.sum().item()", "    y = x.sum().item()  # noqa: GL101").replace(
        "    z = x[[0, 1]]", "    z = x[[0, 1]]  # graphlint: ignore[GL111, GL102]"
    )
    source += "w = 1  # noqa: GL104\nv = 2  # noqa\n"
    root = write_tree({"a.py": source})
    findings = json.loads(run_cli("check", "--no-cache", "--format", "json", "a.py", cwd=root).stdout)
    assert [(f["line"], f["code"]) for f in findings] == [(7, "GL001"), (8, "GL001")]
    assert "GL102" in findings[0]["message"] and "GL104" in findings[1]["message"]
    assert findings[0]["severity"] == "warning"
    # A code that is not enabled is not judged.
    narrowed = json.loads(
        run_cli("check", "--no-cache", "--format", "json", "--ignore", "GL102,GL104", "a.py", cwd=root).stdout
    )
    assert narrowed == []


def test_bare_noqa_and_skip_file(write_tree) -> None:
    root = write_tree(
        {
            "a.py": HAZARD.replace("    y = x.sum().item()", "    y = x.sum().item()  # noqa"),
            "b.py": "# graphlint: skip-file\n" + HAZARD,
            "c.py": "# graphlint: skip-file\ndef broken(:\n",
        }
    )
    result = run_cli("check", "--no-cache", "--format", "json", ".", cwd=root)
    assert _codes(result) == [("./a.py", "GL111")]


BLOCKS = """\
import torch

g = torch.cuda.CUDAGraph()
x = torch.zeros(4, device="cuda")
with torch.cuda.graph(g):
    # graphlint: disable[GL101]
    y = x.sum().item()
    z = x[[0, 1]]
    s = "# graphlint: enable[GL101]"
    # graphlint: enable[GL101]
    w = x.max().item()
    # graphlint: disable[GL111, GL999]
    u = x[[1, 0]]
    # graphlint: disable[GL102]
    v = 1
"""


def test_block_suppression_between_disable_and_enable(write_tree) -> None:
    root = write_tree({"b.py": BLOCKS})
    result = run_cli("check", "--no-cache", "--format", "json", "b.py", cwd=root)
    found = sorted((f["line"], f["code"], f["message"].split(":")[0]) for f in json.loads(result.stdout))
    assert found == [
        (8, "GL111", "`x[[0, 1]]` indexes with a Python list"),  # only GL101 is disabled there
        (11, "GL101", "`x.max().item()` copies a tensor to the host"),  # after the enable (not the string's)
        (12, "GL001", "unknown code in suppression"),  # GL111's block (to the file's end) is used
        (14, "GL001", "unused suppression for GL102"),
    ]


def test_the_runtime_findings_honour_blocks_too(tmp_path) -> None:
    from graphlint.findings import Finding
    from graphlint.registry import get_rule
    from graphlint.runtime_sanitizer.analysis.postprocess import suppressed

    path = tmp_path / "b.py"
    path.write_text(BLOCKS)
    rule = get_rule("GL101")
    cache: dict = {}
    assert suppressed(Finding.of(rule, "m", str(path), (7, 1, 7, 1)), cache)
    assert not suppressed(Finding.of(rule, "m", str(path), (11, 1, 11, 1)), cache)
