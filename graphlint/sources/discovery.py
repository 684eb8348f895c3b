"""Which files a run checks (Python files and Jupyter notebooks), what they are called in reports,
and their module names."""

from __future__ import annotations

import fnmatch
import functools
import os
import re
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from pathlib import Path

from graphlint.checkers.machinery.core.names import module_name_for
from graphlint.config import ConfigResolver, Settings, matches_pattern, real_path, relative_to_root
from graphlint.sources.notebooks import SUFFIX as NOTEBOOK_SUFFIX


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
    absolute = real_path(path)
    candidates = [absolute]
    for parent in absolute.parents:
        if parent == settings.root or settings.root not in parent.parents:
            break
        candidates.append(parent)
    return any(_excluded(candidate, settings) for candidate in candidates)


# A folder holding one of these is a project's root, never a package inside one: the
# search for the import root stops there.
_PROJECT_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", ".git")


def is_project_root(folder: Path) -> bool:
    """A folder that holds one of `_PROJECT_MARKERS`."""
    return any((folder / marker).exists() for marker in _PROJECT_MARKERS)


def _nested_project(folder: Path) -> bool:
    """Another project inside the one walked: a marker and no `__init__.py`. A package that
    builds an extension has a setup.py too (TransformerEngine's `pytorch/`), and it is still
    a package of the project, as `_package_parts` names it."""
    return is_project_root(folder) and not (folder / "__init__.py").is_file()


def _walked_into(folder: Path, projects_left_out: bool, packages_only: bool) -> bool:
    """Whether a context walk goes into ``folder``: not into another project, or into a folder
    that is not a package, when the walk leaves those out (`discover`)."""
    if packages_only and not (folder / "__init__.py").is_file():
        return False
    return not (projects_left_out and _nested_project(folder))


def _module_of(path: Path) -> tuple[str, bool]:
    """Dotted module name of ``path``, relative to its import root (see `_package_parts`); a
    notebook, which nothing imports, is named by its stem."""
    name = path.stem if path.name.endswith(NOTEBOOK_SUFFIX) else path.name
    return module_name_for([*_package_parts(path.parent), name]), path.name == "__init__.py"


@functools.lru_cache(maxsize=4096)
def _package_parts(directory: Path) -> tuple[str, ...]:
    """The package path of ``directory``: its name and its parents' up to the import root.

    The import root is the parent of the outermost folder with an `__init__.py` above the
    file, crossing folders without one (PEP 420 namespace portions, or a forgotten
    `__init__.py` in a large tree: SGLang's `sglang/srt/...` has hundreds) on the way. This
    is mypy's crawl for namespace packages: `sglang/srt/models/llama.py` is
    `sglang.srt.models.llama`, so `from sglang.srt.layers import ...` in another file
    resolves to it. Namespace folders above the outermost regular package are kept when
    that package's files import it through them (`_imported_through`: megatron-core's
    `megatron/core/...` is `megatron.core...`). A folder without `__init__.py` ends the crawl when its name is not an
    identifier or it is a project root (pyproject.toml, setup.py, .git): a tree with no
    `__init__.py` at all keeps bare names (scripts side by side import each other as
    `import train`). A top package whose own files import its sub-modules by absolute name
    is an import root too (`_imports_own_children`).
    """
    parts: tuple[str, ...] = ()
    crossed: tuple[str, ...] = ()  # namespace folders, kept once a regular package lies above
    while directory.name:
        if not directory.name.isidentifier():
            break  # no import can name it, `__init__.py` or not (PyCG's `micro-benchmark/`)
        if (directory / "__init__.py").is_file():
            if not (directory.parent / "__init__.py").is_file() and _imports_own_children(directory):
                break
            parts = (directory.name, *crossed, *parts)
            crossed = ()
        elif not is_project_root(directory):
            crossed = (directory.name, *crossed)
        else:
            break
        parent = directory.parent
        if parent == directory:
            break
        directory = parent
    if crossed and parts:
        top = directory / Path(*crossed) / parts[0]
        for start in range(len(crossed) - 1, -1, -1):  # the folder right above first, then further up
            if _imported_through(top, ".".join((*crossed[start:], parts[0]))):
                return (*crossed[start:], *parts)
        shadowed = _shadowed_from(directory, crossed, parts[0])
        if shadowed is not None:
            return (*crossed[shadowed:], *parts)
    return parts


