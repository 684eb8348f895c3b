"""Stable identities of findings, for the formats whose consumers track issues across runs
(GitLab Code Quality's `fingerprint`, SARIF's `partialFingerprints`).

A fingerprint is the hash of the finding's path, code and message, not of its line: code
added above a finding moves it without making it a new issue. Identical findings in one
file are told apart by their order.
"""

from __future__ import annotations

import hashlib
from collections import Counter

from graphlint.findings import Finding


def report_path(path: str) -> str:
    """The path as the report's consumers expect it: forward slashes, no leading `./`."""
    path = path.replace("\\", "/")
    while path.startswith("./"):
        path = path[2:]
    return path


def fingerprints(findings: list[Finding]) -> list[str]:
    """One fingerprint per finding, in order, unique within the report."""
    seen: Counter[tuple[str, str, str]] = Counter()
    result = []
    for finding in findings:
        key = (report_path(finding.path), finding.code, finding.message)
        occurrence = seen[key]
        seen[key] += 1
        text = "\0".join((*key, str(occurrence)))
        result.append(hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()[:32])
    return result
