"""Adopting graphlint on a repository that already has findings: `--add-noqa` and baselines."""

from __future__ import annotations

import ast
import json

from conftest import HAZARD, run_cli

AWKWARD = '''\
import torch

g = torch.cuda.CUDAGraph()
x = torch.zeros(4, device="cuda")
with torch.cuda.graph(g):
    y = x.sum().item()  # noqa: E501
    z = x[[0, 1]]  # a comment
    w = x.sum().item() + \\
        x.sum().item()
    s = """
    """ + str(x.sum().item())
'''


def test_add_noqa_suppresses_findings_in_place_and_keeps_the_file_valid(write_tree) -> None:
    root = write_tree({"bad.py": AWKWARD})
    result = run_cli("check", "--no-cache", "--add-noqa", "bad.py", cwd=root)
    assert result.returncode == 0
    text = (root / "bad.py").read_text()
    ast.parse(text)
    lines = text.splitlines()
    assert lines[5] == "    y = x.sum().item()  # noqa: E501, GL101"  # merged into the existing noqa
    assert lines[6] == "    z = x[[0, 1]]  # a comment  # noqa: GL111"
    assert lines[7].endswith("\\") and lines[8].endswith("# noqa: GL101")
    # Lines that cannot take a comment are named, not broken:
    assert "bad.py:8:" in result.stderr and "bad.py:11:" in result.stderr
    left = run_cli("check", "--no-cache", "--format", "json", "bad.py", cwd=root)
    assert sorted(f["line"] for f in json.loads(left.stdout)) == [8, 11]
    again = run_cli("check", "--no-cache", "--add-noqa", "bad.py", cwd=root)
    assert "added 0 noqa" in again.stderr and (root / "bad.py").read_text() == text


def test_baseline_reports_only_new_findings_even_after_lines_move(write_tree) -> None:
    root = write_tree({"src/bad.py": HAZARD})
    written = run_cli("check", "--no-cache", "--write-baseline", "graphlint-baseline.json", "src", cwd=root)
    assert written.returncode == 0 and "wrote 2 findings" in written.stderr
    clean = run_cli("check", "--no-cache", "--baseline", "graphlint-baseline.json", "src", cwd=root)
    assert clean.returncode == 0, clean.stdout
    # Lines inserted above move the old findings; a new hazard is still reported.
    moved = HAZARD.replace("import torch\n", "import torch\nimport os\n\n") + "    w = x.max().item()\n"
    (root / "src/bad.py").write_text(moved)
    result = run_cli(
        "check", "--no-cache", "--format", "json", "--baseline", "graphlint-baseline.json", "src", cwd=root
    )
    assert [(f["line"], f["code"]) for f in json.loads(result.stdout)] == [(10, "GL101")]
    # The same baseline applies when the file is named from another folder:
    inner = run_cli("check", "--no-cache", "-q", "--baseline", "../graphlint-baseline.json", "bad.py", cwd=root / "src")
    assert inner.stdout.count("GL101") == 1
    missing = run_cli("check", "--no-cache", "--baseline", "nope.json", "src", cwd=root)
    assert missing.returncode == 2 and "nope.json" in missing.stderr
