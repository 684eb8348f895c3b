"""Preview rules (below 90% precision on the real-code corpus) are off unless asked for, as in ruff."""

from __future__ import annotations

import json

from conftest import run_cli
from graphlint.registry import all_rules

# GL302 (preview) and GL101 (default set) in one file.
SOURCE = """\
import torch

s = torch.cuda.Stream()
x = torch.ones(4, device="cuda")
with torch.cuda.stream(s):
    y = x * 2
z = y + 1
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g):
    n = x.sum().item()
"""


def _codes(root, *args: str) -> set[str]:
    result = run_cli("check", "--no-cache", "--format", "json", *args, "m.py", cwd=root)
    assert result.returncode in (0, 1), result.stderr
    return {f["code"] for f in json.loads(result.stdout)}


def test_preview_rules_run_only_in_preview_mode(write_tree) -> None:
    root = write_tree({"m.py": SOURCE})
    assert all_rules()["GL302"].preview and not all_rules()["GL101"].preview
    default = _codes(root)
    assert "GL101" in default and "GL302" not in default
    assert {"GL101", "GL302"} <= _codes(root, "--preview")
    # Selecting a preview rule by its code does not turn preview on (ruff's behaviour).
    assert "GL302" not in _codes(root, "--select", "GL302")
    assert _codes(root, "--select", "GL302", "--preview") == {"GL302"}


def test_preview_from_configuration_and_the_flag_that_overrides_it(write_tree) -> None:
    root = write_tree({"m.py": SOURCE, "pyproject.toml": "[tool.graphlint]\npreview = true\n"})
    assert "GL302" in _codes(root)
    assert "GL302" not in _codes(root, "--no-preview")
    bad = write_tree({"pyproject.toml": '[tool.graphlint]\npreview = "yes"\n'})
    result = run_cli("check", "--no-cache", "m.py", cwd=bad)
    assert result.returncode == 2 and "'preview' must be true or false" in result.stderr


def test_rules_table_and_doc_page_say_preview_with_the_measured_reason() -> None:
    table = run_cli("rules").stdout
    line = next(line for line in table.splitlines() if line.startswith("GL302"))
    assert "preview" in line
    page = run_cli("rule", "GL302").stdout
    assert "This rule is in preview" in page and "labelled findings is real" in " ".join(page.split())
    assert "preview" not in next(line for line in table.splitlines() if line.startswith("GL101"))
