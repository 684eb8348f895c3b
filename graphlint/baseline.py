"""Baseline files: adopt graphlint on a large repository by reporting only new findings.

A baseline lists each finding by path (relative to the baseline file's folder), code and a
line-independent fingerprint: the stripped text of the finding's source line. Lines added or
removed above a finding move it without resurrecting it; changing the line itself does, on
purpose (that is a new hazard to look at). Identical entries are counted, so a second copy of
a known line is new.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from graphlint.findings import Finding

_FORMAT = 1
Key = tuple[str, str, str]


class BaselineError(Exception):
    """The baseline file is missing or not a graphlint baseline."""


def _source_line(finding: Finding, read: Callable[[str], bytes | None]) -> str:
    data = read(finding.path)
    if data is None:
        return ""
    lines = data.decode("utf-8-sig", errors="replace").splitlines()
    return lines[finding.line - 1].strip() if 0 < finding.line <= len(lines) else ""


def _key(finding: Finding, base: Path, read: Callable[[str], bytes | None]) -> Key:
    path = Path(os.path.relpath(os.path.abspath(finding.path), base)).as_posix()
    return (path, finding.code, _source_line(finding, read))


def write_baseline(file: Path, findings: list[Finding], read: Callable[[str], bytes | None]) -> int:
    base = file.resolve().parent
    entries: list[dict[str, str | int]] = [
        dict(zip(("path", "code", "source"), _key(f, base, read), strict=True)) for f in findings
    ]
    for entry, finding in zip(entries, findings, strict=True):
        entry["line"] = finding.line  # for people reading the file; matching ignores it
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(json.dumps({"graphlint-baseline": _FORMAT, "findings": entries}, indent=2) + "\n", "utf-8")
    return len(entries)


def load_baseline(file: Path) -> Counter[Key]:
    try:
        data = json.loads(file.read_text("utf-8"))
        return Counter((e["path"], e["code"], e["source"]) for e in data["findings"])
    except FileNotFoundError:
        raise BaselineError(f"baseline file not found: {file} (create it with --write-baseline)") from None
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise BaselineError(f"{file}: not a graphlint baseline ({error})") from None


def new_findings(
    findings: list[Finding], file: Path, known: Counter[Key], read: Callable[[str], bytes | None]
) -> list[Finding]:
    """The findings not in the baseline, in their original order."""
    remaining = Counter(known)
    base = file.resolve().parent
    kept = []
    for finding in findings:
        key = _key(finding, base, read)
        if remaining[key] > 0:
            remaining[key] -= 1
        else:
            kept.append(finding)
    return kept
