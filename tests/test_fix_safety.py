"""`--fix` and `--add-noqa` never lose an edit: a file changed or deleted while the run
analysed the project is skipped with a note and the other files are still written; a PEP 263
file is edited in its own encoding."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import HAZARD
from graphlint import cli

# GL107's fix is safe: `cache_enabled=False` is added to the autocast.
FIXABLE = """\
import torch

x = torch.zeros(4, 4, device="cuda")
g = torch.cuda.CUDAGraph()
with torch.autocast("cuda", dtype=torch.bfloat16):
    with torch.cuda.graph(g):
        y = x * 2
"""
FIXED = 'torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False)'


def _after_the_analysis(monkeypatch: pytest.MonkeyPatch, action: Callable[[], None]) -> None:
    """Run ``action`` once, right after the first check of the run: an edit made meanwhile."""
    real = cli._run_check
    calls = []

    def run_then_act(*args, **kwargs):
        result = real(*args, **kwargs)
        if not calls:
            calls.append(1)
            action()
        return result

    monkeypatch.setattr(cli, "_run_check", run_then_act)


def _two_files(tmp_path: Path, source: str) -> tuple[Path, Path]:
    first, second = tmp_path / "a.py", tmp_path / "b.py"
    first.write_text(source)
    second.write_text(source)
    return first, second


def test_fix_skips_a_file_edited_during_the_run_and_fixes_the_rest(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    edited, other = _two_files(tmp_path, FIXABLE)
    users_edit = FIXABLE + "# the user's edit\n"
    _after_the_analysis(monkeypatch, lambda: edited.write_text(users_edit))
    cli.main(["check", "--no-cache", "--fix", "--select", "GL107", "."])
    assert edited.read_text() == users_edit
    assert FIXED in other.read_text()
    assert "not writing ./a.py: the file changed since it was read" in capsys.readouterr().err


def test_fix_skips_a_file_deleted_during_the_run(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    deleted, other = _two_files(tmp_path, FIXABLE)
    _after_the_analysis(monkeypatch, deleted.unlink)
    code = cli.main(["check", "--no-cache", "--fix", "--select", "GL107", "."])
    assert not deleted.exists() and FIXED in other.read_text()
    err = capsys.readouterr().err
    assert "not writing ./a.py: the file was deleted since it was read" in err and "Traceback" not in err
    assert code != 2


def test_add_noqa_skips_a_file_edited_during_the_run(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    edited, other = _two_files(tmp_path, HAZARD)
    users_edit = HAZARD + "# the user's edit\n"
    _after_the_analysis(monkeypatch, lambda: edited.write_text(users_edit))
    cli.main(["check", "--no-cache", "--add-noqa", "."])
    assert edited.read_text() == users_edit
    assert "# noqa: GL101" in other.read_text()
    assert "not writing ./a.py: the file changed since it was read" in capsys.readouterr().err


LATIN1 = "# -*- coding: latin-1 -*-\n# café\n" + FIXABLE


def test_a_pep_263_file_is_fixed_in_its_own_encoding(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "latin.py"
    path.write_bytes(LATIN1.encode("latin-1"))
    cli.main(["check", "--no-cache", "--fix", "--select", "GL107", "."])
    data = path.read_bytes()
    assert b"# caf\xe9\n" in data  # still latin-1, not re-encoded as UTF-8
    assert FIXED in data.decode("latin-1")


def test_add_noqa_keeps_a_pep_263_file_in_its_encoding(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "latin.py"
    path.write_bytes(("# -*- coding: latin-1 -*-\n# café\n" + HAZARD).encode("latin-1"))
    cli.main(["check", "--no-cache", "--add-noqa", "."])
    data = path.read_bytes()
    assert b"# caf\xe9\n" in data and b"# noqa: GL101" in data
