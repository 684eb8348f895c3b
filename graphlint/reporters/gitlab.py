"""`--format gitlab`: GitLab Code Quality (a JSON array of issues), as ruff writes it. In a
notebook the positions are the cell's lines and the description names the cell."""

from __future__ import annotations

import json

from graphlint.findings import Finding
from graphlint.reporters.context import ReportContext
from graphlint.reporters.fingerprints import fingerprints, report_path

_SEVERITIES = {"error": "major", "warning": "minor", "info": "info"}


def render(findings: list[Finding], context: ReportContext) -> str:
    issues = [_issue(f, fingerprint) for f, fingerprint in zip(findings, fingerprints(findings), strict=True)]
    return json.dumps(issues, indent=2, ensure_ascii=False) + "\n"


def _issue(f: Finding, fingerprint: str) -> dict:
    description = f"{f.code} [{f.name}] {f.cell_note}{f.message}"
    if f.call_path:
        description += f" ({f.call_path_text()})"
    return {
        "check_name": f.code,
        "description": description,
        "severity": _SEVERITIES[f.severity],
        "fingerprint": fingerprint,
        "location": {
            "path": report_path(f.path),
            "positions": {
                "begin": {"line": f.line, "column": f.column},
                "end": {"line": f.end_line, "column": f.end_column},
            },
        },
    }
