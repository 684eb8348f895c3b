"""The summary cache in `.graphlint_cache/` (like ruff's `.ruff_cache/`).

The files are data, never pickles (`cache_codec`: JSON with a checksum): a cache that came
with the repository cannot run code, and one that fails validation is a miss.

What is cached is each file's `ModuleSummary`, keyed by a hash of everything it depends
on: the file's bytes, its module name, graphlint's version and the Python grammar. Its files
are named by a *generation*, the hash of what every key shares (graphlint's code, version and
format, the Python), so a run reads only the summaries it could reuse and the cache does not
grow with every graphlint a checkout has run. The project phase (call graph, reachability,
selection, suppressions) is always recomputed from summaries, so a change in one file, in the configuration or in graphlint itself
invalidates exactly what it must, including findings in other files that call into it.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import hashlib
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from graphlint import __version__
from graphlint.caching import codec as cache_codec
from graphlint.checkers.machinery.core.model import ModuleSummary
from graphlint.findings import Finding

CACHE_DIR_NAME = ".graphlint_cache"
_FORMAT = 3  # bump whenever a summary type changes shape
_MAX_ENTRIES = 50_000
_MAX_RESULTS = 16
_MAX_DELTAS = 8
_KEPT_GENERATIONS = 2  # this code's and the last other's: two trees sharing a cache stay warm


@functools.cache
def code_fingerprint() -> str:
    """A hash of graphlint's own source: a summary made by other code is never reused.

    The version alone is not enough: between releases (and in every development checkout,
    CI's corpus check included) the analysis changes while the version does not.
    """
    digest = hashlib.blake2b(digest_size=16)
    for relative, path in fingerprinted_sources():
        digest.update(relative.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def fingerprinted_sources() -> list[tuple[str, Path]]:
    """graphlint's modules that shape a summary or a finding, by path inside the package: all
    but the runtime half and the editor server, which analyse nothing."""
    package = Path(__file__).resolve().parent.parent  # graphlint/, not this subpackage
    found = []
    for path in sorted(package.rglob("*.py")):
        relative = path.relative_to(package).as_posix()
        if not relative.startswith(_NOT_STATIC):
            found.append((relative, path))
    return found


_NOT_STATIC = ("runtime_sanitizer/", "server/")


def _code_identity() -> str:
    """What every key shares: which graphlint, which cache format, which Python."""
    return f"{__version__}|{code_fingerprint()}|{_FORMAT}|{sys.version_info[:2]}"


def generation() -> str:
    """The name of the summary files this graphlint reads and writes: a file of another
    generation can never give it a hit."""
    return hashlib.blake2b(_code_identity().encode(), digest_size=8).hexdigest()


def run_key(parts: list[str]) -> str:
    """One key for a whole run: every file's key, its settings, the options, the version."""
    digest = hashlib.blake2b(digest_size=20)
    digest.update(_code_identity().encode())
    for part in parts:
        digest.update(part.encode("utf-8", "surrogatepass"))
        digest.update(b"\0")
    return digest.hexdigest()


def cache_key(data: bytes, module: str, is_package: bool, codes: frozenset[str] = frozenset()) -> str:
    """The key of one file's summary: its bytes and name, and the rules that ran on it."""
    digest = hashlib.blake2b(digest_size=20)
    rules = ",".join(sorted(codes))
    digest.update(
        f"{_code_identity()}|{module}|{is_package}|{rules}|".encode(
            "utf-8",
            "surrogatepass",  # a file name that is not UTF-8 holds surrogates
        )
    )
    digest.update(data)
    return digest.hexdigest()


class SummaryCache:
    def __init__(self, directory: Path | None) -> None:
        self.directory = directory
        self._entries: dict[str, ModuleSummary] = {}
        self._used: set[str] = set()
        self._new: dict[str, ModuleSummary] = {}
        self._deltas: list[Path] = []
        self.hits = 0
        self.misses = 0
        self._loaded = directory is None  # loaded on first use: a warm run may never need it
        self._results: dict[str, list] | None = None
        self._generation = generation()

    @property
    def _file(self) -> Path:
        assert self.directory is not None
        return self.directory / f"v{__version__}" / f"summaries-{self._generation}.cache"

    def _load(self) -> None:
        """The main file, then every delta written since it was last compacted: of this
        generation only. Reading every generation's made a warm run slower than a cold one: on a
        development checkout's 2.5 GB cache of vllm, 81-134 s and 10 GB against 33 s cold."""
        for path in [self._file, *sorted(self._file.parent.glob(f"delta-{self._generation}-*.cache"))]:
            entries = _read(path, ModuleSummary)
            if entries is not None:
                if path != self._file:
                    self._deltas.append(path)
                self._entries.update(entries)

    def get(self, key: str) -> ModuleSummary | None:
        if not self._loaded:
            self._loaded = True
            self._load()
        summary = self._entries.get(key)
        if summary is None:
            self.misses += 1
            return None
        self.hits += 1
        self._used.add(key)
        return summary

    def put(self, key: str, summary: ModuleSummary) -> None:
        self._entries[key] = summary
        self._new[key] = summary
        self._used.add(key)

    # Whole-run results: when no file, setting or option changed, the findings are reused
    # without loading a single summary.
    @property
    def _results_file(self) -> Path:
        assert self.directory is not None
        return self.directory / f"v{__version__}" / "results.cache"

    def _load_results(self) -> dict[str, list]:
        if self._results is None:
            loaded = _read(self._results_file, list) if self.directory is not None else None
            self._results = {key: findings for key, findings in (loaded or {}).items() if _valid_result(key, findings)}
        return self._results

    def get_result(self, run_key: str) -> list | None:
        return self._load_results().get(run_key)

    def put_result(self, run_key: str, findings: list) -> None:
        if self.directory is None:
            return
        results = self._load_results()
        results.pop(run_key, None)
        results[run_key] = findings
        while len(results) > _MAX_RESULTS:
            results.pop(next(iter(results)))
        _atomic_write(self._results_file, results, self.directory)

    def save(self) -> None:
        """Write what this run added: a small delta file, or (when deltas pile up or the cache
        is new) one compacted main file. A one-file change never rewrites the whole cache."""
        if self.directory is None or not self._new:
            return
        compact = not self._file.exists() or len(self._deltas) >= _MAX_DELTAS or len(self._new) * 4 > len(self._entries)
        if compact:
            entries = self._entries
            if len(entries) > _MAX_ENTRIES:  # keep what this run used
                entries = {k: v for k, v in entries.items() if k in self._used}
            _atomic_write(self._file, entries, self.directory)
            for delta in self._deltas:
                with contextlib.suppress(OSError):
                    delta.unlink()
        else:
            name = f"delta-{self._generation}-{time.time_ns():020d}-{os.getpid()}.cache"
            _atomic_write(self._file.parent / name, self._new, self.directory)
        self._new = {}
        _forget_old_generations(self.directory, self._generation)


def _forget_old_generations(directory: Path, current: str) -> None:
    """Delete the summary files of all but the newest generations. Theirs can never give a hit
    to this code, and without this every edit to graphlint (or upgrade) left a full copy of the
    project's summaries behind until `_MAX_ENTRIES`. The newest other one stays, so switching
    between two checkouts, or back after trying a branch, is still warm."""
    newest: dict[str, float] = {}
    files: dict[str, list[Path]] = {}
    with contextlib.suppress(OSError):
        for path in directory.glob("v[0-9]*/*.cache"):
            name = _generation_of(path.name)
            if name is not None:
                newest[name] = max(newest.get(name, 0.0), path.stat().st_mtime)
                files.setdefault(name, []).append(path)
    others = sorted((n for n in newest if n != current), key=newest.__getitem__, reverse=True)
    for name in others[_KEPT_GENERATIONS - 1 :]:
        for path in files[name]:
            with contextlib.suppress(OSError):
                path.unlink()


def _generation_of(file_name: str) -> str | None:
    """The generation a summary file belongs to ("" for the unnamed layout before generations:
    `summaries.cache`, `delta-TIME-PID.cache`), None for any other file (the results, a
    temporary file, something foreign)."""
    parts = file_name.removesuffix(".cache").split("-")
    if parts[0] == "summaries" and len(parts) <= 2:
        return parts[1] if len(parts) == 2 else ""
    if parts[0] == "delta" and len(parts) in (3, 4):
        return parts[1] if len(parts) == 4 else ""
    return None


def _read(path: Path, value_type: type) -> dict[str, Any] | None:
    """A cache file's ``{key: value}`` entries; None when it is missing or does not validate
    (foreign, corrupted, truncated, another format, a pickle): a cold run, never a crash."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    with _no_gc():
        try:
            entries = cache_codec.loads(data)
        except cache_codec.CacheFormatError:
            return None
    if type(entries) is not dict or not all(
        type(key) is str and type(value) is value_type for key, value in entries.items()
    ):
        return None
    return entries


def _valid_finding(finding: object) -> bool:
    """A cached finding is reported as is, so it must be a whole `Finding` of plain fields."""
    if type(finding) is not Finding:
        return False
    texts = (finding.code, finding.name, finding.severity, finding.message, finding.path)
    numbers = (finding.line, finding.column, finding.end_line, finding.end_column)
    return all(type(t) is str for t in texts) and all(type(n) is int for n in numbers)


@contextlib.contextmanager
def _no_gc() -> Iterator[None]:
    """The collector finds no garbage in a freshly built cache, yet would walk it many times."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


_UNENCODABLE = (TypeError, ValueError, RecursionError)


def _encoded(data: dict) -> bytes | None:
    """The file's bytes, without the entries the format cannot hold (a graphlint bug: those files
    are analysed again next run, not broken). Only those entries: when the whole write gave up
    instead, one summary holding a call kind the format lacked (`DuckCall`) left every later
    run cold, an edit re-analysing all of torch's 2,285 files for a day before anyone noticed."""
    with _no_gc():
        try:
            return cache_codec.dumps(data)
        except _UNENCODABLE:
            kept = {key: value for key, value in data.items() if _encodable(key, value)}
            return cache_codec.dumps(kept) if kept else None  # each entry encodes, so all do


def _encodable(key: object, value: object) -> bool:
    try:
        cache_codec.dumps({key: value})
    except _UNENCODABLE:
        return False
    return True


def _atomic_write(path: Path, data: dict, directory: Path) -> None:
    encoded = _encoded(data)
    if encoded is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        _write_marker_files(directory)
        handle, temp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".cache")
        try:
            with os.fdopen(handle, "wb") as out:
                out.write(encoded)
            os.replace(temp, path)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(temp)
            raise
    except OSError:
        pass  # a read-only tree still gets checked, just without a cache


def _write_marker_files(directory: Path) -> None:
    tag = directory / "CACHEDIR.TAG"
    if not tag.exists():
        tag.write_text("Signature: 8a477f597d28d172789f06886806bc55\n# graphlint cache\n")
    ignore = directory / ".gitignore"
    if not ignore.exists():
        ignore.write_text("# Automatically created by graphlint.\n*\n")


def _valid_result(key: str, entries: list) -> bool:
    """A run's findings, or (under a key ending `|warnings`, as the engine stores them) the
    plain messages of what the run could not reach."""
    if key.endswith("|warnings"):
        return all(isinstance(entry, str) for entry in entries)
    return all(_valid_finding(entry) for entry in entries)
