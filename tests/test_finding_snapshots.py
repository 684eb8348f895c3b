"""The snapshot renderer and its update switch, on findings the fixtures do not produce."""

from __future__ import annotations

from pathlib import Path

import pytest

from finding_snapshots import REWRITTEN, assert_matches_snapshot, render_findings

SOURCE = b"import torch\n\n\ndef f(x):\n    return x.item()\n"


def _finding(path: str, fix: dict | None = None, call_path: list | None = None) -> dict:
    return {
        "code": "GL101",
        "name": "host-sync-in-capture",
        "severity": "error",
        "message": "`x.item()` copies",
        "path": path,
        "line": 5,
        "column": 12,
        "end_line": 5,
        "end_column": 20,
        "fix": fix,
        "call_path": call_path or [],
    }


def test_absolute_paths_under_the_root_render_relative(tmp_path: Path) -> None:
    file = tmp_path / "pkg" / "mod.py"
    hop = {"path": str(tmp_path / "main.py"), "line": 7, "function": "<module>"}
    text = render_findings([_finding(str(file), call_path=[hop])], lambda p: SOURCE, root=str(tmp_path))
    assert str(tmp_path) not in text
    assert "pkg/mod.py:5:12-5:20 GL101 host-sync-in-capture (error)" in text
    assert "    main.py:7 in <module>" in text
    assert "    5 |     return x.item()\n      |            ^^^^^^^^\n" in text  # carets under the span


def test_a_fix_the_engine_would_refuse_is_marked(tmp_path: Path) -> None:
    broken = {
        "applicability": "unsafe",
        "message": "breaks the file",
        "edits": [{"line": 5, "column": 12, "end_line": 5, "end_column": 20, "content": "x.item("}],
    }
    text = render_findings([_finding("mod.py", fix=broken)], lambda p: SOURCE)
    assert "  fix (unsafe): breaks the file" in text
    assert "    | -    return x.item()" in text and "    | +    return x.item(" in text
    assert "the engine refuses this result: the fixed source would not parse" in text


def test_missing_snapshot_fails_unless_updating(tmp_path: Path) -> None:
    snapshot = tmp_path / "case.py.snap"
    with pytest.raises(AssertionError, match=r"no snapshot case\.py\.snap yet: run `pytest --update-snapshots`"):
        assert_matches_snapshot(snapshot, "0 findings\n", update=False)
    assert not snapshot.exists()
    assert_matches_snapshot(snapshot, "0 findings\n", update=True)
    assert snapshot.read_text() == "0 findings\n" and REWRITTEN[-1] == snapshot
    REWRITTEN.remove(snapshot)  # not a fixture snapshot: keep it out of the session's summary
    with pytest.raises(AssertionError, match=r"(?s)differs.*-0 findings.*\+1 finding"):
        assert_matches_snapshot(snapshot, "1 finding\n", update=False)
