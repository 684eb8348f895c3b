"""Configuration from the command line, as ruff takes it, and what `--show-settings` prints.

`--config` names a file, or (when it holds a `=` and no such file exists) sets one key in
TOML (`--config 'select = ["GL1"]'`); it may be given more than once, with one file at
most. `--exclude`, `--extend-exclude` and `--per-file-ignores` are shorthands for those
keys. All of them override the keys of every configuration the run finds.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from graphlint.config import (
    DEFAULT_EXCLUDES,
    ConfigError,
    ConfigResolver,
    Selection,
    Settings,
    enabled_codes,
    parse_override,
)
from graphlint.config import relative_to_root as _relative


def add_config_flags(parser: argparse.ArgumentParser, per_file_ignores: bool) -> None:
    parser.add_argument(
        "--config",
        action="append",
        metavar="FILE|KEY=VALUE",
        help="use this configuration file for every file, or override one setting (TOML: "
        "--config 'select = [\"GL1\"]'); repeatable",
    )
    parser.add_argument(
        "--exclude", action="append", metavar="PATTERNS", help="exclude these patterns instead of the configured ones"
    )
    parser.add_argument("--extend-exclude", action="append", metavar="PATTERNS", help="exclude these patterns too")
    if per_file_ignores:
        parser.add_argument(
            "--per-file-ignores",
            action="append",
            metavar="PATTERN:CODES",
            help="ignore CODES in files matching PATTERN (replaces the configured per-file-ignores); repeatable",
        )


def resolver_from_args(args: argparse.Namespace) -> ConfigResolver:
    """The resolver the flags describe; a bad flag is a ConfigError naming it."""
    file: str | None = None
    overrides: dict = {}
    for value in args.config or ():
        if os.path.isfile(value) or "=" not in value:
            if file is not None:
                raise ConfigError(f"--config: one configuration file at most ({file}, {value})")
            file = value
        else:
            overrides.update(parse_override(value))
    if args.exclude:
        overrides["exclude"] = _split(args.exclude)
    per_file = getattr(args, "per_file_ignores", None)
    if per_file:
        overrides["per-file-ignores"] = _per_file_ignores(per_file)
    return ConfigResolver(file, overrides=overrides, extend_exclude=tuple(_split(args.extend_exclude or ())))


def _split(values: list[str] | tuple[str, ...]) -> list[str]:
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


def _per_file_ignores(values: list[str]) -> dict[str, list[str]]:
    table: dict[str, list[str]] = {}
    for value in values:
        pattern, colon, codes = value.rpartition(":")
        if not colon or not pattern or not codes.strip():
            raise ConfigError(f"--per-file-ignores {value!r}: expected PATTERN:CODES (tests/*:GL101,GL111)")
        table.setdefault(pattern, []).extend(_split([codes]))
    return table


def render_settings(path: str, resolver: ConfigResolver, selection: Selection, module: str | None) -> str:
    """`--show-settings`: where the settings of ``path`` come from, each key's resolved value
    and the rules that end up enabled for it."""
    given = Path(path)
    settings = resolver.for_directory(given if given.is_dir() else given.parent)
    lines = [
        f"Resolved settings for: {path}",
        f"Settings path: {settings.source if settings.source is not None else '(none: defaults)'}",
    ]
    if resolver.overrides or resolver.extend_exclude:
        lines.append("Command-line overrides: " + ", ".join(sorted({*resolver.overrides, *_cli_keys(resolver)})))
    if module is not None:
        lines.append(f"module = {json.dumps(module)}")
    for key, value in _values(settings):
        lines.append(f"{key} = {json.dumps(value)}")
    enabled = sorted(enabled_codes(settings, selection, _relative(given, settings)))
    lines.append(f"enabled = {json.dumps(enabled)}")
    return "\n".join(lines) + "\n"


def _cli_keys(resolver: ConfigResolver) -> tuple[str, ...]:
    return ("extend-exclude",) if resolver.extend_exclude else ()


def _values(settings: Settings) -> list[tuple[str, object]]:
    return [
        ("root", str(settings.root)),
        ("select", list(settings.select or ("GL",))),
        ("ignore", list(settings.ignore)),
        ("extend-select", list(settings.extend_select)),
        ("per-file-ignores", {pattern: list(codes) for pattern, codes in settings.per_file_ignores}),
        ("exclude", list(settings.exclude or DEFAULT_EXCLUDES)),
        ("extend-exclude", list(settings.extend_exclude)),
        ("capture-entry-points", list(settings.capture_entry_points)),
        ("preview", settings.preview),
        ("follow-values", settings.follow_values),
    ]
