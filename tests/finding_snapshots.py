"""Findings as reviewable text, and the committed snapshots that pin them.

A snapshot holds the whole report a user would act on: span, code, message, the source
line, the call path into the capture and, for a fix, the diff it makes. The marker checks
pin *which* lines are flagged; snapshots pin *what is said* about them, so an engine
rewrite shows every change of wording, span, call path or fix as a plain text diff.

`render_findings` works on the JSON findings list (what `graphlint check --format json`
prints), so fixture tests and corpus runs can be snapshotted alike.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable
from pathlib import Path

from graphlint.findings import Finding
from graphlint.fixing.apply import parses
from graphlint.fixing.edits import fixable_text

UPDATE_ENV = "GRAPHLINT_UPDATE_SNAPSHOTS"
_CONTEXT_LINES = 2
_FRAME_LINES = 4

# Snapshots rewritten during this session, for the end-of-run summary in conftest.py.
REWRITTEN: list[Path] = []

ReadSource = Callable[[str], "bytes | None"]


def display_path(path: str, root: str | None) -> str:
    """``path`` relative to ``root`` (when under it), normalised, with forward slashes."""
    if root is not None and os.path.isabs(path) and Path(path).is_relative_to(root):
        path = os.path.relpath(path, root)
    return os.path.normpath(path).replace(os.sep, "/")


def render_findings(findings: list[dict], read_source: ReadSource, root: str | None = None) -> str:
    """Every finding of ``findings`` (JSON dicts) as text, in the reporters' order.

    ``read_source(path)`` returns a file's bytes (or None) for a path as it appears in the
    findings; ``root`` turns absolute paths into relative ones so the text is the same on
    every machine.
    """
    parsed = [Finding.from_dict(item) for item in findings]
    ordered = sorted(parsed, key=lambda f: (display_path(f.path, root), f.line, f.column, f.code, f.message))
    cache: dict[str, bytes | None] = {}

    def data_of(path: str) -> bytes | None:
        if path not in cache:
            cache[path] = read_source(path)
        return cache[path]

    blocks = [_render_one(finding, data_of, root) for finding in ordered]
    header = f"{len(ordered)} finding{'' if len(ordered) == 1 else 's'}"
    return "\n\n".join([header, *blocks]) + "\n"


def _render_one(finding: Finding, data_of: Callable[[str], bytes | None], root: str | None) -> str:
    path = display_path(finding.path, root)
    span = f"{finding.line}:{finding.column}-{finding.end_line}:{finding.end_column}"
    mode = ", preview" if finding.preview else ""  # a default-set rule's preview behaviour
    lines = [f"{path}:{span} {finding.code} {finding.name} ({finding.severity}{mode})"]
    lines.append(f"  message: {_printable(finding.message)}")
    data = data_of(finding.path)
    if data is not None:
        lines.extend(_frame(data.decode("utf-8-sig", "replace"), finding))
    if finding.call_path:
        lines.append("  call path:")
        lines.extend(f"    {display_path(s.path, root)}:{s.line} in {s.function}" for s in finding.call_path)
    if finding.fix is not None:
        lines.append(f"  fix ({finding.fix.applicability}): {_printable(finding.fix.message)}")
        lines.extend(_fix_diff(finding, fixable_text(data), path))
    return "\n".join(line.rstrip() for line in lines)


def _printable(text: str) -> str:
    """Control characters escaped, so a binary fixture cannot put NULs into a snapshot."""
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in text)


def _frame(text: str, finding: Finding) -> list[str]:
    """The flagged source lines with carets under the span's first line, like a compiler."""
    source = text.splitlines()
    if not 1 <= finding.line <= len(source):
        return []
    last = min(finding.end_line, len(source), finding.line + _FRAME_LINES - 1)
    width = len(str(last))
    frame = ["  source:"]
    for number in range(finding.line, last + 1):
        frame.append(f"    {number:>{width}} | {_printable(source[number - 1])}")
        if number == finding.line:
            first = _printable(source[number - 1][: finding.column - 1])
            end = finding.end_column if finding.end_line == finding.line else len(source[number - 1]) + 1
            carets = "^" * max(1, end - finding.column)
            frame.append(f"    {' ' * width} | {' ' * len(first)}{carets}")
    if last < finding.end_line:
        frame.append(f"    {' ' * width} | ... (to line {finding.end_line})")
    return frame


def _fix_diff(finding: Finding, text: str | None, path: str) -> list[str]:
    """The unified diff of applying this one fix with graphlint's fix engine."""
    if text is None:
        return ["    (source not readable as UTF-8: no diff)"]
    fixed = _apply_text_edits(text, finding.fix.edits if finding.fix else ())
    if fixed == text:
        return ["    (the fix changes nothing)"]
    diff = difflib.unified_diff(
        text.splitlines(), fixed.splitlines(), f"a/{path}", f"b/{path}", n=_CONTEXT_LINES, lineterm=""
    )
    lines = [f"    | {_printable(line)}" for line in diff]
    problem = parses(text, fixed)
    if problem is not None:
        lines.append(f"    the engine refuses this result: {problem}")
    return lines


def _apply_text_edits(text: str, edits) -> str:
    """Apply a finding's text edits (as JSON reports them, derived from the libcst rewrite)."""
    starts = [0]
    for index, char in enumerate(text):
        if char == "\n":
            starts.append(index + 1)

    def offset(line: int, column: int) -> int:
        return len(text) if line - 1 >= len(starts) else min(starts[line - 1] + column - 1, len(text))

    for edit in sorted(edits, key=lambda e: (e.line, e.column), reverse=True):
        start, end = offset(edit.line, edit.column), offset(edit.end_line, edit.end_column)
        text = text[:start] + edit.content + text[end:]
    return text


def updating(option: bool) -> bool:
    """Rewrite snapshots when ``--update-snapshots`` is given or the environment asks."""
    return option or os.environ.get(UPDATE_ENV, "") not in ("", "0")


def assert_matches_snapshot(snapshot: Path, actual: str, update: bool) -> None:
    """Compare ``actual`` with the committed ``snapshot``; rewrite it instead when updating."""
    __tracebackhide__ = True
    expected = snapshot.read_text(encoding="utf-8") if snapshot.exists() else None
    if expected == actual:
        return
    if update:
        snapshot.write_text(actual, encoding="utf-8", newline="\n")
        REWRITTEN.append(snapshot)
        return
    how = f"run `pytest --update-snapshots` (or {UPDATE_ENV}=1) and review the result"
    if expected is None:
        raise AssertionError(f"no snapshot {snapshot.name} yet: {how}")
    diff = difflib.unified_diff(
        expected.splitlines(), actual.splitlines(), "snapshot", "actual", n=_CONTEXT_LINES, lineterm=""
    )
    raise AssertionError(f"{snapshot.name} differs from the current report ({how}):\n" + "\n".join(diff))
