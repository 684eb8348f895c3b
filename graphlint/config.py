"""`[tool.graphlint]` settings: found, validated and resolved per file.

Each file is governed by the nearest configuration above it (as ruff does): in each folder
`.graphlint.toml`, then `graphlint.toml` (top-level keys, as ruff.toml), then a
`pyproject.toml` that has a `[tool.graphlint]` table; or by the file given with
`--config FILE`. Command-line settings (`--config KEY=VALUE`, `--exclude`, ...) override
the keys of whichever file governs. A bad key or value is an error that names the key and
where it came from, never a silent default.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

from graphlint.registry import all_rules


class ConfigError(Exception):
    """A configuration problem; the CLI reports it and exits with status 2."""


_LIST_KEYS = ("select", "ignore", "extend-select", "exclude", "extend-exclude", "capture-entry-points")
_KNOWN_KEYS = frozenset(_LIST_KEYS) | {"per-file-ignores", "preview", "follow-values"}

DEFAULT_EXCLUDES = (
    ".git",
    ".hg",
    ".svn",
    ".bzr",
    ".venv",
    "venv",
    ".tox",
    ".nox",
    ".eggs",
    "*.egg-info",
    "__pycache__",
    ".mypy_cache",
    ".pytest_cache",
    ".ruff_cache",
    ".graphlint_cache",
    ".ipynb_checkpoints",
    "build",
    "dist",
    "_build",
    "buck-out",
    "node_modules",
    "site-packages",
    "__pypackages__",
)


@dataclass(frozen=True)
class Settings:
    source: Path | None  # the file the settings came from; None for defaults
    root: Path  # patterns in per-file-ignores and exclude are relative to this directory
    select: tuple[str, ...] | None = None
    ignore: tuple[str, ...] = ()
    extend_select: tuple[str, ...] = ()
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    exclude: tuple[str, ...] = ()
    extend_exclude: tuple[str, ...] = ()
    capture_entry_points: tuple[str, ...] = ()
    preview: bool = False
    follow_values: bool = False  # reach through the value flow (experimental: see the README)
    _cache: dict = field(default_factory=dict, compare=False, hash=False, repr=False)

    @property
    def excludes(self) -> tuple[str, ...]:
        base = self.exclude if self.exclude else DEFAULT_EXCLUDES
        return (*base, *self.extend_exclude)


def validate_selectors(selectors: list[str] | tuple[str, ...], where: str) -> tuple[str, ...]:
    """Each selector must be ``ALL`` or a prefix of at least one rule code."""
    codes = all_rules()
    result = []
    for raw in selectors:
        selector = raw.strip().upper()
        if not selector:
            continue
        if selector != "ALL" and not any(code.startswith(selector) for code in codes):
            raise ConfigError(f"unknown rule code or prefix {raw!r} in {where}")
        result.append(selector)
    return tuple(result)


def _load_table(path: Path) -> dict | None:
    try:
        with open(path, "rb") as handle:
            data = tomllib.load(handle)
    except OSError as error:
        raise ConfigError(f"cannot read {path}: {error.strerror or error}") from None
    except UnicodeDecodeError as error:
        raise ConfigError(f"{path}: invalid TOML: not UTF-8 (byte {error.start})") from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{path}: invalid TOML: {error}") from None
    tool = data.get("tool", {})
    if not isinstance(tool, dict):
        raise ConfigError(f"{path}: 'tool' must be a table ([tool.graphlint])")
    if path.name == "pyproject.toml":
        table = tool.get("graphlint")
        if table is not None and not isinstance(table, dict):
            raise ConfigError(f"{path}: [tool.graphlint] must be a table")
        return table
    # A dedicated file passed with --config: [tool.graphlint] or top-level keys.
    table = tool.get("graphlint", data)
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.graphlint] must be a table")
    return table


# The standalone files, in the order they win within one folder; pyproject.toml comes last.
STANDALONE_CONFIGS = (".graphlint.toml", "graphlint.toml")


def settings_from_table(table: dict, source: Path, root: Path | None = None) -> Settings:
    """Validated settings of ``table`` (read from ``source``; patterns relative to ``root``,
    by default the source's folder)."""
    unknown = sorted(set(table) - _KNOWN_KEYS)
    if unknown:
        raise ConfigError(
            f"{source}: unknown key {unknown[0]!r} in [tool.graphlint] (known: {', '.join(sorted(_KNOWN_KEYS))})"
        )
    values: dict[str, tuple[str, ...]] = {}
    for key in _LIST_KEYS:
        if key not in table:
            continue
        value = table[key]
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise ConfigError(f"{source}: [tool.graphlint] {key!r} must be a list of strings")
        if key in ("select", "ignore", "extend-select"):
            values[key] = validate_selectors(value, f"{key!r} of {source}")
        else:
            values[key] = tuple(value)
    per_file: list[tuple[str, tuple[str, ...]]] = []
    raw_per_file = table.get("per-file-ignores", {})
    if not isinstance(raw_per_file, dict):
        raise ConfigError(f"{source}: [tool.graphlint] 'per-file-ignores' must be a table of glob = [codes]")
    for pattern, codes in sorted(raw_per_file.items()):
        if not isinstance(codes, list) or not all(isinstance(c, str) for c in codes):
            raise ConfigError(f"{source}: 'per-file-ignores' entry {pattern!r} must be a list of codes")
        per_file.append((pattern, validate_selectors(codes, f"'per-file-ignores' {pattern!r} of {source}")))
    preview = table.get("preview", False)
    follow_values = table.get("follow-values", False)
    for key, flag in (("preview", preview), ("follow-values", follow_values)):
        if not isinstance(flag, bool):
            raise ConfigError(f"{source}: [tool.graphlint] '{key}' must be true or false")
    return Settings(
        source=source,
        preview=preview,
        follow_values=follow_values,
        root=source.parent if root is None else root,
        select=values.get("select"),
        ignore=values.get("ignore", ()),
        extend_select=values.get("extend-select", ()),
        per_file_ignores=tuple(per_file),
        exclude=values.get("exclude", ()),
        extend_exclude=values.get("extend-exclude", ()),
        capture_entry_points=values.get("capture-entry-points", ()),
    )


def parse_override(text: str) -> dict:
    """One `--config KEY=VALUE` (TOML, as ruff's: `select = ["GL1"]`, `preview = true`)."""
    try:
        table = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"--config {text!r}: not a file, and not a TOML `key = value`: {error}") from None
    settings_from_table(table, Path(f"--config {text!r}"))  # validated here, to name the flag in errors
    return table


