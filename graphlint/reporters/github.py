"""`--format github`: GitHub Actions workflow commands, one annotation per finding. In a notebook
the line is the cell's, and the message starts with the cell (`cell 3: ...`), as no property holds it."""

from __future__ import annotations

from graphlint.findings import Finding
from graphlint.reporters.context import ReportContext

_LEVELS = {"error": "error", "warning": "warning", "info": "notice"}


def _data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _property(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")


def render(findings: list[Finding], context: ReportContext) -> str:
    lines = []
    for f in findings:
        message = f.message
        if f.call_path:
            message += f" ({f.call_path_text()})"
        properties = (
            f"file={_property(f.path)},line={f.line},col={f.column},endLine={f.end_line},"
            f"endColumn={f.end_column},title={_property(f'{f.code} [{f.name}]')}"
        )
        lines.append(f"::{_LEVELS[f.severity]} {properties}::{_data(f'{f.code} {f.cell_note}{message}')}")
    return "".join(line + "\n" for line in lines)
