"""Reporters turn the one findings list into each output format; they never filter or reorder."""

from __future__ import annotations

from graphlint.findings import Finding
from graphlint.reporters.context import ReportContext

__all__ = ["FORMATS", "ReportContext", "render"]


FORMATS = ("text", "concise", "json", "sarif", "github", "gitlab", "pylint", "rdjson", "junit")


def render(fmt: str, findings: list[Finding], context: ReportContext) -> str:
    from graphlint.reporters import github, gitlab, json_report, junit, rdjson, sarif, text

    renderers = {
        "text": text.render,
        "concise": text.render_concise,
        "json": json_report.render,
        "sarif": sarif.render,
        "github": github.render,
        "gitlab": gitlab.render,
        "pylint": text.render_pylint,
        "rdjson": rdjson.render,
        "junit": junit.render,
    }
    return renderers[fmt](findings, context)