def _shadowed_from(stop: Path, crossed: tuple[str, ...], top: str) -> int | None:
    """Where a package named ``top`` reached across the namespace folders ``crossed`` (below
    ``stop``) is a mirror of a real one: the index of the first crossed folder below a
    folder that holds the real ``top`` (or ``src/top``), the deepest such folder first.

    A test tree that mirrors its package (`tests/torchtune/generation/test_x.py`, with
    `tests/` lacking `__init__.py`) is not where `torchtune` is imported from: the package
    found by walking up its own `__init__.py` files from the import root is. The mirror
    keeps its folders in its names (`tests.torchtune.generation.test_x`) instead of taking
    the package's, which would leave the real modules duplicates nothing reaches."""
    for index in range(len(crossed) - 1, -1, -1):
        base = stop / Path(*crossed[:index]) if index else stop
        for candidate in (base / top, base / "src" / top):
            if candidate != base / Path(*crossed[index:]) / top and (candidate / "__init__.py").is_file():
                return index
    return None


@functools.lru_cache(maxsize=256)
def _imported_through(package: Path, dotted: str) -> bool:
    """Whether the files directly in ``package`` import it by ``dotted``, a name that starts
    with namespace folders above it: megatron-core ships `megatron/core/` with no
    `megatron/__init__.py`, and its files import `megatron.core.transformer...`, so
    `megatron` is where module names start (a PEP 420 namespace portion at the top)."""
    pattern = re.compile(rf"^[ \t]*(?:from|import)[ \t]+{re.escape(dotted)}\b", re.MULTILINE)
    return any(pattern.search(text) for text in _texts_in(package))


def _texts_in(directory: Path) -> Iterator[str]:
    """The text of each `.py` file directly in ``directory`` that can be read. Only regular
    files are read: a FIFO would block, /dev/zero never end."""
    for path in sorted(directory.glob("*.py")):
        if not path.is_file():
            continue
        try:
            yield path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue


# `from a.b import c`, `import a.b`, `from a import b`: the first two names of an absolute import.
_ABSOLUTE_IMPORT = re.compile(
    r"^[ \t]*(?:from[ \t]+([A-Za-z_]\w*)(?:\.([A-Za-z_]\w*))?[\w.]*[ \t]+import[ \t(]+([A-Za-z_]\w*)"
    r"|import[ \t]+([A-Za-z_]\w*)\.([A-Za-z_]\w*))",
    re.MULTILINE,
)


@functools.lru_cache(maxsize=256)
def _imports_own_children(directory: Path) -> bool:
    """Whether a file directly in ``directory`` imports a module below it by absolute name
    (`from nested.mod import f` next to `nested/mod.py`). Python finds that only with the
    folder itself on `sys.path` (a script run from there, PyCG's micro-benchmark cases): its
    `__init__.py` notwithstanding, the folder is where module names start. Both names must
    be the folder's (a sub-package and a module in it), so a library import that happens to
    share a sub-package's name (`import onnx.helper` next to `onnx/`) is not evidence."""
    for text in _texts_in(directory):
        for match in _ABSOLUTE_IMPORT.finditer(text):
            package, module, imported, package2, module2 = match.groups()
            package = package or package2
            module = module or module2 or imported
            child = directory / package
            if (child / "__init__.py").is_file() and _is_module(child / module):
                return True
    return False


def _is_module(path: Path) -> bool:
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def discover(
    paths: list[str],
    resolver: ConfigResolver,
    force_exclude: bool = False,
    own_project_only: Collection[str] = (),
    importable_only: Collection[str] = (),
) -> list[SourceFile]:
    """Files under ``paths``, in a stable order; explicitly named files are kept unless
    ``force_exclude`` (ruff's `--force-exclude`, for pre-commit and editors that pass every
    file) applies the exclude patterns to them too. For a named file's context that no
    configuration bounds, a folder of ``own_project_only`` is walked without the projects nested
    in it (`_nested_project`: a folder with its own pyproject.toml, setup.py, setup.cfg or .git,
    and no `__init__.py`), and one of
    ``importable_only`` (in no project at all: /tmp, a home folder) only into packages, what a
    script there can import."""
    found: dict[Path, SourceFile] = {}
    for given in paths:
        given_path = Path(given)
        if given_path.is_dir():
            packages_only = given in importable_only
            projects_left_out = packages_only or given in own_project_only
            for directory, dirnames, filenames in os.walk(given_path):
                dir_path = Path(directory)
                settings = resolver.for_directory(dir_path)
                dirnames[:] = sorted(
                    d
                    for d in dirnames
                    if not _excluded(dir_path / d, settings)
                    and not _is_virtualenv(os.path.join(directory, d))
                    and _walked_into(dir_path / d, projects_left_out, packages_only)
                )
                for filename in sorted(filenames):
                    if not filename.endswith((".py", NOTEBOOK_SUFFIX)):
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
    absolute = real_path(path) if path.exists() else path.absolute()
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
