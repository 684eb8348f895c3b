"""The fix engine: safe vs unsafe, atomic writes, idempotence, refusing a broken result, --diff."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import run_cli
from graphlint.findings import Finding, Fix
from graphlint.fixing.apply import fix_file, write_atomic
from graphlint.fixing.ops import AppendMethodCall, FixOperation, SetKeyword

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


def _finding(*operations: FixOperation, unsafe: bool = False) -> Finding:
    fix = Fix("unsafe" if unsafe else "safe", "m", operations)
    return Finding("GL107", "autocast-cache-with-graphs", "error", "m", "a.py", 1, 1, 1, 1, fix)


def test_overlapping_fixes_wait_and_identical_ones_apply_once() -> None:
    text = "y = f(a)\nz = g(b)\n"
    first = _finding(AppendMethodCall((1, 5, 1, 9), "clone"))
    overlapping = _finding(SetKeyword((1, 5, 1, 9), "k", "1"))  # the same call: next pass
    duplicate = _finding(AppendMethodCall((1, 5, 1, 9), "clone"))
    later = _finding(SetKeyword((2, 5, 2, 9), "k", "1"))
    outcome = fix_file("a.py", text, [first, overlapping, duplicate, later], unsafe=False)
    assert outcome.fixed == "y = f(a).clone()\nz = g(b, k=1)\n"
    assert outcome.applied == [first, duplicate, later]


def test_a_fix_that_would_not_parse_is_refused() -> None:
    original = "x = f(1)\n"
    broken = _finding(AppendMethodCall((1, 1, 1, 2), "clone"))  # `x.clone() = f(1)`: libcst renders it, ast refuses
    outcome = fix_file("a.py", original, [broken], unsafe=False)
    assert outcome.fixed == original and outcome.applied == []
    assert "would not parse" in outcome.error


def test_a_fix_whose_node_is_gone_is_refused_and_nothing_applied() -> None:
    original = "x = f(1)\ny = g(2)\n"
    good = _finding(SetKeyword((1, 5, 1, 9), "k", "1"))
    stale = _finding(AppendMethodCall((2, 5, 2, 12), "clone"))  # no expression spans these columns
    outcome = fix_file("a.py", original, [good, stale], unsafe=False)
    assert outcome.fixed == original and outcome.applied == []
    assert "line 2, column 5" in outcome.error and "changed since it was checked" in outcome.error


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


MULTILINE = """\
import torch

model = torch.nn.Linear(4, 4).cuda()
x = torch.zeros(4, 4, device="cuda")
g = torch.cuda.CUDAGraph()
with torch.autocast(
    "cuda",
    dtype=torch.bfloat16,  # the model's dtype
):
    with torch.cuda.graph(g):
        loss = model(x).sum()
