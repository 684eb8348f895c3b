"""Applying fixes: deterministic, all-or-nothing per file, and never leaving a file broken.

A fix is a list of operations on syntax nodes (`graphlint.fixing.ops`), carried out on the
file's libcst tree (`graphlint.fixing.edits`). For one file the fixes are taken in finding
order; a fix whose nodes overlap an already accepted fix waits for the next pass (the
engine re-analyses and tries again), identical operations from several findings are
applied once. When a node cannot be found, or the result would not parse (with `ast` and
libcst), the file is left untouched and the refusal reported. Writes go to a temporary file
in the same directory and are renamed over the original, so a crash never leaves half a
file.
"""

from __future__ import annotations

import ast
import os
import stat
import tempfile
import warnings
from dataclasses import dataclass

from graphlint.findings import Finding
from graphlint.fixing.ops import FixOperation, overlaps


@dataclass
class FileFixResult:
    path: str
    original: str
    fixed: str
    applied: list[Finding]
    error: str | None = None


def fix_allowed(finding: Finding, unsafe: bool) -> bool:
    fix = finding.fix
    return fix is not None and bool(fix.operations) and (fix.applicability == "safe" or unsafe)


def select_operations(findings: list[Finding]) -> tuple[list[FixOperation], list[Finding]]:
    """The operations of this pass, and the findings they fix, taken in ``findings`` order.

    A fix that touches a node an accepted fix touches waits for the next pass; an operation
    already accepted (the same change asked for by another finding) is not repeated.
    """
    accepted: list[FixOperation] = []
    applied: list[Finding] = []
    for finding in findings:
        assert finding.fix is not None
        new = [operation for operation in finding.fix.operations if operation not in accepted]
        if any(overlaps(operation.span, other.span) for operation in new for other in accepted):
            continue
        accepted.extend(new)
        applied.append(finding)
    return accepted, applied


def parses(original: str, fixed: str) -> str | None:
    """Why ``fixed`` is not acceptable Python, or None (libcst's verdict only if it reads ``original``)."""
    import libcst

    try:
        libcst.parse_module(original)
    except Exception:
        return _ast_problem(fixed)  # libcst cannot read the original either: ast's verdict stands
    return fixed_problem(fixed)


def fixed_problem(fixed: str) -> str | None:
    """Why ``fixed`` is not acceptable Python to both `ast` and libcst, or None."""
    import libcst

    problem = _ast_problem(fixed)
    if problem is not None:
        return problem
    try:
        libcst.parse_module(fixed)
    except Exception as error:
        return f"the fixed source would not parse with libcst: {str(error).splitlines()[0]}"
    return None


def _ast_problem(fixed: str) -> str | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(fixed)
    except SyntaxError as error:
        return f"the fixed source would not parse (line {error.lineno}: {error.msg})"
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
    """One pass of fixes over one file's text; the file itself is not touched here."""
    from graphlint.fixing.edits import FixError, apply_operations  # libcst: only when there is a fix

    fixable = [f for f in findings if fix_allowed(f, unsafe)]
    operations, applied = select_operations(fixable)
    if not applied:
        return FileFixResult(path, original, original, [])
    try:
        fixed = apply_operations(original, operations)
    except FixError as error:
        return FileFixResult(path, original, original, [], error=str(error))
    if fixed == original:
        return FileFixResult(path, original, original, [])
    problem = fixed_problem(fixed)
    if problem is not None:
        return FileFixResult(path, original, original, [], error=problem)
    return FileFixResult(path, original, fixed, applied)
