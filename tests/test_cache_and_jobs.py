"""Output is identical for any --jobs and for cold and warm caches; the cache invalidates
exactly what a change can affect, including findings in other files."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from conftest import FIXTURES, run_cli
from graphlint import __version__
from graphlint.caching.store import SummaryCache
from graphlint.config import ConfigResolver, Selection
from graphlint.engine import CheckOptions, check


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    """Every rule fixture copied into one tree: many files, cross-file calls, bad input."""
    root = tmp_path / "corpus"
    shutil.copytree(FIXTURES / "rules", root)
    for index in range(30):  # enough files that --jobs really starts worker processes
        (root / f"filler_{index}.py").write_text(f"def f{index}(x):\n    return x.item()\n")
    return root


@pytest.mark.slow
def test_jobs_and_cache_give_byte_identical_output(corpus: Path, tmp_path: Path) -> None:
    outputs = {}
    for fmt in ("text", "json", "sarif"):
        for jobs in ("1", "2"):
            for state in ("cold", "warm"):
                cache = tmp_path / f"cache-{fmt}-{jobs}"
                result = run_cli("check", ".", "--format", fmt, "--jobs", jobs, "--cache-dir", str(cache), cwd=corpus)
                assert result.returncode == 1, result.stderr
                outputs[(fmt, jobs, state)] = result.stdout
        assert len({outputs[(fmt, j, s)] for j in ("1", "2") for s in ("cold", "warm")}) == 1, fmt


def _run(root: Path, cache_dir: Path) -> tuple[list, SummaryCache]:
    options = CheckOptions(selection=Selection(select=("GL101",)), cache_dir=cache_dir)
    result = check(["."], ConfigResolver(cwd=root), options)
    return result.findings, result


def test_warm_run_reuses_every_summary_and_a_change_reparses_one(tmp_path: Path, monkeypatch) -> None:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "lib.py").write_text("def helper(t):\n    return t\n")
    (root / "main.py").write_text(
        "import torch\nfrom lib import helper\n\ng = torch.cuda.CUDAGraph()\n"
        "x = torch.zeros(2, device='cuda')\nwith torch.cuda.graph(g):\n    helper(x)\n"
    )
    for i in range(5):
        (root / f"other{i}.py").write_text(f"VALUE = {i}\n")
    monkeypatch.chdir(root)
    cache_dir = tmp_path / "cache"
    findings, cold = _run(root, cache_dir)
    assert findings == [] and cold.cache_misses == 7 and cold.cache_hits == 0
    findings, warm = _run(root, cache_dir)
    assert findings == [] and warm.cache_hits == 7 and warm.cache_misses == 0
    # Changing lib.py alone re-parses lib.py, and the new hazard is reported through main.py's capture.
    (root / "lib.py").write_text("def helper(t):\n    return t.item()\n")
    findings, changed = _run(root, cache_dir)
    assert changed.cache_misses == 1 and changed.cache_hits == 6
    assert [(f.path, f.line, f.code) for f in findings] == [("./lib.py", 2, "GL101")]
    assert [site.path for site in findings[0].call_path] == ["./main.py"]


def test_a_change_reparses_one_file_when_another_holds_a_duck_typed_call(tmp_path: Path, monkeypatch) -> None:
    """Every kind of call a summary holds is stored: a project with one `hasattr`-checked call
    (a `DuckCall`) kept no summary at all, so each edit re-analysed every file."""
    root = tmp_path / "proj"
    root.mkdir()
    (root / "layers.py").write_text(
        "class Linear:\n    def backward_dw(self):\n        return None\n\n\n"
        "def finish(modules):\n    for module in modules:\n"
        "        if hasattr(module, 'backward_dw'):\n            module.backward_dw()\n"
    )
    (root / "lib.py").write_text("def helper(t):\n    return t\n")
    monkeypatch.chdir(root)
    cache_dir = tmp_path / "cache"
    _run(root, cache_dir)
    (root / "lib.py").write_text("def helper(t):\n    return t + 1\n")
    _, changed = _run(root, cache_dir)
    assert changed.cache_misses == 1 and changed.cache_hits == 1


def test_config_change_applies_on_a_warm_cache(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "a.py").write_text(
        "import torch\ng = torch.cuda.CUDAGraph()\nx = torch.zeros(2, device='cuda')\n"
        "with torch.cuda.graph(g):\n    x.sum().item()\n"
    )
    cache = tmp_path / "cache"
    assert run_cli("check", ".", "--cache-dir", str(cache), cwd=root).returncode == 1
    (root / "pyproject.toml").write_text("[tool.graphlint]\nignore = ['GL101']\n")
    assert run_cli("check", ".", "--cache-dir", str(cache), cwd=root).returncode == 0
    assert (cache / "CACHEDIR.TAG").is_file()


def test_no_cache_writes_nothing(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("x = 1\n")
    assert run_cli("check", "--no-cache", ".", cwd=tmp_path).returncode == 0
    assert not (tmp_path / ".graphlint_cache").exists()
    assert run_cli("check", ".", cwd=tmp_path).returncode == 0
    assert (tmp_path / ".graphlint_cache").is_dir()


def test_corrupt_cache_costs_only_a_cold_run(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("x = 1\n")
    assert run_cli("check", ".", cwd=tmp_path).returncode == 0
    for cache_file in (tmp_path / ".graphlint_cache").rglob("*.cache"):
        cache_file.write_bytes(b"garbage")
    assert run_cli("check", ".", cwd=tmp_path).returncode == 0


def test_a_one_file_change_writes_a_small_delta_not_the_whole_cache(tmp_path: Path, monkeypatch) -> None:
    root = tmp_path / "proj"
    root.mkdir()
    for i in range(12):
        (root / f"m{i}.py").write_text(f"def f{i}(x):\n    return x\n")
    monkeypatch.chdir(root)
    cache_dir = tmp_path / "cache"
    _run(root, cache_dir)
    main_file = next(cache_dir.rglob("summaries-*.cache"))
    before = main_file.stat().st_mtime_ns
    (root / "m3.py").write_text("def f3(x):\n    return x + 1\n")
    _, changed = _run(root, cache_dir)
    assert changed.cache_misses == 1
    assert main_file.stat().st_mtime_ns == before
    assert len(list(main_file.parent.glob("delta-*.cache"))) == 1
    (root / "m4.py").write_text("def f4(x):\n    return x + 2\n")
    _, again = _run(root, cache_dir)
    assert (again.cache_hits, again.cache_misses) == (11, 1)  # main file and the first delta both read


def test_summaries_made_by_other_graphlint_code_are_not_reused(write_tree, monkeypatch) -> None:
    """Between releases the version stays while the analysis changes: the cache is keyed by
    graphlint's own source, so an edited checker never reads a summary its predecessor made."""
    import graphlint.caching.store as cache_module
    from graphlint.config import ConfigResolver
    from graphlint.engine import CheckOptions, check

    root = write_tree({"m.py": "import torch\n\nx = torch.zeros(2)\n"})
    options = CheckOptions(cache_dir=root / ".cache")
    check([str(root)], ConfigResolver(cwd=root), options)
    warm = check([str(root)], ConfigResolver(cwd=root), options)
    assert warm.cache_misses == 0
    monkeypatch.setattr(cache_module, "code_fingerprint", lambda: "another graphlint")
    changed = check([str(root)], ConfigResolver(cwd=root), options)
    assert changed.cache_misses == 1 and changed.cache_hits == 0


