"""`graphlint captures` output: one block per capture region, or the same as JSON. A region in
a notebook is shown at its cell (`nb.ipynb:cell 6:2:`; in JSON a `cell` key, the line the cell's)."""

from __future__ import annotations

import json
from collections.abc import Mapping

from graphlint.checkers.machinery.project.captures import OUTSIDE, RESOLVED, CaptureRegion, CaptureReport
from graphlint.findings import cell_prefix
from graphlint.sources.notebooks import Notebook

_MAX_TARGETS = 3
_MAX_PRUNED = 8


def render_captures(report: CaptureReport, fmt: str, notebooks: Mapping[str, Notebook] | None = None) -> str:
    notebooks = notebooks or {}
    if fmt == "json":
        return json.dumps(_located(report.to_dict(), notebooks), indent=2) + "\n"
    blocks = [_region_text(region, notebooks) for region in report.regions]
    if report.unseen:
        lines = ["Contexts named like captures whose definition is not analysed (declare them if they capture):"]
        for unseen in report.unseen:
            lines.append(f"  {_place(unseen.path, unseen.line, notebooks)}: {unseen.label}")
            lines.extend(f"      {line}" for line in unseen.snippet.splitlines())
        blocks.append("\n".join(lines))
    blocks.extend(f"warning: {misnamed.message()}" for misnamed in report.misnamed)
    resolved = sum(1 for r in report.regions if any(c.status == RESOLVED for c in r.callables))
    blocks.append(
        f"{len(report.regions)} capture region{'s' if len(report.regions) != 1 else ''}, "
        f"{resolved} with a resolved callable, "
        f"{report.functions_reached} function{'s' if report.functions_reached != 1 else ''} reached."
    )
    return "\n\n".join(blocks) + "\n"


def _place(path: str, line: int, notebooks: Mapping[str, Notebook]) -> str:
    notebook = notebooks.get(path)
    cell, line = notebook.cell_line(line) if notebook is not None else (None, line)
    return f"{path}:{cell_prefix(cell)}{line}"


def _located(report: dict, notebooks: Mapping[str, Notebook]) -> dict:
    """The JSON report with each region and unseen context in a notebook moved to its cell."""
    for entry in (*report["regions"], *report["unseen_contexts"]):
        notebook = notebooks.get(entry["path"])
        if notebook is not None:
            entry["cell"], entry["line"] = notebook.cell_line(entry["line"])
    return report


def _region_text(region: CaptureRegion, notebooks: Mapping[str, Notebook]) -> str:
    lines = [f"{_place(region.path, region.line, notebooks)}: {region.kind}: {region.label}"]
    if not region.callables:
        lines.append("    captures no call graphlint can name (only operations)")
    for captured in region.callables:
        if captured.status == RESOLVED:
            shown = ", ".join(captured.targets[:_MAX_TARGETS])
            more = f" (+{len(captured.targets) - _MAX_TARGETS} more)" if len(captured.targets) > _MAX_TARGETS else ""
            lines.append(f"    runs {captured.text} -> {shown}{more}")
        elif captured.status == OUTSIDE:
            lines.append(f"    passed in from outside: `{captured.text}`, {captured.detail}")
        else:
            lines.append(f"    unresolved: `{captured.text}` ({captured.detail})")
    lines.append(f"    reaches {region.reached} function{'s' if region.reached != 1 else ''}")
    if region.pruned:
        lines.append("    calls the constants it passes rule out:")
        lines.extend(f"      {pruned.text()}" for pruned in region.pruned[:_MAX_PRUNED])
        if len(region.pruned) > _MAX_PRUNED:
            lines.append(f"      (+{len(region.pruned) - _MAX_PRUNED} more; --format json lists them all)")
    return "\n".join(lines)
