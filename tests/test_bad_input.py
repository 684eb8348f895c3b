"""Bad input never stops a run: it becomes GL000 and every other file is still checked."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import run_cli
from graphlint.config import ConfigResolver
from graphlint.engine import CheckOptions, check

HAZARD = """\
import torch

g = torch.cuda.CUDAGraph()
x = torch.zeros(4, device="cuda")
with torch.cuda.graph(g):
    y = x.sum().item()
"""


def test_mixed_tree_reports_every_problem_and_every_hazard(write_tree) -> None:
    root = write_tree(
        {
            "a_hazard.py": HAZARD,
            "b_syntax.py": "def broken(:\n    pass\n",
            "c_latin1.py": b'name = "caf\xe9"\n',
            "d_binary.py": b"\x00\x01\x02\x03",
            "e_hazard_too.py": HAZARD,
            "f_empty.py": "",
        }
    )
    unreadable = root / "g_unreadable.py"
    unreadable.write_text(HAZARD)
    os.chmod(unreadable, 0)
    try:
        result = run_cli("check", "--no-cache", "--format", "json", ".", cwd=root)
    finally:
        os.chmod(unreadable, 0o644)
    assert result.returncode == 1, result.stderr
    found = {(f["path"], f["code"]): f for f in json.loads(result.stdout)}
    assert ("./a_hazard.py", "GL101") in found and ("./e_hazard_too.py", "GL101") in found
    syntax = found[("./b_syntax.py", "GL000")]
    assert syntax["line"] == 1 and "syntax error" in syntax["message"]
    assert "not valid utf-8" in found[("./c_latin1.py", "GL000")]["message"].lower()
    assert "binary" in found[("./d_binary.py", "GL000")]["message"]
    if os.geteuid() != 0:  # root reads files whatever their mode
        assert "permission denied" in found[("./g_unreadable.py", "GL000")]["message"]
    assert not any(path == "./f_empty.py" for path, _ in found)


def test_file_vanishing_mid_run_is_gl000(write_tree, monkeypatch: pytest.MonkeyPatch) -> None:
    root = write_tree({"keep.py": HAZARD, "gone.py": HAZARD})
    import graphlint.engine as engine

    real_read = engine.read_source

    def vanish_then_read(path: str):
        if path.endswith("gone.py") and os.path.exists(path):
            os.unlink(path)  # removed between discovery and reading
        return real_read(path)

    monkeypatch.setattr(engine, "read_source", vanish_then_read)
    monkeypatch.chdir(root)
    result = check(["."], ConfigResolver(), CheckOptions())
    codes = {(f.path, f.code) for f in result.findings}
    assert ("./gone.py", "GL000") in codes and ("./keep.py", "GL101") in codes


def test_deeply_nested_expression_is_gl000_not_a_crash(write_tree) -> None:
    root = write_tree({"deep.py": "x = " + "(" * 5000 + "1" + ")" * 5000 + "\n", "ok.py": HAZARD})
    result = run_cli("check", "--no-cache", "--format", "json", ".", cwd=root)
    assert result.returncode == 1
    found = {(f["path"], f["code"]) for f in json.loads(result.stdout)}
    assert ("./deep.py", "GL000") in found and ("./ok.py", "GL101") in found


def test_a_file_as_deep_as_cpython_parses_is_analysed_not_gl000(write_tree) -> None:
    """A 600-branch elif chain is valid Python (CPython parses and runs it) but nests 600 `If`
    nodes: the hazard in the capture that calls it is still reported, and nothing is GL000."""
    branches = "".join(f"    elif k == {i}:\n        return x * {i}\n" for i in range(1, 600))
    deep = (
        "import torch\n\n\ndef pick(x, k):\n    if k == 0:\n        return x\n" + branches + "\n\n"
        "def step(g, x):\n    with torch.cuda.graph(g):\n        y = pick(x, 3)\n        print(y.item())\n"
    )
    compile(deep, "deep.py", "exec")  # CPython accepts it
    root = write_tree({"deep.py": deep})
    result = run_cli("check", "--no-cache", "--format", "json", ".", cwd=root)
    found = [(f["path"], f["code"]) for f in json.loads(result.stdout)]
    assert found == [("./deep.py", "GL101")], found


_LONG_SUM = (
    "import torch\n\n\ndef step(g, x):\n    with torch.cuda.graph(g):\n        y = {}\n        print(y.item())\n"
)
# The most terms a fresh interpreter's `ast.parse` accepts in _LONG_SUM (each `+` nests a BinOp).
_PROBE = f"""
import ast
def source(n):
    return {_LONG_SUM!r}.format(" + ".join(["x"] * n))
low, high = 10, 20000
while low < high:
    middle = (low + high + 1) // 2
    try:
        ast.parse(source(middle))
        low = middle
    except (RecursionError, MemoryError):
        high = middle - 1
print(low)
"""


def test_a_long_expression_cpython_parses_is_analysed_not_gl000(write_tree) -> None:
    """The longest sum a fresh interpreter parses is parsed at graphlint's depth too (CPython's
    limit counts the frames already in use): the hazard after it is reported, nothing is GL000."""
    terms = int(subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, check=True).stdout)
    root = write_tree({"long.py": _LONG_SUM.format(" + ".join(["x"] * terms))})
    result = run_cli("check", "--no-cache", "--format", "json", ".", cwd=root)
    found = [(f["path"], f["code"]) for f in json.loads(result.stdout)]
    assert found == [("./long.py", "GL101")], found


def test_non_ascii_columns_count_characters(write_tree) -> None:
    source = HAZARD.replace("    y = x.sum().item()", "    é = x.sum().item()")
    root = write_tree({"u.py": source})
    findings = json.loads(run_cli("check", "--no-cache", "--format", "json", "u.py", cwd=root).stdout)
    assert (findings[0]["line"], findings[0]["column"], findings[0]["end_column"]) == (6, 9, 23)


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX permissions")
def test_internal_error_in_one_file_does_not_stop_the_run(write_tree, monkeypatch: pytest.MonkeyPatch) -> None:
    import graphlint.analysis as analysis

    original = analysis.FileSummarizer.run

    def explode(self):
        if self.state.module == "boom":
            raise RuntimeError("synthetic bug")
        return original(self)

    monkeypatch.setattr(analysis.FileSummarizer, "run", explode)
    root = write_tree({"boom.py": "x = 1\n", "ok.py": HAZARD})
    monkeypatch.chdir(root)
    result = check(["."], ConfigResolver(), CheckOptions())
    messages = {(f.path, f.code): f.message for f in result.findings}
    assert "RuntimeError: synthetic bug" in messages[("./boom.py", "GL002")]  # graphlint's bug, not a parse error
    assert ("./ok.py", "GL101") in messages


def test_a_files_own_syntax_warnings_stay_quiet(write_tree) -> None:
    """An invalid escape, or `1or 2` in a string annotation the analysis parses, is the file's
    business: the report is the findings, with no Python warning lines on stderr."""
    source = 'import torch\n\npattern = "\\d+"\n\n\ndef f(a: "1or 2") -> "0x1for":\n    return a\n'
    root = write_tree({"quirks.py": source, "bad.py": HAZARD})
    result = run_cli("check", "--no-cache", "--format", "json", ".", cwd=root)
    assert [f["code"] for f in json.loads(result.stdout)] == ["GL101"]
    assert "Warning" not in result.stderr, result.stderr
