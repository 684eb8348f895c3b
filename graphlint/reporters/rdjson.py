"""`--format rdjson`: reviewdog's Diagnostic Format (one JSON object), as ruff writes it, so a
pull request gets graphlint's findings as review comments, with a fix as a suggested change
(`reviewdog -f=rdjson`). Positions are 1-based lines and columns, as in the text report; in a
notebook they are the cell's lines and the message names the cell."""

from __future__ import annotations

import json

from graphlint.findings import Edit, Finding
from graphlint.reporters.context import ReportContext
from graphlint.reporters.fingerprints import report_path

_SEVERITIES = {"error": "ERROR", "warning": "WARNING", "info": "INFO"}


def render(findings: list[Finding], context: ReportContext) -> str:
    report = {"source": {"name": "graphlint"}, "diagnostics": [_diagnostic(f) for f in findings]}
    return json.dumps(report, indent=2, ensure_ascii=False) + "\n"


def _diagnostic(f: Finding) -> dict:
    message = f"[{f.name}] {f.cell_note}{f.message}"
    if f.call_path:
        message += f" ({f.call_path_text()})"
    diagnostic: dict = {
        "message": message,
        "location": {"path": report_path(f.path), "range": _range(f.line, f.column, f.end_line, f.end_column)},
        "severity": _SEVERITIES[f.severity],
        "code": {"value": f.code},
    }
    if f.fix is not None and f.fix.edits:
        diagnostic["suggestions"] = [_suggestion(edit) for edit in f.fix.edits]
    return diagnostic


def _suggestion(edit: Edit) -> dict:
    return {"range": _range(edit.line, edit.column, edit.end_line, edit.end_column), "text": edit.content}


def _range(line: int, column: int, end_line: int, end_column: int) -> dict:
    return {"start": {"line": line, "column": column}, "end": {"line": end_line, "column": end_column}}
