"""The fix engine: safe vs unsafe, atomic writes, idempotence, refusing a broken result, --diff."""

from __future__ import annotations

import ast
import os

import pytest

from conftest import run_cli
from graphlint.findings import Edit, Finding, Fix
from graphlint.fixes import apply_edits, fix_file, write_atomic

SOURCE = """\
import torch

model = torch.nn.Linear(4, 4).cuda()
opt = torch.optim.Adam(model.parameters(), lr=1e-3,)
x = torch.zeros(4, 4, device="cuda")
g = torch.cuda.CUDAGraph()
with torch.autocast("cuda", dtype=torch.bfloat16):
    with torch.cuda.graph(g):
        loss = model(x).sum()
        loss.backward()
        opt.step()
"""


def test_fix_applies_safe_fixes_only(tmp_path) -> None:
    path = tmp_path / "train.py"
    path.write_text(SOURCE)
    result = run_cli("check", "--no-cache", "--fix", "--select", "GL106,GL107", "train.py", cwd=tmp_path)
    text = path.read_text()
    assert 'torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False)' in text
    assert "capturable" not in text  # GL106's fix is unsafe
    assert result.returncode == 1 and "GL106" in result.stdout and "GL107" not in result.stdout
    assert "fixed 1 finding" in result.stderr


def test_unsafe_fixes_and_idempotence(tmp_path) -> None:
    path = tmp_path / "train.py"
    path.write_text(SOURCE)
    first = run_cli(
        "check", "--no-cache", "--fix", "--unsafe-fixes", "--select", "GL106,GL107", "train.py", cwd=tmp_path
    )
    assert first.returncode == 0, first.stdout
    fixed = path.read_text()
    assert "lr=1e-3, capturable=True,)" in fixed  # after the last argument, before the trailing comma
    ast.parse(fixed)
    second = run_cli(
        "check", "--no-cache", "--fix", "--unsafe-fixes", "train.py", "--select", "GL106,GL107", cwd=tmp_path
    )
    assert second.returncode == 0 and path.read_text() == fixed


def test_diff_prints_and_writes_nothing(tmp_path) -> None:
    path = tmp_path / "train.py"
    path.write_text(SOURCE)
    before = os.stat(path)
    result = run_cli("check", "--no-cache", "--diff", "--select", "GL107", "train.py", cwd=tmp_path)
    assert result.returncode == 1
    assert "--- a/train.py" in result.stdout and "+with torch.autocast(" in result.stdout
    assert path.read_text() == SOURCE and os.stat(path).st_mtime_ns == before.st_mtime_ns
    clean = run_cli("check", "--no-cache", "--diff", "--select", "GL101", "train.py", cwd=tmp_path)
    assert clean.returncode == 0 and clean.stdout == ""


def test_unsafe_fixes_requires_fix_or_diff(tmp_path) -> None:
    (tmp_path / "a.py").write_text("x = 1\n")
    result = run_cli("check", "--no-cache", "--unsafe-fixes", "a.py", cwd=tmp_path)
    assert result.returncode == 2


def _finding(*edits: Edit) -> Finding:
    return Finding("GL107", "autocast-cache-with-graphs", "error", "m", "a.py", 1, 1, 1, 1, Fix("safe", "m", edits))


def test_overlapping_fixes_are_resolved_in_order_and_duplicates_once() -> None:
    text = "abcdef\n"
    first = _finding(Edit(1, 2, 1, 4, "XY"))
    overlapping = _finding(Edit(1, 3, 1, 5, "ZZ"))
    duplicate = _finding(Edit(1, 2, 1, 4, "XY"))
    later = _finding(Edit(1, 6, 1, 6, "!"))
    result, applied = apply_edits(text, [first, overlapping, duplicate, later])
    assert result == "aXYde!f\n"
    assert applied == [first, duplicate, later]


def test_a_fix_that_would_not_parse_is_refused(tmp_path) -> None:
    original = "x = f(1)\n"
    broken = _finding(Edit(1, 8, 1, 9, ""))  # deletes the closing parenthesis
    outcome = fix_file("a.py", original, [broken], unsafe=False)
    assert outcome.fixed == original and outcome.applied == []
    assert "would not parse" in outcome.error


def test_atomic_write_keeps_permissions_and_leaves_no_temp(tmp_path) -> None:
    path = tmp_path / "a.py"
    path.write_text("old\n")
    os.chmod(path, 0o640)
    write_atomic(str(path), "new\n")
    assert path.read_text() == "new\n"
    assert oct(os.stat(path).st_mode & 0o777) == oct(0o640)
    assert [p.name for p in tmp_path.iterdir()] == ["a.py"]


def test_atomic_write_failure_leaves_original(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "a.py"
    path.write_text("old\n")

    def fail(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OSError):
        write_atomic(str(path), "new\n")
    assert path.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["a.py"]


REPLAY = """\
import torch

model = torch.nn.Linear(8, 8).cuda()
static_x = torch.zeros(4, 8, device="cuda")
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g):
    static_out = model(static_x)


def collect(loader):
    results = []
    for batch in loader:
        static_x = batch
        g.replay()
        results.append(static_out)
    return results
"""


def test_replay_fixes_clone_out_and_copy_in(tmp_path) -> None:
    path = tmp_path / "serve.py"
    path.write_text(REPLAY)
    safe = run_cli("check", "--no-cache", "--fix", "--select", "GL2", "serve.py", cwd=tmp_path)
    text = path.read_text()
    assert "results.append(static_out.clone())" in text and "static_x = batch" in text
    assert "GL202" in safe.stdout and safe.returncode == 1
    unsafe = run_cli("check", "--no-cache", "--fix", "--unsafe-fixes", "--select", "GL2", "serve.py", cwd=tmp_path)
    assert unsafe.returncode == 0, unsafe.stdout
    assert "        static_x.copy_(batch)\n" in path.read_text()
    ast.parse(path.read_text())