def test_only_the_newest_two_graphlints_keep_summaries_and_a_run_reads_only_its_own(write_tree, monkeypatch) -> None:
    """Every edit to graphlint makes a new generation of summaries. A run reads its own alone
    (a development checkout's vllm cache had grown to 2.5 GB of older ones, read on every
    run), the previous graphlint's stay so going back to it is warm, older ones are deleted,
    an older release's and those of the layout before generations too."""
    import graphlint.caching.store as cache_module

    root = write_tree({"a.py": "x = 1\n", "b.py": "y = 2\n"})
    version_dir = root / ".cache" / f"v{__version__}"
    version_dir.mkdir(parents=True)
    for name in ("summaries.cache", "delta-00000000000000000001-1.cache"):
        (version_dir / name).write_bytes(b"written before generations")
    older_release = root / ".cache" / "v0.0.1" / "summaries-0123456789abcdef.cache"
    older_release.parent.mkdir()
    older_release.write_bytes(b"written by an older release")
    options = CheckOptions(cache_dir=root / ".cache")
    read: list[str] = []
    real_read = cache_module._read
    monkeypatch.setattr(cache_module, "_read", lambda path, kind: read.append(path.name) or real_read(path, kind))

    def run_as(code: str) -> tuple[int, int]:
        monkeypatch.setattr(cache_module, "code_fingerprint", lambda: code)
        read.clear()
        result = check([str(root)], ConfigResolver(cwd=root), options)
        assert all(cache_module.generation() in name for name in read if name != "results.cache")
        return result.cache_hits, result.cache_misses

    generations = {}
    for code in ("first", "second", "third"):
        assert run_as(code) == (0, 2)
        generations[code] = cache_module.generation()
    kept = {cache_module._generation_of(path.name) for path in version_dir.iterdir()}
    assert kept == {generations["second"], generations["third"], None}  # None: the results
    assert not older_release.exists()
    (root / "a.py").write_text("x = 3\n")  # a new run, not the whole run's findings reused
    assert run_as("second") == (1, 1)  # the one before is still warm
    assert run_as("first") == (0, 2)  # the oldest was deleted


def test_the_cache_key_covers_the_whole_static_checker() -> None:
    """A summary made by other analysis code is never reused: every module of the checker (the
    machinery, the rules, the engine) is in the fingerprint, the runtime half and the editor
    server are not (they shape no finding)."""
    from graphlint.caching.store import fingerprinted_sources

    covered = {relative for relative, _ in fingerprinted_sources()}
    assert {
        "checkers/machinery/core/binder.py",
        "checkers/rules/stream/gl302_cross_stream_use_without_wait.py",
    } <= covered
    assert {"engine.py", "sources/discovery.py", "caching/codec.py"} <= covered
    assert not any(path.startswith(("runtime_sanitizer/", "server/")) for path in covered)
