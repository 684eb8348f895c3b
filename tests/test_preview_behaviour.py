"""A default-set rule's preview behaviour: reported with `--preview` only, and marked so.

GL302 is in the default set for the waits that order the default stream where the work is
on the current one, and for the cross-stream uses a function shows whole; its other
cross-stream uses stay in preview (below the 90% bar on the corpus). A user without
`--preview` must see the first and never the second, a report with
`--preview` must say which findings are preview (`"preview": true` in JSON), and a
suppression written for a preview finding must not turn into GL001 in the default mode.
"""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from graphlint.cli import main
from graphlint.registry import all_rules

GL302_DIR = Path(__file__).resolve().parent.parent / "fixtures" / "rules" / "GL302"
DEFAULT_CASE = "default_stream_waits.py"


def _check(folder: Path, monkeypatch: pytest.MonkeyPatch, *extra: str) -> list[dict]:
    monkeypatch.chdir(folder)
    out = io.StringIO()
    with redirect_stdout(out):
        main(["check", ".", "--format", "json", "--no-cache", "--jobs", "1", *extra])
    return json.loads(out.getvalue())


def _where(findings: list[dict]) -> set[tuple[str, int, str]]:
    return {(f["path"], f["line"], f["code"]) for f in findings}


def test_default_mode_reports_exactly_the_non_preview_findings(monkeypatch: pytest.MonkeyPatch) -> None:
    preview = _check(GL302_DIR, monkeypatch, "--select", "GL302", "--preview")
    default = _check(GL302_DIR, monkeypatch, "--select", "GL302")
    assert default, "the default set's GL302 behaviour reports nothing on its fixtures"
    assert _where(default) == _where(f for f in preview if not f.get("preview"))
    assert DEFAULT_CASE in {f["path"].removeprefix("./") for f in default}
    assert all("preview" not in f for f in default)
    cross = [f for f in preview if "is produced on" in f["message"]]
    shown_whole = [f for f in cross if f["path"].endswith("shown_whole.py")]
    assert any(not f.get("preview") for f in shown_whole), "no cross-stream use is vouched for in the default set"
    assert any(f.get("preview") is True for f in shown_whole), "the look-alikes with a hidden ordering are not preview"


def test_a_preview_rule_marks_nothing_its_code_says_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """GL303 is a preview rule: its findings need no mark, `graphlint rules` says so."""
    assert all_rules()["GL303"].preview
    findings = _check(GL302_DIR.parent / "GL303", monkeypatch, "--select", "GL303", "--preview")
    assert findings and all("preview" not in f for f in findings)


def test_a_suppressed_preview_finding_is_no_unused_suppression(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "m.py").write_text(
        "import torch\n\nside = torch.cuda.Stream()\n\n\n"
        "def f(x: torch.Tensor):\n"
        "    h = x * 2\n"
        "    with torch.cuda.stream(side):\n"
        "        y = h + 1  # noqa: GL302\n"
        "    torch.cuda.current_stream().wait_stream(side)\n"
        "    return y\n",
        encoding="utf-8",
    )
    assert _check(tmp_path, monkeypatch, "--select", "GL") == []
    assert _check(tmp_path, monkeypatch, "--select", "GL", "--preview") == []
    (tmp_path / "m.py").write_text(
        (tmp_path / "m.py").read_text(encoding="utf-8").replace("  # noqa: GL302", ""), encoding="utf-8"
    )
    assert [f["code"] for f in _check(tmp_path, monkeypatch, "--select", "GL", "--preview")] == ["GL302"]
