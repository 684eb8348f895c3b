"""The history benchmark's own logic (benchmarks/bugfix_pairs.py), on a throwaway git history.

CI has no mirrors of the real projects, so the benchmark itself runs where they are; these
tests hold what a user of its table relies on: the pairs file is complete and well formed,
a pair is "caught" only when the parent is flagged in the named file and the fix less, and
a miss gets the reason class that says what to work on.
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT
from graphlint.registry import all_rules

_spec = importlib.util.spec_from_file_location("bugfix_pairs", ROOT / "benchmarks" / "bugfix_pairs.py")
bugfix_pairs = importlib.util.module_from_spec(_spec)
sys.modules["bugfix_pairs"] = bugfix_pairs
_spec.loader.exec_module(bugfix_pairs)

SHARED = ROOT.parent / "shared" / "recall" / "bugfix_pairs.tsv"


def test_every_pair_is_well_formed():
    pairs = bugfix_pairs.load_pairs()
    codes = set(all_rules())
    seen = set()
    for pair in pairs:
        assert re.fullmatch(r"[0-9a-f]{40}", pair.fix), pair
        assert set(pair.codes) <= codes, pair
        assert pair.file.endswith(".py") and not pair.file.startswith("/"), pair
        assert pair.origin in ("shared", "mined"), pair
        assert pair.miss == "" or pair.miss in bugfix_pairs.MISS_CLASSES, pair
        assert bool(pair.miss_reading) == (pair.miss not in ("", "no-rule")), pair
        assert pair.verdict in ("", "right", "partly", "wrong"), pair
        assert (pair.repo, pair.fix, pair.file) not in seen, pair
        seen.add((pair.repo, pair.fix, pair.file))


@pytest.mark.skipif(not SHARED.is_file(), reason="../shared/recall is not beside this checkout")
def test_the_shared_list_is_kept_whole():
    rows = [line.split("\t") for line in SHARED.read_text().splitlines() if line and not line.startswith("#")]
    kept = {(p.repo, p.fix, p.file) for p in bugfix_pairs.load_pairs()}
    assert {(r[0], r[1], r[2]) for r in rows} <= kept


def test_the_checked_package_is_the_files_top_folder():
    pair = bugfix_pairs.Pair("o/r", "0" * 40, "megatron/core/x.py", ("GL301",), "h")
    assert pair.checked == "megatron"
    assert bugfix_pairs.Pair("o/r", "0" * 40, "generate.py", ("GL201",), "h").checked == ""
    assert bugfix_pairs.Pair("o/r", "0" * 40, "a/b.py", ("GL201",), "h", package="a/sub/").checked == "a/sub"


def test_the_hazard_span_is_the_innermost_function():
    source = "def outer():\n    def inner():\n        x = 1\n        return x\n    return inner\n"
    assert bugfix_pairs.hazard_span(source, (3,)) == (2, 4)
    assert bugfix_pairs.hazard_span(source, ()) is None
    assert bugfix_pairs.hazard_span("x = 1\ny = 2\n", (2,)) == (2, 2)


def test_caught_needs_the_fix_flagged_less():
    finding = {"code": "GL101", "line": 3, "message": "m"}
    assert bugfix_pairs.ModeResult(parent=[finding], fix=[]).caught
    assert not bugfix_pairs.ModeResult(parent=[finding], fix=[finding]).caught
    assert not bugfix_pairs.ModeResult(parent=[], fix=[]).caught


# -- end to end: a project with two bug-fix commits -----------------------------------------

_CAPTURE = """\
import torch


def step(model, x):
    y = model(x)
    {hazard}
    return y


def record(model, x):
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = step(model, x)
    return g, out
"""

_UNREACHED = """\
def helper(x):
    {hazard}
    return x
"""


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
        check=True,
        capture_output=True,
        text=True,
    )
    return done.stdout.strip()


def _commit(repo: Path, files: dict[str, str], message: str) -> str:
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", message)
    return _git(repo, "rev-parse", "HEAD")


@pytest.fixture(scope="module")
def history(tmp_path_factory) -> tuple[Path, str, str]:
    mirrors = tmp_path_factory.mktemp("mirrors")
    repo = mirrors / "demo+proj"
    repo.mkdir()
    _git(repo, "init", "-q")
    files = {
        "pkg/__init__.py": "",
        "pkg/train.py": _CAPTURE.format(hazard="print(y.sum().item())"),
        "pkg/unused.py": _UNREACHED.format(hazard="print(x.sum().item())"),
    }
    _commit(repo, files, "hazards")
    fixed = _commit(repo, {"pkg/train.py": _CAPTURE.format(hazard="pass")}, "fix the capture")
    later = _commit(repo, {"pkg/unused.py": _UNREACHED.format(hazard="pass")}, "fix the helper")
    return mirrors, fixed, later


def _toml(path: Path, fixed: str, later: str) -> Path:
    path.write_text(
        f'[[pair]]\nrepo = "demo/proj"\nfix = "{fixed}"\nfile = "pkg/train.py"\ncodes = ["GL101"]\n'
        'hazard = "a host sync in the captured step"\nlines = [6]\n\n'
        f'[[pair]]\nrepo = "demo/proj"\nfix = "{later}"\nfile = "pkg/unused.py"\ncodes = ["GL101"]\n'
        'hazard = "a host sync no capture runs"\nlines = [2]\n'
    )
    return path


def test_a_caught_pair_and_a_miss_with_its_reason(history, tmp_path, capsys):
    mirrors, fixed, later = history
    pairs = _toml(tmp_path / "pairs.toml", fixed, later)
    results = tmp_path / "results" / "new"  # made by the run: a long run must not die writing
    argv = ["--mirrors", str(mirrors), "--pairs", str(pairs), "--modes", "default,values", "--jobs", "1"]
    assert bugfix_pairs.main([*argv, "--work", str(tmp_path / "work"), "--results", str(results)]) == 0
    table = capsys.readouterr().out
    assert "default  caught 1/2" in table
    written = json.loads(next(results.glob("bugfix_pairs-*.json")).read_text())
    caught, missed = written["pairs"]
    assert caught["modes"]["default"]["caught"] and caught["modes"]["default"]["at_hazard"]
    assert caught["modes"]["default"]["parent"][0]["line"] == 6 and caught["modes"]["default"]["fix"] == []
    assert caught["reason"] == ""
    assert not missed["modes"]["default"]["caught"]
    assert missed["reason"] == "not-reached"  # the helper is in no capture: GL101 never looks there
    assert next(results.glob("bugfix_pairs-*.md")).read_text().count("| proj@") == 2


def test_results_outside_git_are_named_unknown(tmp_path):
    assert bugfix_pairs.measured_commit(tmp_path) == "unknown"
    if (ROOT / ".git").exists():  # a clone names its commit
        assert re.fullmatch(r"[0-9a-f]{7,}(\+dirty)?", bugfix_pairs.measured_commit())


def test_a_missing_mirror_is_a_clear_error(tmp_path):
    with pytest.raises(LookupError, match="no mirror of demo/absent"):
        bugfix_pairs.mirror_of("demo/absent", tmp_path)
