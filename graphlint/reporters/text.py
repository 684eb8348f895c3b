"""`path:line:col: CODE [name] message` (`path:cell N:line:col:` in a notebook), with the call
path and fix hint beneath."""

from __future__ import annotations

from collections import Counter

from graphlint.findings import Finding
from graphlint.reporters.context import ReportContext

_RED, _BOLD, _DIM, _CYAN, _RESET = "\033[31m", "\033[1m", "\033[2m", "\033[36m", "\033[0m"


def _paint(text: str, style: str, color: bool) -> str:
    return f"{style}{text}{_RESET}" if color else text


def format_finding(finding: Finding, color: bool = False) -> str:
    location = _paint(f"{finding.where}:", _BOLD, color)
    code = _paint(finding.code, _RED if finding.severity == "error" else _CYAN, color)
    lines = [f"{location} {code} [{finding.name}] {finding.message}"]
    if finding.call_path:
        lines.append(_paint(f"    {finding.call_path_text()}", _DIM, color))
    if finding.fix is not None:
        lines.append(_paint(f"    help: {finding.fix.message} ({finding.fix.applicability} fix)", _DIM, color))
    return "\n".join(lines)


def summary_line(findings: list[Finding], context: ReportContext) -> str:
    if not findings:
        return f"All checks passed ({len(context.files)} file{'s' if len(context.files) != 1 else ''} checked)."
    severities = Counter(f.severity for f in findings)
    parts = ", ".join(f"{n} {sev}{'s' if n != 1 else ''}" for sev, n in sorted(severities.items()))
    text = f"Found {len(findings)} finding{'s' if len(findings) != 1 else ''} ({parts}) in {len(context.files)} file{'s' if len(context.files) != 1 else ''} checked."
    safe = sum(1 for f in findings if f.fix and f.fix.applicability == "safe")
    unsafe = sum(1 for f in findings if f.fix and f.fix.applicability == "unsafe")
    hints = []
    if safe:
        hints.append(f"{safe} fixable with `--fix`")
    if unsafe:
        hints.append(f"{unsafe} more with `--fix --unsafe-fixes`")
    if hints:
        text += "\n[*] " + "; ".join(hints) + "."
    return text


def render(findings: list[Finding], context: ReportContext) -> str:
    blocks = [format_finding(f, context.color) for f in findings]
    if context.summary:
        blocks.append(summary_line(findings, context))
    return "\n".join(blocks) + "\n" if blocks else ""


def render_concise(findings: list[Finding], context: ReportContext) -> str:
    """`--format concise`: one line per finding (no call path, no fix hint), then the summary."""
    lines = [_paint(f"{f.where}:", _BOLD, context.color) + f" {f.code} {f.message}" for f in findings]
    if context.summary:
        lines.append(summary_line(findings, context))
    return "\n".join(lines) + "\n" if lines else ""


def render_pylint(findings: list[Finding], context: ReportContext) -> str:
    """`--format pylint`: `path:line: [CODE] message`, the shape pylint-reading tools parse (a
    notebook's cell opens the message: the line is the cell's)."""
    return "".join(f"{f.path}:{f.line}: [{f.code}] {f.cell_note}{f.message}\n" for f in findings)


def render_statistics(findings: list[Finding], context: ReportContext) -> str:
    """One row per code, most frequent first; then the run's total, as the plain report ends."""
    counts = Counter((f.code, f.name) for f in findings)
    fixable = {f.code for f in findings if f.safely_fixable}
    lines = [
        f"{count:>6}  {code}  [{'*' if code in fixable else ' '}] {name}"
        for (code, name), count in sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    ]
    if context.summary:
        lines.append(summary_line(findings, context))
    return "\n".join(lines) + ("\n" if lines else "")
