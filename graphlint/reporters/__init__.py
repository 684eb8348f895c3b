"""Reporters turn the one findings list into each output format; they never filter or reorder."""

from __future__ import annotations

from graphlint.findings import Finding
from graphlint.reporters.context import ReportContext

__all__ = ["FORMATS", "ReportContext", "render"]


FORMATS = ("text", "json", "sarif", "github", "junit")


def render(fmt: str, findings: list[Finding], context: ReportContext) -> str:
    from graphlint.reporters import github, json_report, junit, sarif, text

    renderers = {
        "text": text.render,
        "json": json_report.render,
        "sarif": sarif.render,
        "github": github.render,
        "junit": junit.render,
    }
    return renderers[fmt](findings, context)
