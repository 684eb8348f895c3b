"""Turn a two-capture analysis into findings of the one type every reporter understands."""

from __future__ import annotations

from dataclasses import dataclass, field

from graphlint.findings import Finding
from graphlint.runtime_sanitizer import analysis
from graphlint.runtime_sanitizer.rules import BAKED_HOST_VALUE, UNSTABLE_CAPTURE
from graphlint.runtime_sanitizer.snapshot import GraphSnapshot


@dataclass
class SanitizerReport:
    findings: list[Finding]
    words: list[analysis.Word] = field(default_factory=list)

    @property
    def input_slots(self) -> list[analysis.Word]:
        return analysis.input_slots(self.words)


def _finding(rule, message: str, where: tuple[str, int]) -> Finding:
    path, line = where
    return Finding(rule.code, rule.name, rule.severity, message, path, line, 1, line, 1)


def analyze_pair(
    first: GraphSnapshot,
    second: GraphSnapshot,
    where: tuple[str, int],
    label: str,
    repeat: GraphSnapshot | None = None,
) -> SanitizerReport:
    """GL501 if the captures differ in structure; otherwise classify every word, and GL505 for
    host values baked into arguments. ``repeat`` is a third capture on the first capture's
    inputs with the same host RNG seeds: what differs there is padding noise."""
    differences = analysis.compare_structure(first, second)
    if differences:
        shown = "; ".join(f"node {d.index}: {d.first} vs {d.second}" for d in differences[:3])
        more = f" (and {len(differences) - 3} more)" if len(differences) > 3 else ""
        return SanitizerReport(
            [_finding(UNSTABLE_CAPTURE, f"two captures of `{label}` on equal shapes differ: {shown}{more}", where)]
        )
    if repeat is not None and analysis.compare_structure(first, repeat):
        repeat = None  # cannot measure the noise on a different graph; judge scalars only
    noise = analysis.noise_positions(first, repeat) if repeat is not None else None
    words = analysis.classify(first, second)
    findings = []
    nodes = {node.index: node for node in first.nodes}
    for word in analysis.baked_host_values(words, noise):
        findings.append(
            _finding(
                BAKED_HOST_VALUE,
                f"argument {word.param} of `{nodes[word.node].name[:80]}` (node {word.node}) is "
                f"{word.first:#x} in one capture and {word.second:#x} in the other: a host value frozen into `{label}`",
                where,
            )
        )
    for node, param, a, b in analysis.scalar_differences(first, second, noise):
        findings.append(
            _finding(
                BAKED_HOST_VALUE,
                f"argument {param} of `{nodes[node].name[:80]}` (node {node}) is {a.hex()} in one capture and "
                f"{b.hex()} in the other: a host value frozen into `{label}`",
                where,
            )
        )
    return SanitizerReport(findings, words)
