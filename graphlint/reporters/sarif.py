"""`--format sarif`: SARIF 2.1.0 as GitHub code scanning accepts it.

Rules carry their documentation (generated from the registry); call paths become related
locations so a reviewer can follow how a function ends up inside a capture.
"""

from __future__ import annotations

import json

from graphlint import __version__
from graphlint.findings import Finding
from graphlint.registry import all_rules
from graphlint.reporters import ReportContext

_LEVELS = {"error": "error", "warning": "warning", "info": "note"}


def _uri(path: str) -> str:
    path = path.replace("\\", "/")
    while path.startswith("./"):
        path = path[2:]
    return path


def _location(path: str, line: int, column: int, end_line: int, end_column: int) -> dict:
    return {
        "physicalLocation": {
            "artifactLocation": {"uri": _uri(path), "uriBaseId": "%SRCROOT%"},
            "region": {"startLine": line, "startColumn": column, "endLine": end_line, "endColumn": end_column},
        }
    }


def render(findings: list[Finding], context: ReportContext) -> str:
    rules = all_rules()
    codes = sorted(rules)
    index = {code: i for i, code in enumerate(codes)}
    driver_rules = []
    for code in codes:
        rule = rules[code]
        doc = rule.doc_page()
        driver_rules.append(
            {
                "id": code,
                "name": rule.name,
                "shortDescription": {"text": f"{code} [{rule.name}]"},
                "fullDescription": {"text": rule.summary},
                "help": {"text": doc, "markdown": doc},
                "defaultConfiguration": {"level": _LEVELS[rule.severity]},
                "properties": {"tags": ["cuda-graphs", "pytorch"], "precision": "high"},
            }
        )
    results = []
    for f in findings:
        result = {
            "ruleId": f.code,
            "ruleIndex": index[f.code],
            "level": _LEVELS[f.severity],
            "message": {"text": f"{f.message} ({f.call_path_text()})" if f.call_path else f.message},
            "locations": [_location(f.path, f.line, f.column, f.end_line, f.end_column)],
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
        if f.fix is not None:
            result["fixes"] = [
                {
                    "description": {"text": f"{f.fix.message} ({f.fix.applicability})"},
                    "artifactChanges": [
                        {
                            "artifactLocation": {"uri": _uri(f.path), "uriBaseId": "%SRCROOT%"},
                            "replacements": [
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
                            ],
                        }
                    ],
                }
            ]
        results.append(result)
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
                        "rules": driver_rules,
                    }
                },
                "columnKind": "unicodeCodePoints",
                "originalUriBaseIds": {"%SRCROOT%": {"description": {"text": "the directory graphlint ran in"}}},
                "results": results,
            }
        ],
    }
    return json.dumps(log, indent=2, ensure_ascii=False) + "\n"
