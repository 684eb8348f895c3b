"""`--format json`: the array documented in RULES.md, sorted by path, line, column, code."""

from __future__ import annotations

import json
from collections import Counter

from graphlint.findings import Finding
from graphlint.reporters.context import ReportContext


def render(findings: list[Finding], context: ReportContext) -> str:
    return json.dumps([f.to_dict() for f in findings], indent=2, ensure_ascii=False) + "\n"


def render_statistics(findings: list[Finding]) -> str:
    counts = Counter((f.code, f.name) for f in findings)
    fixable = {f.code for f in findings if f.safely_fixable}
    rows = [
        {"code": code, "name": name, "count": count, "fixable": code in fixable}
        for (code, name), count in sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    ]
    return json.dumps(rows, indent=2) + "\n"
