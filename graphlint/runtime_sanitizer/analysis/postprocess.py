"""What a user sees of the guard's raw findings: the ones they suppressed dropped, identical
ones merged with a count.

Runtime findings are suppressed like static ones, by a comment on the reported user line
(`# noqa: GL503`, `# graphlint: ignore[GL503]`, `# graphlint: skip-file`), read with the
static checker's own parser, plus codes the front end ignores (marker, ini option). A hazard
hit in a loop is one hazard: the same code, place and message is reported once, counted.
"""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Iterable
from pathlib import Path

from graphlint.findings import Finding, sort_findings
from graphlint.suppressions import FileSuppressions, parse_suppressions

_NONE = FileSuppressions({}, False)


def _suppressions(path: str, cache: dict[str, FileSuppressions]) -> FileSuppressions:
    if path not in cache:
        try:
            source = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError, ValueError):
            cache[path] = _NONE
            return _NONE
        try:
            tree = ast.parse(source)
        except (SyntaxError, ValueError):
            tree = None
        cache[path] = parse_suppressions(source, tree)
    return cache[path]


def suppressed(finding: Finding, cache: dict[str, FileSuppressions]) -> bool:
    """Whether a comment on the finding's line, a disable block around it or a skip-file in its
    source file covers it."""
    found = _suppressions(finding.path, cache)
    if found.skip_file:
        return True
    on_line = found.by_line.get(finding.line)
    if on_line is not None and on_line.covers(finding.code):
        return True
    return any(block.covers(finding.line, finding.code) for block in found.blocks)


def merge_identical(findings: Iterable[Finding]) -> list[Finding]:
    """One finding per (code, place, message), with ``(N times)`` when it happened N > 1 times."""
    counts: dict[tuple[str, str, int, str], int] = {}
    first: dict[tuple[str, str, int, str], Finding] = {}
    for finding in findings:
        key = (finding.code, finding.path, finding.line, finding.message)
        counts[key] = counts.get(key, 0) + 1
        first.setdefault(key, finding)
    merged = []
    for key, finding in first.items():
        n = counts[key]
        merged.append(finding if n == 1 else dataclasses.replace(finding, message=f"{finding.message} ({n} times)"))
    return merged


def finish(findings: Iterable[Finding], ignored: Iterable[str] = ()) -> list[Finding]:
    """The findings to report: ignored codes and suppressed lines dropped, duplicates merged, sorted."""
    skip = set(ignored)
    cache: dict[str, FileSuppressions] = {}
    kept = [f for f in findings if f.code not in skip and not suppressed(f, cache)]
    return sort_findings(merge_identical(kept))
