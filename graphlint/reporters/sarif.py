"""`--format sarif`: SARIF 2.1.0 as GitHub code scanning accepts it.

Rules carry their documentation (generated from the registry); call paths become related
locations so a reviewer can follow how a function ends up inside a capture. A finding in a
notebook keeps the notebook as its artifact, the line in its cell as its region, and names the
cell in its message and in `properties.notebookCell`.
"""

from __future__ import annotations

import json

from graphlint import __version__
from graphlint.findings import Finding
from graphlint.registry import all_rules
from graphlint.reporters.context import ReportContext
from graphlint.reporters.fingerprints import fingerprints, report_path

_LEVELS = {"error": "error", "warning": "warning", "info": "note"}


def _location(path: str, line: int, column: int, end_line: int, end_column: int) -> dict:
    return {
        "physicalLocation": {
            "artifactLocation": {"uri": report_path(path), "uriBaseId": "%SRCROOT%"},
            "region": {"startLine": line, "startColumn": column, "endLine": end_line, "endColumn": end_column},
        }
    }


def render(findings: list[Finding], context: ReportContext) -> str:
    rules = all_rules()
    codes = sorted(rules)
    index = {code: i for i, code in enumerate(codes)}
    log = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "graphlint",
                        "version": __version__,
                        "semanticVersion": __version__,
                        "rules": [_driver_rule(code, rules[code]) for code in codes],
                    }
                },
                "columnKind": "unicodeCodePoints",
                "originalUriBaseIds": {"%SRCROOT%": {"description": {"text": "the directory graphlint ran in"}}},
                "results": [
                    _result(f, index[f.code], fingerprint)
                    for f, fingerprint in zip(findings, fingerprints(findings), strict=True)
                ],
            }
        ],
    }
    return json.dumps(log, indent=2, ensure_ascii=False) + "\n"


def _driver_rule(code: str, rule) -> dict:
    doc = rule.doc_page()
    return {
        "id": code,
        "name": rule.name,
        "shortDescription": {"text": f"{code} [{rule.name}]"},
        "fullDescription": {"text": rule.summary},
        "help": {"text": f"{rule.summary}\n\n{rule.why}", "markdown": doc},
        "defaultConfiguration": {"level": _LEVELS[rule.severity]},
        "properties": {"tags": ["cuda-graphs", "pytorch"], "precision": "high"},
    }


def _result(f: Finding, rule_index: int, fingerprint: str) -> dict:
    result = {
        "ruleId": f.code,
        "ruleIndex": rule_index,
        "level": _LEVELS[f.severity],
        "message": {"text": f.cell_note + (f"{f.message} ({f.call_path_text()})" if f.call_path else f.message)},
        "locations": [_location(f.path, f.line, f.column, f.end_line, f.end_column)],
        # Line-independent (path, code, message): code scanning keeps an alert across edits above it.
        "partialFingerprints": {"graphlint/v1": fingerprint},
    }
    if f.call_path:
        result["relatedLocations"] = [
            {
                "id": hop,
                "message": {"text": f"call in `{site.function}` (step {hop + 1} into the capture)"},
                **_location(site.path, site.line, 1, site.line, 1),
            }
            for hop, site in enumerate(f.call_path)
        ]
    if f.cell is not None:  # SARIF has no notebook cells: the region's lines are the cell's
        result["properties"] = {"notebookCell": f.cell}
    if f.fix is not None:
        result["fixes"] = [_fix(f)]
    return result


def _fix(f: Finding) -> dict:
    assert f.fix is not None
    replacements = [
        {
            "deletedRegion": {
                "startLine": e.line,
                "startColumn": e.column,
                "endLine": e.end_line,
                "endColumn": e.end_column,
            },
            "insertedContent": {"text": e.content},
        }
        for e in f.fix.edits
    ]
    return {
        "description": {"text": f"{f.fix.message} ({f.fix.applicability})"},
        "artifactChanges": [
            {"artifactLocation": {"uri": report_path(f.path), "uriBaseId": "%SRCROOT%"}, "replacements": replacements}
        ],
    }