"""

MULTILINE_FIXED = MULTILINE.replace(
    "    dtype=torch.bfloat16,  # the model's dtype\n",
    "    dtype=torch.bfloat16,  # the model's dtype\n    cache_enabled=False,\n",
)


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_fix_keeps_comments_and_trailing_commas_of_a_multi_line_call(tmp_path, newline: str) -> None:
    path = tmp_path / "train.py"
    path.write_bytes(MULTILINE.replace("\n", newline).encode())
    result = run_cli("check", "--no-cache", "--fix", "--select", "GL107", "train.py", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert path.read_bytes() == MULTILINE_FIXED.replace("\n", newline).encode()


def test_json_and_sarif_edits_are_the_fix(tmp_path) -> None:
    """Tooling that applies the reported edit gets what `--fix` writes."""
    path = tmp_path / "train.py"
    path.write_text(MULTILINE)
    (finding,) = json.loads(
        run_cli("check", "--no-cache", "--format", "json", "--select", "GL107", "train.py", cwd=tmp_path).stdout
    )
    assert set(finding["fix"]) == {"applicability", "message", "edits"}
    (edit,) = finding["fix"]["edits"]
    assert _apply(MULTILINE, edit) == MULTILINE_FIXED
    sarif = json.loads(
        run_cli("check", "--no-cache", "--format", "sarif", "--select", "GL107", "train.py", cwd=tmp_path).stdout
    )
    (replacement,) = sarif["runs"][0]["results"][0]["fixes"][0]["artifactChanges"][0]["replacements"]
    region = replacement["deletedRegion"]
    assert (region["startLine"], region["startColumn"], region["endLine"], region["endColumn"]) == (
        edit["line"],
        edit["column"],
        edit["end_line"],
        edit["end_column"],
    )
    assert replacement["insertedContent"]["text"] == edit["content"]


def _apply(text: str, edit: dict) -> str:
    starts = [0] + [i + 1 for i, char in enumerate(text) if char == "\n"]
    start = starts[edit["line"] - 1] + edit["column"] - 1
    end = starts[edit["end_line"] - 1] + edit["end_column"] - 1
    return text[:start] + edit["content"] + text[end:]


def test_diff_of_a_multi_line_call(tmp_path) -> None:
    (tmp_path / "train.py").write_text(MULTILINE)
    result = run_cli("check", "--no-cache", "--diff", "--select", "GL107", "train.py", cwd=tmp_path)
    assert result.returncode == 1
    changed = [line for line in result.stdout.splitlines() if line[:1] in "+-" and line[:3] not in ("+++", "---")]
    assert changed == ["+    cache_enabled=False,"]


def test_a_file_changed_under_the_fix_is_refused_loudly(tmp_path, monkeypatch, capsys) -> None:
    """The fix names nodes by position: text that no longer has them is left as it is."""
    from graphlint import cli
    from graphlint.fixing import apply as fixes

    path = tmp_path / "train.py"
    path.write_text(SOURCE)
    monkeypatch.setattr(
        cli,
        "fix_file",
        lambda display, text, found, unsafe: fixes.fix_file(display, "\n" + text.replace("    ", "  "), found, unsafe),
    )
    monkeypatch.chdir(tmp_path)
    status = cli.main(["check", "--no-cache", "--fix", "--select", "GL107", "train.py"])
    err = capsys.readouterr().err
    assert status == 1 and path.read_text() == SOURCE
    assert "not fixing train.py: the fix at line 7, column 6 names code that is not there" in err


def test_overlapping_fixes_converge_over_passes() -> None:
    """Two fixes of one call: the second waits, and the next analysis finds it again."""

    def analyse(text: str) -> list[Finding]:
        call = next(n for n in ast.walk(ast.parse(text)) if isinstance(n, ast.Call) and ast.unparse(n.func) == "f")
        span = (call.lineno, call.col_offset + 1, call.end_lineno, call.end_col_offset + 1)
        found = []
        if not any(k.arg == "k" for k in call.keywords):
            found.append(_finding(SetKeyword(span, "k", "1")))
        if "f(a, k=1).clone()" not in text and "f(a).clone()" not in text:
            found.append(_finding(AppendMethodCall(span, "clone")))
        return found

    text, passes = "y = f(a)  # c\n", 0
    while found := analyse(text):
        outcome = fix_file("a.py", text, found, unsafe=False)
        assert outcome.error is None and outcome.applied == found[:1]
        text, passes = outcome.fixed, passes + 1
    assert text == "y = f(a, k=1).clone()  # c\n" and passes == 2


CROSS_FILE_SERVE = """\
import torch
from runner import GraphRunner

runner = GraphRunner(torch.nn.Linear(16, 16).cuda())
runner.capture()


def ab_test(a, b):
    première = runner(a)
    second = runner(b)
    return (première - second).abs().max()
