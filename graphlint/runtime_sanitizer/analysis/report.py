"""Turn a two-capture analysis into findings of the one type every reporter understands."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from graphlint.findings import Finding
from graphlint.runtime_sanitizer.analysis import two_capture as analysis
from graphlint.runtime_sanitizer.analysis.graph_bodies import flatten, unread
from graphlint.runtime_sanitizer.analysis.graph_bodies import where as where_in_graph
from graphlint.runtime_sanitizer.analysis.snapshot import GraphSnapshot
from graphlint.runtime_sanitizer.rules import (
    ALIGNMENT_HAZARD,
    BAKED_HOST_VALUE,
    GRAPH_POOL_MEMORY,
    SANITIZER_INACTIVE,
    UNORDERED_ACCESS,
    UNSTABLE_CAPTURE,
)


@dataclass
class SanitizerReport:
    findings: list[Finding]
    words: list[analysis.Word] = field(default_factory=list)
    alignment: dict[int, int] = field(default_factory=dict)  # input index -> bytes required
    where: tuple[str, int] = ("<unknown>", 1)
    label: str = ""
    graph: GraphSnapshot | None = None  # the capture the findings refer to (for pictures)

    @property
    def input_slots(self) -> list[analysis.Word]:
        return analysis.input_slots(self.words)

    def write_pictures(self, directory: str | Path, name: str | None = None) -> tuple[Path, Path] | None:
        """Draw the analysed graph with its findings as `NAME.svg` and `NAME.html` in ``directory``."""
        if self.graph is None:
            return None
        from graphlint.runtime_sanitizer.analysis.graph_picture import write_graph_pictures

        return write_graph_pictures(Path(directory), name or self.label, self.graph, self.findings, self.words)

    def check_launch(self, addresses: list[int]) -> list[Finding]:
        """GL502 for each new input address less aligned than its capture requires."""
        found = []
        for index, address in enumerate(addresses):
            required = self.alignment.get(index)
            if required is not None and analysis.alignment_of(address) < required:
                found.append(
                    rule_finding(
                        ALIGNMENT_HAZARD,
                        f"input {index} of `{self.label}` at {address:#x} is {analysis.alignment_of(address)}-byte "
                        f"aligned; its kernels were chosen for {required}-byte alignment",
                        self.where,
                    )
                )
        return found


def rule_finding(rule, message: str, where: tuple[str, int]) -> Finding:
    """A runtime finding of ``rule`` at a (path, line): the type every reporter understands."""
    path, line = where
    return Finding.of(rule, message, path, (line, 1, line, 1))


def analyze_pair(
    first: GraphSnapshot,
    second: GraphSnapshot,
    where: tuple[str, int],
    label: str,
    repeat: GraphSnapshot | None = None,
    ordering: GraphSnapshot | None = None,
    moved_repeat: GraphSnapshot | None = None,
) -> SanitizerReport:
    """GL501 if the captures differ in structure; otherwise classify every word, and GL505 for
    host values baked into arguments. ``repeat`` is a third capture on the first capture's
    inputs with the same host RNG seeds: what differs there is padding noise. ``moved_repeat``
    is one on the second capture's inputs with the first seeds: what differs between it and the
    first follows the addresses, not the host values (stack bytes in padding). ``ordering`` is a
    capture of the same graph with each node's reads and writes recorded (GL504); without it
    the ordering check uses whatever accesses ``first`` carries."""
    first, second = flatten(first), flatten(second)  # bodies of child-graph and conditional nodes
    repeat, ordering, moved_repeat = (flatten(g) if g is not None else None for g in (repeat, ordering, moved_repeat))
    differences = analysis.compare_structure(first, second)
    if differences:
        shown = "; ".join(f"node {d.index}: {d.first} vs {d.second}" for d in differences[:3])
        more = f" (and {len(differences) - 3} more)" if len(differences) > 3 else ""
        return SanitizerReport(
            [rule_finding(UNSTABLE_CAPTURE, f"two captures of `{label}` on equal shapes differ: {shown}{more}", where)],
            where=where,
            label=label,
        )
    noise = _noise(first, repeat, moved_repeat)
    words = analysis.classify(first, second)
    findings = []
    nodes = {node.index: node for node in first.nodes}
    # A communication kernel's arguments are the library's own (NCCL's work buffers, offsets into
    # buffers it registered, per-plan storage): they differ between captures for reasons of their
    # own, and its buffers are pinned, never re-pointed (GL507). Not a host value of the program.
    communication = analysis.fixed_address_nodes(first)
    for word in [w for w in analysis.baked_host_values(words, noise) if w.node not in communication]:
        findings.append(
            rule_finding(
                BAKED_HOST_VALUE,
                f"argument {word.param} of `{nodes[word.node].name[:80]}` ({where_in_graph(nodes[word.node])}) is "
                f"{word.first:#x} in one capture and {word.second:#x} in the other: a host value frozen into `{label}`",
                where,
            )
        )
    scalars = analysis.scalar_differences(first, second, noise, words)
    for node, param, a, b in [d for d in scalars if d[0] not in communication]:
        findings.append(
            rule_finding(
                BAKED_HOST_VALUE,
                f"argument {param} of `{nodes[node].name[:80]}` ({where_in_graph(nodes[node])}) is {a.hex()} in one "
                f"capture and {b.hex()} in the other: a host value frozen into `{label}`",
                where,
            )
        )
    findings.extend(_unread_findings(first, label, where))
    ordered = ordering if ordering is not None else first
    findings.extend(ordering_findings(ordered, label, where))
    graph = ordered if len(ordered.nodes) == len(first.nodes) else first  # drawn by write_pictures
    return SanitizerReport(findings, words, where=where, label=label, graph=graph)


def _unread_findings(first: GraphSnapshot, label: str, where: tuple[str, int]) -> list[Finding]:
    """GL500 for each conditional node whose body the driver could not hand out."""
    return [
        rule_finding(
            SANITIZER_INACTIVE,
            f"node {blind.index} of `{label}` is a conditional node: {blind.note}; its kernels are not analysed",
            where,
        )
        for blind in unread(first)
    ]


def _noise(
    first: GraphSnapshot, repeat: GraphSnapshot | None, moved_repeat: GraphSnapshot | None
) -> set[tuple[int, int, int]] | None:
    """The argument words that change with no host value behind them (None: not measured)."""
    if repeat is None or analysis.compare_structure(first, repeat):
        return None  # cannot measure the noise on a different graph; judge scalars only
    noise = analysis.noise_positions(first, repeat)
    if moved_repeat is not None and not analysis.compare_structure(first, moved_repeat):
        noise |= analysis.noise_positions(first, moved_repeat)
    return noise


def ordering_findings(snapshot: GraphSnapshot, label: str, where: tuple[str, int]) -> list[Finding]:
    """GL504 for each pair of operator calls with conflicting recorded accesses and no dependency
    path between their nodes: one finding per pair of calls, at its first pair of nodes, so that
    two multi-kernel calls racing are one report, not one per pair of their kernels."""
    snapshot = flatten(snapshot)
    nodes = {node.index: node for node in snapshot.nodes}
    races: dict[tuple[int, int], list[analysis.UnorderedAccess]] = {}
    for race in analysis.unordered_accesses(snapshot):
        a, b = nodes[race.first], nodes[race.second]
        key = (a.call, b.call) if a.call >= 0 and b.call >= 0 else (-1 - a.index, -1 - b.index)
        races.setdefault(key, []).append(race)
    findings = []
    for race, *more_races in races.values():
        a, b = nodes[race.first], nodes[race.second]
        if a.inside < 0 and b.inside < 0:
            pair = f"nodes {a.index} ({a.op or a.name[:60]}) and {b.index} ({b.op or b.name[:60]})"
        else:
            pair = f"{where_in_graph(a)} ({a.op or a.name[:60]}) and {where_in_graph(b)} ({b.op or b.name[:60]})"
        more = f" ({1 + len(more_races)} pairs of these two operators' nodes)" if more_races else ""
        findings.append(
            rule_finding(
                UNORDERED_ACCESS,
                f"{pair} of `{label}` touch memory at {race.address:#x}, one writes it, and no dependency orders "
                f"them{more}",
                where,
            )
        )
    return findings


def memory_finding(pool_bytes: int, output_bytes: int, where: tuple[str, int], label: str) -> Finding:
    """GL508 (informational): the graph's private pool, and what outputs from the default pool would free."""
    return rule_finding(
        GRAPH_POOL_MEMORY,
        f"`{label}` holds {byte_size(pool_bytes)} in its private pool; a parameterized launch that allocates "
        f"outputs from the default pool per call would give back {byte_size(output_bytes)} of it",
        where,
    )


def byte_size(count: int) -> str:
    """``count`` bytes in the largest binary unit that keeps it at 1 or more: a training graph
    whose outputs are a loss and a few gradients frees kilobytes, which `0.0 MiB` hid."""
    size = float(count)
    for unit in ("bytes", "KiB", "MiB"):
        if size < 1024:
            return f"{count} bytes" if unit == "bytes" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GiB"


def state_findings(reason: str, untested: str, where: tuple[str, int]) -> list[Finding]:
    """GL500 for a sanitizer that did not run (``reason``) or ran on untested versions
    (``untested``): a report must never read as a clean run when nothing, or something
    unverified, checked the program."""
    if reason:
        return [rule_finding(SANITIZER_INACTIVE, f"the sanitizer was inactive ({reason}): nothing was checked", where)]
    if untested:
        return [rule_finding(SANITIZER_INACTIVE, f"the sanitizer ran on untested versions: {untested}", where)]
    return []


def refused_finding(graph: str, reason: str, where: tuple[str, int]) -> Finding:
    """GL500 for one graph the sanitizer saw but refused to analyse, and why."""
    return rule_finding(SANITIZER_INACTIVE, f"the {graph} was not analysed: {reason}", where)