class ConfigResolver:
    """Finds the settings for each directory, reading each configuration file once.

    ``overrides`` (a `[tool.graphlint]` table from the command line) replace the same keys of
    every configuration, the defaults included; ``extend_exclude`` patterns are added to each
    configuration's own `extend-exclude`."""

    def __init__(
        self,
        explicit: str | None = None,
        cwd: Path | None = None,
        overrides: dict | None = None,
        extend_exclude: tuple[str, ...] = (),
    ) -> None:
        self.cwd = (cwd or Path.cwd()).resolve()
        self.overrides = dict(overrides or {})
        self.extend_exclude = extend_exclude
        self._by_dir: dict[Path, Settings] = {}
        self._explicit: Settings | None = None
        if explicit is not None:
            path = Path(explicit)
            if not path.is_file():
                raise ConfigError(f"--config: no such file: {explicit}")
            self._explicit = self._settings(_load_table(path) or {}, path.resolve())
        self.default = (
            self._settings({}, None) if self.overrides or extend_exclude else Settings(source=None, root=self.cwd)
        )

    def _settings(self, table: dict, source: Path | None) -> Settings:
        merged = {**table, **self.overrides}
        if self.extend_exclude and isinstance(merged.get("extend-exclude", []), list):  # else: the error names it
            merged["extend-exclude"] = [*merged.get("extend-exclude", []), *self.extend_exclude]
        if source is None:
            settings = settings_from_table(merged, self.cwd / "--config", root=self.cwd)
            return dataclasses.replace(settings, source=None)
        return settings_from_table(merged, source)

    def for_directory(self, directory: Path) -> Settings:
        if self._explicit is not None:
            return self._explicit
        directory = real_path(directory)
        chain = []
        current: Path | None = directory
        found = self.default
        while current is not None:
            if current in self._by_dir:
                found = self._by_dir[current]
                break
            chain.append(current)
            settings = self._in_folder(current)
            if settings is not None:
                found = settings
                break
            parent = current.parent
            current = None if parent == current else parent
        for visited in chain:
            self._by_dir[visited] = found
        return found

    def _in_folder(self, folder: Path) -> Settings | None:
        """The settings of the configuration file in ``folder``, if it has one."""
        for name in STANDALONE_CONFIGS:
            candidate = folder / name
            if candidate.is_file():
                return self._settings(_load_table(candidate) or {}, candidate)
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            table = _load_table(candidate)
            if table is not None:
                return self._settings(table, candidate)
        return None

    def all_settings(self) -> list[Settings]:
        seen = {id(s): s for s in [*self._by_dir.values(), *([self._explicit] if self._explicit else [])]}
        return list(seen.values())


