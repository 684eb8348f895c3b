"""Partial runs with the whole project behind them: pre-commit, editors and stdin name a few
files, but a capture in one file reaches code in another.

The named files are analysed together with every other Python file under their project
root (the folder of the `pyproject.toml` that configures them; without one, the named
file's own folder, less the projects nested in it, and only its importable packages when no
project holds it: `_unbounded`), so the call graph is the same as for a full run. The other
files' summaries come from the cache, so a warm partial run costs little more than reading
and hashing them. Only the named files are reported on, plus findings elsewhere that a named
file's capture reaches (the call path starts in a named file): that capture is what makes
them hazards, and hiding them would let pre-commit pass a commit that introduces one.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from graphlint.config import ConfigResolver, real_path
from graphlint.engine import CheckOptions, CheckResult, check_files
from graphlint.findings import Finding
from graphlint.sources.discovery import SourceFile, discover, excluded_with_parents, is_project_root


def project_root(source: SourceFile) -> Path:
    """Where a named file's project starts: its config root, or its own folder when there is no
    config or the config excludes the file (a fixture or generated file is not part of it)."""
    if _configured(source):
        return source.settings.root
    return source.path.parent


def _configured(source: SourceFile) -> bool:
    return source.settings.source is not None and not excluded_with_parents(source.path, source.settings)


def check_in_project(
    paths: list[str],
    resolver: ConfigResolver,
    options: CheckOptions,
    unsaved: Mapping[Path, bytes] | None = None,
    force_exclude: bool = False,
) -> CheckResult:
    """Check ``paths`` in their project's context and report on them alone."""
    named = discover(paths, resolver, force_exclude=force_exclude)
    named_files = [source for source, given in _with_given(named, paths) if given]
    if not named_files:
        return check_files(named, resolver, options, unsaved)
    roots = sorted({_shown(project_root(source)) for source in named_files})
    own_project_only, importable_only = _unbounded(named_files, paths)
    named_paths = {source.path for source in named}
    found = discover([*paths, *roots], resolver, force_exclude, own_project_only, importable_only)
    everything = [
        source if source.path in named_paths else replace(source, display=os.path.normpath(source.display))
        for source in found
    ]
    result = check_files(everything, resolver, options, unsaved)
    shown = {source.display for source in everything if source.path in named_paths}
    return CheckResult(
        findings=[finding for finding in result.findings if reported(finding, shown)],
        files=[source for source in everything if source.path in named_paths],
        sources={display: data for display, data in result.sources.items() if display in shown},
        cache_hits=result.cache_hits,
        cache_misses=result.cache_misses,
        tracebacks=result.tracebacks,  # GL002 on a named file keeps its traceback for --verbose
        notebooks=result.notebooks,
    )


def _unbounded(named_files: list[SourceFile], paths: list[str]) -> tuple[set[str], set[str]]:
    """The context folders no configuration bounds, split by how far their walk goes: inside a
    project (a pyproject.toml, setup.py or .git at or above), the folder without the projects
    nested in it; in none (a script in /tmp or a home folder, whose whole walk read every
    project below it and stopped at the first broken config among them), its files and the
    packages it can import."""
    bounded = {_shown(source.settings.root) for source in named_files if _configured(source)}
    walked = {real_path(path) for path in paths if Path(path).is_dir()}  # named folders: walked whole
    folders = {_shown(source.path.parent): source.path.parent for source in named_files if not _configured(source)}
    own_project_only: set[str] = set()
    importable_only: set[str] = set()
    for root, folder in folders.items():  # once per folder: pre-commit names many files in one
        if root not in bounded and real_path(root) not in walked:
            inside = any(is_project_root(above) for above in (folder, *folder.parents))
            (own_project_only if inside else importable_only).add(root)
    return own_project_only, importable_only


def reported(finding: Finding, named: set[str]) -> bool:
    """A finding in a named file, or one whose capture path starts in a named file."""
    return finding.path in named or bool(finding.call_path and finding.call_path[0].path in named)


def _with_given(files: list[SourceFile], paths: list[str]) -> list[tuple[SourceFile, bool]]:
    """Pair each discovered file with whether it was named itself (not found in a folder)."""
    given = {real_path(path) for path in paths if not Path(path).is_dir()}
    return [(source, source.path in given) for source in files]


def _shown(root: Path) -> str:
    """The root as reports should show paths below it: relative to the working folder if inside it."""
    try:
        relative = root.relative_to(Path.cwd().resolve())
    except ValueError:
        return str(root)
    return os.path.join(".", str(relative)) if str(relative) != "." else "."
