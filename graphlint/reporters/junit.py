"""`--format junit`: one test case per file checked; a file's findings are its failure."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from graphlint.findings import Finding
from graphlint.reporters.context import ReportContext
from graphlint.reporters.text import format_finding


def render(findings: list[Finding], context: ReportContext) -> str:
    by_file: dict[str, list[Finding]] = {path: [] for path in context.files}
    for finding in findings:
        by_file.setdefault(finding.path, []).append(finding)
    failed = sum(1 for found in by_file.values() if found)
    suites = ET.Element("testsuites", name="graphlint", tests=str(len(by_file)), failures=str(failed), errors="0")
    suite = ET.SubElement(
        suites, "testsuite", name="graphlint", tests=str(len(by_file)), failures=str(failed), errors="0", skipped="0"
    )
    for path in sorted(by_file):
        case = ET.SubElement(suite, "testcase", name=path, classname="graphlint", file=path)
        found = by_file[path]
        if found:
            codes = ", ".join(sorted({f.code for f in found}))
            failure = ET.SubElement(
                case,
                "failure",
                message=f"{len(found)} finding{'s' if len(found) != 1 else ''}: {codes}",
                type="graphlint",
            )
            failure.text = "\n".join(format_finding(f) for f in found)
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"