@dataclass(frozen=True)
class Selection:
    """Command-line selection, layered over each file's settings (ruff's precedence)."""

    select: tuple[str, ...] | None = None
    ignore: tuple[str, ...] = ()
    extend_select: tuple[str, ...] = ()
    preview: bool | None = None  # --preview / --no-preview; None: each file's setting


def _specificity(code: str, selectors: tuple[str, ...]) -> int:
    best = -1
    for selector in selectors:
        if selector == "ALL":
            best = max(best, 0)
        elif code.startswith(selector):
            best = max(best, len(selector))
    return best


def enabled_codes(settings: Settings, selection: Selection, relative_path: str) -> frozenset[str]:
    """The codes enabled for one file: the most specific selector wins, ignore wins ties."""
    key = ("enabled", selection, relative_path)
    cached = settings._cache.get(key)
    if cached is not None:
        return cached
    select = selection.select if selection.select is not None else (settings.select or ("GL",))
    select = (*select, *settings.extend_select, *selection.extend_select)
    ignore = (*settings.ignore, *selection.ignore)
    for pattern, codes in settings.per_file_ignores:
        if matches_pattern(relative_path, pattern):
            ignore = (*ignore, *codes)
    preview = settings.preview if selection.preview is None else selection.preview
    rules = all_rules()
    enabled = set()
    for code, rule in rules.items():
        chosen = _specificity(code, select)
        if chosen < 0 or chosen <= _specificity(code, ignore):
            continue
        if rule.preview and not preview:
            continue  # as in ruff: a preview rule needs preview mode, even when selected by its code
        enabled.add(code)
    result = frozenset(enabled)
    settings._cache[key] = result
    return result


def matches_pattern(relative_path: str, pattern: str) -> bool:
    """Glob match against the path relative to the config root, or against the file name."""
    relative_path = relative_path.replace(os.sep, "/")
    pattern = pattern.rstrip("/")
    if fnmatch.fnmatchcase(relative_path, pattern):
        return True
    if "/" not in pattern:
        return any(fnmatch.fnmatchcase(part, pattern) for part in relative_path.split("/"))
    return fnmatch.fnmatchcase(relative_path, pattern + "/*")


def real_path(path: Path | str) -> Path:
    """The absolute path with symlinks followed, as `Path.resolve()`, except that a symlink
    loop is left as it is instead of raising: reading it then fails, as a GL000."""
    return Path(os.path.realpath(path))


def relative_to_root(path: Path, settings: Settings) -> str:
    try:
        return real_path(path).relative_to(settings.root).as_posix()
    except ValueError:
        return path.as_posix()
