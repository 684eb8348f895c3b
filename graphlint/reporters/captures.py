"""`graphlint captures` output: one block per capture region, or the same as JSON."""

from __future__ import annotations

import json

from graphlint.checkers.machinery.project.captures import OUTSIDE, RESOLVED, CaptureRegion, CaptureReport

_MAX_TARGETS = 3


def render_captures(report: CaptureReport, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(report.to_dict(), indent=2) + "\n"
    blocks = [_region_text(region) for region in report.regions]
    if report.unseen:
        lines = ["Contexts named like captures whose definition is not analysed (declare them if they capture):"]
        for unseen in report.unseen:
            lines.append(f"  {unseen.path}:{unseen.line}: {unseen.label}")
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


def _region_text(region: CaptureRegion) -> str:
    lines = [f"{region.path}:{region.line}: {region.kind}: {region.label}"]
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
    return "\n".join(lines)