"""


def test_cross_file_clone_after_unicode_on_the_line(tmp_path) -> None:
    runner = (Path(__file__).parent.parent / "fixtures/rules/GL201/cross_file_runner/runner.py").read_text()
    (tmp_path / "runner.py").write_text(runner)
    serve = tmp_path / "serve.py"
    serve.write_text(CROSS_FILE_SERVE)
    (finding,) = json.loads(
        run_cli("check", "--no-cache", "--format", "json", "--select", "GL201", ".", cwd=tmp_path).stdout
    )
    assert (finding["line"], finding["column"], finding["end_column"]) == (9, 16, 25)  # characters, not bytes
    result = run_cli("check", "--no-cache", "--fix", "--select", "GL201", ".", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "    première = runner(a).clone()\n" in serve.read_text()


def test_a_check_parses_with_libcst_only_for_fixes_it_shows_or_applies(tmp_path) -> None:
    """Analysis is `ast` only; libcst is loaded for a fix to apply or show (speed of plain runs)."""
    (tmp_path / "train.py").write_text(SOURCE)
    probe = (
        "import contextlib, io, sys\n"
        "from graphlint import cli\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    cli.main(sys.argv[1:])\n"
        "print('libcst' in sys.modules)\n"
    )

    def loads_libcst(*args: str) -> bool:
        run = subprocess.run(
            [sys.executable, "-c", probe, "check", "--no-cache", *args, "train.py"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)},
        )
        return run.stdout.strip() == "True"

    assert not loads_libcst("--select", "GL106,GL107")  # text: fix hints, no edits
    assert not loads_libcst("--format", "json", "--preview", "--select", "GL108")  # a finding without a fix
    assert loads_libcst("--format", "json", "--select", "GL107")


def _tree_diff(before: Path, after: Path) -> str:
    """What `--diff` would print for the change from ``before`` to ``after``, file by file."""
    import difflib

    chunks = []
    for path in sorted(before.rglob("*.py"), key=lambda p: p.relative_to(before).as_posix()):
        display = f"./{path.relative_to(before).as_posix()}"
        old, new = path.read_bytes(), (after / path.relative_to(before)).read_bytes()
        if old != new:  # the fixtures that are not UTF-8 have no fix
            lines = difflib.unified_diff(
                old.decode().splitlines(keepends=True),
                new.decode().splitlines(keepends=True),
                f"a/{display}",
                f"b/{display}",
            )
            chunks.append("".join(lines))
    return "".join(chunks)


def test_diff_prints_exactly_what_fix_writes_on_the_fixture_tree(tmp_path, monkeypatch, capsys) -> None:
    """`--diff` runs `--fix`'s passes (a fix that waits for a re-check included) on the text in
    memory: on a copy of every rule fixture, with unsafe fixes and preview findings, it prints the
    change `--fix` writes, and writes nothing itself; after `--fix` no fix is left to apply."""
    import shutil

    from graphlint.cli import main

    fixtures = Path(__file__).resolve().parent.parent / "fixtures" / "rules"
    original, diffed, fixed = tmp_path / "original", tmp_path / "diffed", tmp_path / "fixed"
    for copy in (original, diffed, fixed):
        shutil.copytree(fixtures, copy, ignore=shutil.ignore_patterns("*.snap"))
    flags = ["check", ".", "--no-cache", "--jobs", "1", "--preview", "--unsafe-fixes", "--exit-zero", "-q"]

    monkeypatch.chdir(diffed)
    capsys.readouterr()
    assert main([*flags, "--diff"]) == 0
    printed = capsys.readouterr().out
    monkeypatch.chdir(fixed)
    assert main([*flags, "--fix"]) == 0
    capsys.readouterr()

    written = _tree_diff(original, fixed)
    assert written.count("+++ b/") >= 10  # the fixtures exercise many fixes
    assert printed == written
    assert _tree_diff(original, diffed) == ""
    assert main([*flags, "--diff"]) == 0
    assert capsys.readouterr().out == ""


def test_a_finding_below_the_precision_bar_gets_no_safe_fix() -> None:
    """A finding only preview mode reports is often false on real code: its fix waits for
    `--unsafe-fixes`, even where the rule's fix is safe on a true finding."""
    from graphlint.registry import get_rule

    fix = Fix("safe", "keep a copy", (AppendMethodCall((1, 1, 1, 2), "clone"),))
    certain = Finding.of(get_rule("GL201"), "kept", "a.py", (1, 1, 1, 2), fix)
    uncertain = Finding.of(get_rule("GL201"), "kept", "a.py", (1, 1, 1, 2), fix, preview=True)
    assert certain.safely_fixable and not uncertain.safely_fixable
    assert fix_file("a.py", "y\n", [uncertain], unsafe=False).applied == []
    assert fix_file("a.py", "y\n", [uncertain], unsafe=True).fixed == "y.clone()\n"
