"""A cache that came with the repository is untrusted input: loading it runs no code, and a
cache file that does not validate (a pickle, bit flips, truncation, a foreign file, another
format, an edited message) is a miss that gives the cold run's output, never a crash."""

from __future__ import annotations

import inspect
import pickle
from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import FIXTURES, HAZARD, run_cli
from graphlint import __version__
from graphlint.analysis import summarize_source
from graphlint.caching import codec as cache_codec
from graphlint.caching import store as cache_store
from graphlint.checkers.machinery.core import call_targets
from graphlint.config import ConfigResolver
from graphlint.engine import CheckOptions, check


class _Exploit:
    """Unpickling this creates ``marker``: what a crafted cache would do with a shell."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


def _project(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "hazard.py").write_text(HAZARD)
    (root / "helper.py").write_text("def f(x):\n    return x\n")
    return root, root / ".graphlint_cache" / f"v{__version__}"


def _check(root: Path) -> tuple[int, str, str]:
    result = run_cli("check", ".", "--format", "json", cwd=root)
    return result.returncode, result.stdout, result.stderr


def test_a_crafted_pickle_in_the_cache_runs_no_code(tmp_path: Path) -> None:
    root, version_dir = _project(tmp_path)
    cold = _check(root)
    marker = tmp_path / "PWNED"
    payload = pickle.dumps({"key": _Exploit(marker)})
    generation = cache_store.generation()
    for name in ("summaries", "results", f"summaries-{generation}", f"delta-{generation}-00000000000000000001-1"):
        for suffix in (".pickle", ".cache"):
            (version_dir / f"{name}{suffix}").write_bytes(payload)
    assert _check(root) == cold
    assert not marker.exists()


def _flip_a_bit(data: bytes) -> bytes:
    middle = len(data) // 2
    return data[:middle] + bytes([data[middle] ^ 0x04]) + data[middle + 1 :]


def _edit_the_message(data: bytes) -> bytes:
    return data.replace(b"item", b"ITEM")


def _other_format(data: bytes) -> bytes:
    header, _, payload = data.partition(b"\n")
    magic, _, checksum = header.split(b" ")
    return b"%s 999 %s\n%s" % (magic, checksum, payload)


def _valid_checksum_bad_contents(data: bytes) -> bytes:
    return cache_codec.dumps({"key": ["not a summary"]})


MUTATIONS: dict[str, Callable[[bytes], bytes]] = {
    "bit flip": _flip_a_bit,
    "truncated": lambda data: data[: len(data) // 3],
    "empty": lambda data: b"",
    "foreign file": lambda data: b"\x89PNG\r\n\x1a\n" + bytes(range(256)),
    "edited message": _edit_the_message,
    "other format": _other_format,
    "valid checksum, wrong types": _valid_checksum_bad_contents,
    "unknown class": lambda data: b"graphlint-cache 1 x\n{}",
}


@pytest.mark.parametrize("mutation", MUTATIONS, ids=list(MUTATIONS))
def test_a_cache_file_that_does_not_validate_is_a_miss(tmp_path: Path, mutation: str) -> None:
    root, version_dir = _project(tmp_path)
    cold = _check(root)
    assert cold[0] == 1 and "item" in cold[1]
    files = [path for path in version_dir.iterdir() if path.is_file()]
    assert files
    for path in files:
        path.write_bytes(MUTATIONS[mutation](path.read_bytes()))
    assert _check(root) == cold
    assert _check(root) == cold  # the rewritten cache is valid again


def test_unknown_tags_and_wrong_arity_are_rejected() -> None:
    for payload in (b'{"os.system":["true"]}', b'{"Finding":["GL101"]}', b'{"t":[1],"f":[2]}', b'{"d":[1]}'):
        data = b"graphlint-cache 1 %s\n%s" % (cache_codec._checksum(payload).encode(), payload)
        with pytest.raises(cache_codec.CacheFormatError):
            cache_codec.loads(data)


def test_summaries_round_trip_through_the_cache_format(write_tree) -> None:
    """Every summary type the fixtures produce survives the format: a warm run equals a cold one
    (the value-flow facts included)."""
    root = write_tree({"a.py": HAZARD, "b.py": "import torch\n\ndef f(m):\n    return torch.compile(m)\n"})
    options = CheckOptions(cache_dir=root / ".cache", follow_values=True)
    cold = check([str(root)], ConfigResolver(cwd=root), options)
    (root / "b.py").write_text("import torch\n\ndef f(m):\n    return torch.compile(m)  # changed\n")
    warm = check([str(root)], ConfigResolver(cwd=root), options)
    assert warm.cache_hits == 1 and warm.findings == cold.findings


def test_every_rule_fixture_summary_round_trips_through_the_cache_format() -> None:
    """Whatever the rules' fixtures make a summary hold, the cache stores and gives back whole: a
    type the format lacks would leave that file uncached, analysed again on every run."""
    sources = sorted((FIXTURES / "rules").rglob("*.py"))
    assert len(sources) > 100
    for source in sources:
        summary = summarize_source(source.read_bytes(), source.stem, False)
        assert cache_codec.loads(cache_codec.dumps({"k": summary})) == {"k": summary}, source


def test_every_call_kind_a_summary_holds_round_trips_through_the_cache_format() -> None:
    """A call kind the format lacks is not a crash but a cache that never fills: every edit then
    re-analyses the whole project (DuckCall, the `hasattr` call, went a day unstored)."""
    kinds = _concrete_subclasses(call_targets._Target)
    assert set(kinds) <= set(call_targets.ALL_TARGETS), "a call kind outside CallTarget/ArgValue"
    for kind in kinds:
        fields = len(inspect.signature(kind.__new__).parameters) - 1
        target = kind(*(f"field{index}" for index in range(fields)))
        (back,) = cache_codec.loads(cache_codec.dumps([target]))
        assert type(back) is kind and back == target


def _concrete_subclasses(base: type) -> list[type]:
    found = []
    for sub in base.__subclasses__():
        if not sub.__name__.startswith("_"):
            found.append(sub)
        found.extend(_concrete_subclasses(sub))
    return found


def test_a_value_the_format_cannot_hold_is_not_cached_and_does_not_crash(tmp_path: Path) -> None:
    """Only that summary is left out: its file is analysed again, the others' summaries are kept."""
    from graphlint.caching.store import SummaryCache
    from graphlint.checkers.machinery.core.model import ModuleSummary

    cache = SummaryCache(tmp_path / "cache")
    cache.put("bad", ModuleSummary(module="m", flow=[(object(),)]))
    cache.put("good", ModuleSummary(module="n"))
    cache.save()
    reloaded = SummaryCache(tmp_path / "cache")
    assert reloaded.get("bad") is None
    assert reloaded.get("good") == ModuleSummary(module="n")
