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
import codecs
import io
import os
import stat
import tempfile
import tokenize
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
    write_bytes_atomic(path, text.encode(encoding))


def write_bytes_atomic(path: str, data: bytes) -> None:
    """Replace ``path`` with ``data`` in one rename (a temporary file in the same folder, then
    `os.replace`), keeping its permissions: a reader or a crash never sees half a file."""
    directory = os.path.dirname(os.path.abspath(path))
    mode = stat.S_IMODE(os.stat(path).st_mode)
    handle, temp = tempfile.mkstemp(dir=directory, prefix=".graphlint-", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        os.chmod(temp, mode)
        os.replace(temp, path)
    except BaseException:
        if os.path.exists(temp):
            os.unlink(temp)
        raise


@dataclass(frozen=True)
class SourceText:
    """A file's text and how to turn edited text back into its bytes (PEP 263, BOM)."""

    text: str
    encoding: str  # "utf-8-sig" when the file starts with a BOM

    def encode(self, text: str) -> bytes | None:
        """``text`` in the file's own encoding; None when it cannot hold every character."""
        try:
            return text.encode(self.encoding)
        except UnicodeEncodeError:
            return None


def source_text(data: bytes) -> SourceText | None:
    """The text of a file's bytes in the encoding Python reads it with; None if undecodable."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError:
        return None
    if encoding == "utf-8" and data.startswith(codecs.BOM_UTF8):
        encoding = "utf-8-sig"
    try:
        return SourceText(data.decode(encoding), encoding)
    except (UnicodeDecodeError, LookupError):
        return None


def replace_if_unchanged(path: str, read: bytes, new: bytes) -> str | None:
    """Write ``new`` over ``path`` only if it still holds the bytes ``read`` earlier in the run,
    so an edit made meanwhile (in an editor, by a formatter) is never overwritten; the reason
    it was skipped, or None when written. The comparison is made right before the rename."""
    try:
        with open(path, "rb") as handle:
            current = handle.read()
    except FileNotFoundError:
        return "the file was deleted since it was read"
    except OSError as error:
        return f"cannot read it again: {error.strerror or error}"
    if current != read:
        return "the file changed since it was read (run again to fix it)"
    try:
        write_bytes_atomic(path, new)
    except OSError as error:
        return f"cannot write it: {error.strerror or error}"
    return None


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
