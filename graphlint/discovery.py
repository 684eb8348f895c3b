"""Which files a run checks, what they are called in reports, and their module names."""

from __future__ import annotations

import fnmatch
import os
from dataclasses import dataclass
from pathlib import Path

from graphlint.checkers.machinery.names import module_name_for
from graphlint.config import ConfigResolver, Settings, matches_pattern, relative_to_root


@dataclass(frozen=True)
class SourceFile:
    display: str  # the path as given on the command line joined with the relative path
    path: Path  # absolute
    settings: Settings
    module: str
    is_package: bool


def _is_virtualenv(directory: str) -> bool:
    return os.path.isfile(os.path.join(directory, "pyvenv.cfg"))


def _excluded(path: Path, settings: Settings) -> bool:
    """Exclusion is decided per entry met while walking: a name-only pattern (``build``)
    matches the entry's own name, a pattern with a slash its path from the config root.
    Folders above the path given on the command line are never excluded."""
    for pattern in settings.excludes:
        if "/" in pattern.rstrip("/"):
            if matches_pattern(relative_to_root(path, settings), pattern):
                return True
        elif fnmatch.fnmatchcase(path.name, pattern.rstrip("/")):
            return True
    return False


def excluded_with_parents(path: Path, settings: Settings) -> bool:
    """Whether ``path`` or a folder above it, up to the config root, is excluded."""
    absolute = path.resolve()
    candidates = [absolute]
    for parent in absolute.parents:
        if parent == settings.root or settings.root not in parent.parents:
            break
        candidates.append(parent)
    return any(_excluded(candidate, settings) for candidate in candidates)


def _module_of(path: Path) -> tuple[str, bool]:
    """Dotted module name from the package structure (`__init__.py` files) around ``path``."""
    parts = [path.name]
    directory = path.parent
    while (directory / "__init__.py").is_file():
        parts.insert(0, directory.name)
        parent = directory.parent
        if parent == directory:
            break
        directory = parent
    return module_name_for(parts), path.name == "__init__.py"


def discover(paths: list[str], resolver: ConfigResolver, force_exclude: bool = False) -> list[SourceFile]:
    """Files under ``paths``, in a stable order; explicitly named files are kept unless
    ``force_exclude`` (ruff's `--force-exclude`, for pre-commit and editors that pass every
    file) applies the exclude patterns to them too."""
    found: dict[Path, SourceFile] = {}
    for given in paths:
        given_path = Path(given)
        if given_path.is_dir():
            for directory, dirnames, filenames in os.walk(given_path):
                dir_path = Path(directory)
                settings = resolver.for_directory(dir_path)
                dirnames[:] = sorted(
                    d
                    for d in dirnames
                    if not _excluded(dir_path / d, settings) and not _is_virtualenv(os.path.join(directory, d))
                )
                for filename in sorted(filenames):
                    if not filename.endswith(".py"):
                        continue
                    file_path = dir_path / filename
                    if _excluded(file_path, settings):
                        continue
                    display = os.path.join(given, os.path.relpath(file_path, given_path))
                    _add(found, display, file_path, settings)
        else:
            settings = resolver.for_directory(given_path.parent if given_path.parent != Path("") else Path("."))
            if force_exclude and excluded_with_parents(given_path, settings):
                continue
            _add(found, given, given_path, settings)
    files = sorted(found.values(), key=lambda f: f.display)
    return _unique_modules(files)


def _add(found: dict[Path, SourceFile], display: str, path: Path, settings: Settings) -> None:
    absolute = path.resolve() if path.exists() else path.absolute()
    if absolute in found:
        return
    module, is_package = _module_of(absolute)
    found[absolute] = SourceFile(display, absolute, settings, module, is_package)


def _unique_modules(files: list[SourceFile]) -> list[SourceFile]:
    """Two scripts may share a module name (two `train.py`): keep their functions apart."""
    seen: dict[str, int] = {}
    result = []
    for source in files:
        count = seen.get(source.module, 0)
        seen[source.module] = count + 1
        if count:
            source = SourceFile(
                source.display, source.path, source.settings, f"{source.module}%{count}", source.is_package
            )
        result.append(source)
    return result
