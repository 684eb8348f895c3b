"""The summary cache in `.graphlint_cache/` (like ruff's `.ruff_cache/`).

What is cached is each file's `ModuleSummary`, keyed by a hash of everything it depends
on: the file's bytes, its module name, graphlint's version and the Python grammar. The
project phase (call graph, reachability, selection, suppressions) is always recomputed
from summaries, so a change in one file, in the configuration or in graphlint itself
invalidates exactly what it must, including findings in other files that call into it.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import sys
import tempfile
from pathlib import Path

from graphlint import __version__
from graphlint.checkers.model import ModuleSummary

CACHE_DIR_NAME = ".graphlint_cache"
_FORMAT = 1
_MAX_ENTRIES = 50_000


def cache_key(data: bytes, module: str, is_package: bool) -> str:
    digest = hashlib.blake2b(digest_size=20)
    digest.update(f"{__version__}|{_FORMAT}|{sys.version_info[:2]}|{module}|{is_package}|".encode())
    digest.update(data)
    return digest.hexdigest()


class SummaryCache:
    def __init__(self, directory: Path | None) -> None:
        self.directory = directory
        self._entries: dict[str, ModuleSummary] = {}
        self._used: set[str] = set()
        self._dirty = False
        self.hits = 0
        self.misses = 0
        if directory is not None:
            self._load()

    @property
    def _file(self) -> Path:
        assert self.directory is not None
        return self.directory / f"v{__version__}" / "summaries.pickle"

    def _load(self) -> None:
        try:
            with open(self._file, "rb") as handle:
                entries = pickle.load(handle)
            if isinstance(entries, dict):
                self._entries = entries
        except FileNotFoundError:
            pass
        except Exception:  # a corrupt or foreign cache only costs a cold run
            self._entries = {}

    def get(self, key: str) -> ModuleSummary | None:
        summary = self._entries.get(key)
        if summary is None:
            self.misses += 1
            return None
        self.hits += 1
        self._used.add(key)
        return summary

    def put(self, key: str, summary: ModuleSummary) -> None:
        self._entries[key] = summary
        self._used.add(key)
        self._dirty = True

    def save(self) -> None:
        if self.directory is None or not self._dirty:
            return
        entries = self._entries
        if len(entries) > _MAX_ENTRIES:  # keep what this run used, drop the oldest rest
            entries = {k: v for k, v in entries.items() if k in self._used}
        try:
            self._file.parent.mkdir(parents=True, exist_ok=True)
            _write_marker_files(self.directory)
            handle, temp = tempfile.mkstemp(dir=self._file.parent, prefix=".summaries-", suffix=".tmp")
            with os.fdopen(handle, "wb") as out:
                pickle.dump(entries, out, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(temp, self._file)
        except OSError:
            pass  # a read-only tree still gets checked, just without a cache


def _write_marker_files(directory: Path) -> None:
    tag = directory / "CACHEDIR.TAG"
    if not tag.exists():
        tag.write_text("Signature: 8a477f597d28d172789f06886806bc55\n# graphlint cache\n")
    ignore = directory / ".gitignore"
    if not ignore.exists():
        ignore.write_text("# Automatically created by graphlint.\n*\n")
