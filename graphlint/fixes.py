"""Applying fixes: deterministic, all-or-nothing per file, and never leaving a file broken.

Fixes are text edits at 1-based (line, column) spans. For one file they are taken in
finding order; a fix whose edits overlap an already accepted fix waits for the next pass
(the engine re-analyses and tries again), identical edits from several findings are applied
once. The result must parse (with `ast`, and with libcst when the original did) or the file
is left untouched and the refusal reported. Writes go to a temporary file in the same
directory and are renamed over the original, so a crash never leaves half a file.
"""

from __future__ import annotations

import ast
import os
import stat
import tempfile
import warnings
from dataclasses import dataclass

from graphlint.findings import Edit, Finding


@dataclass
class FileFixResult:
    path: str
    original: str
    fixed: str
    applied: list[Finding]
    error: str | None = None


def fix_allowed(finding: Finding, unsafe: bool) -> bool:
    return finding.fix is not None and (finding.fix.applicability == "safe" or unsafe)


def _offsets(text: str) -> list[int]:
    starts = [0]
    for index, char in enumerate(text):
        if char == "\n":
            starts.append(index + 1)
    return starts


def _offset(starts: list[int], text: str, line: int, column: int) -> int:
    if line - 1 >= len(starts):
        return len(text)
    return min(starts[line - 1] + column - 1, len(text))


def apply_edits(text: str, findings: list[Finding]) -> tuple[str, list[Finding]]:
    """Apply the non-overlapping fixes of ``findings`` (in order) to ``text``."""
    starts = _offsets(text)
    accepted: list[tuple[int, int, str]] = []
    applied: list[Finding] = []
    seen_edits: set[Edit] = set()
    for finding in findings:
        assert finding.fix is not None
        spans = []
        for edit in finding.fix.edits:
            if edit in seen_edits:
                continue
            start = _offset(starts, text, edit.line, edit.column)
            end = _offset(starts, text, edit.end_line, edit.end_column)
            spans.append((start, end, edit.content, edit))
        if any(
            _overlaps(start, end, other_start, other_end)
            for start, end, _, _ in spans
            for other_start, other_end, _ in accepted
        ):
            continue
        for start, end, content, edit in spans:
            accepted.append((start, end, content))
            seen_edits.add(edit)
        applied.append(finding)
    result = text
    for start, end, content in sorted(accepted, key=lambda e: (e[0], e[1]), reverse=True):
        result = result[:start] + content + result[end:]
    return result, applied


def _overlaps(a_start: int, a_end: int, b_start: int, b_end: int) -> bool:
    if a_start == a_end == b_start == b_end:  # two different insertions at one point
        return True
    return a_start < b_end and b_start < a_end


def parses(original: str, fixed: str) -> str | None:
    """Why ``fixed`` is not acceptable Python, or None."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(fixed)
    except SyntaxError as error:
        return f"the fixed source would not parse (line {error.lineno}: {error.msg})"
    try:
        import libcst
    except ImportError:  # pragma: no cover - libcst is a dependency
        return None
    try:
        libcst.parse_module(original)
    except Exception:
        return None  # libcst cannot read the original either: ast's verdict stands
    try:
        libcst.parse_module(fixed)
    except Exception as error:
        return f"the fixed source would not parse with libcst: {str(error).splitlines()[0]}"
    return None


def write_atomic(path: str, text: str, encoding: str = "utf-8") -> None:
    """Replace ``path`` with ``text`` in one rename, keeping its permissions."""
    directory = os.path.dirname(os.path.abspath(path))
    mode = stat.S_IMODE(os.stat(path).st_mode)
    handle, temp = tempfile.mkstemp(dir=directory, prefix=".graphlint-", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding=encoding, newline="") as out:
            out.write(text)
        os.chmod(temp, mode)
        os.replace(temp, path)
    except BaseException:
        if os.path.exists(temp):
            os.unlink(temp)
        raise


def fix_file(path: str, original: str, findings: list[Finding], unsafe: bool) -> FileFixResult:
    fixable = [f for f in findings if fix_allowed(f, unsafe)]
    fixed, applied = apply_edits(original, fixable)
    if not applied or fixed == original:
        return FileFixResult(path, original, original, [])
    problem = parses(original, fixed)
    if problem is not None:
        return FileFixResult(path, original, original, [], error=problem)
    return FileFixResult(path, original, fixed, applied)
