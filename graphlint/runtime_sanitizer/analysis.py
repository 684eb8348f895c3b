"""Two-capture analysis (pure Python, no CUDA): which words of which kernel arguments are
input pointers, and what differs between two captures that should be identical.

Kernel arguments are opaque bytes: cuBLAS passes pointers inside a 736-byte by-value
struct, ATen's elementwise kernels inside `std::array<char*, N>`, and struct padding holds
uninitialised host stack bytes. So every 8-byte word of every argument is classified, and
one capture is never trusted: a word is an input pointer only if it lies inside the same
input at the same byte offset in both captures, whose inputs sit at different addresses.
"""

from __future__ import annotations

from dataclasses import dataclass

from graphlint.runtime_sanitizer.snapshot import GraphSnapshot, Node

INPUT, OUTPUT, PARAMETER, POOL, CONSTANT, UNEXPLAINED = (
    "input",
    "output",
    "parameter",
    "pool",
    "constant",
    "unexplained",
)


@dataclass(frozen=True)
class Word:
    node: int
    param: int  # argument index; -1 for memcpy/memset pointers
    offset: int  # byte offset inside the argument (or the pointer's key index)
    role: str
    region: str | None  # the input/output/parameter it points into
    delta: int | None  # byte offset inside that region
    first: int
    second: int
    param_size: int


@dataclass(frozen=True)
class StructureDifference:
    """GL501: the two captures do not have the same nodes."""

    index: int
    first: str
    second: str


def _describe(node: Node | None) -> str:
    if node is None:
        return "(no node)"
    return f"{node.type} {node.name}".strip()


def compare_structure(first: GraphSnapshot, second: GraphSnapshot) -> list[StructureDifference]:
    """Node by node (capture order): type, kernel, launch shape and argument layout must match."""
    differences = []
    for index in range(max(len(first.nodes), len(second.nodes))):
        a = first.nodes[index] if index < len(first.nodes) else None
        b = second.nodes[index] if index < len(second.nodes) else None
        if a is None or b is None or a.type != b.type or a.name != b.name:
            differences.append(StructureDifference(index, _describe(a), _describe(b)))
        elif (a.grid, a.block, [(p.offset, p.size) for p in a.params]) != (
            b.grid,
            b.block,
            [(p.offset, p.size) for p in b.params],
        ):
            differences.append(
                StructureDifference(index, f"{_describe(a)} grid={a.grid}", f"{_describe(b)} grid={b.grid}")
            )
    if sorted(first.edges) != sorted(second.edges) and not differences:
        differences.append(StructureDifference(-1, f"{len(first.edges)} edges", f"{len(second.edges)} edges"))
    return differences


def _classify_pair(first: GraphSnapshot, second: GraphSnapshot, va: int, vb: int) -> tuple[str, str | None, int | None]:
    if va == vb:
        region = first.region_of(va, (PARAMETER,))
        if region is not None:
            return PARAMETER, region.name, va - region.start
        return CONSTANT, None, None
    for role in (INPUT, OUTPUT):
        ra, rb = first.region_of(va, (role,)), second.region_of(vb, (role,))
        if ra is not None and rb is not None and ra.name == rb.name and va - ra.start == vb - rb.start:
            return role, ra.name, va - ra.start
    if first.region_of(va, (POOL,)) is not None and second.region_of(vb, (POOL,)) is not None:
        return POOL, None, None
    return UNEXPLAINED, None, None


def classify(first: GraphSnapshot, second: GraphSnapshot) -> list[Word]:
    """Every 8-byte argument word (and memcpy/memset pointer) of two structurally equal captures."""
    words = []
    for a, b in zip(first.nodes, second.nodes, strict=False):
        if a.type != b.type or a.name != b.name:
            continue
        for p_index, (pa, pb) in enumerate(zip(a.params, b.params, strict=False)):
            for (offset, va), (_, vb) in zip(pa.words(), pb.words(), strict=False):
                role, region, delta = _classify_pair(first, second, va, vb)
                words.append(Word(a.index, p_index, offset, role, region, delta, va, vb, pa.size))
        for k_index, key in enumerate(sorted(a.pointers)):
            va, vb = a.pointers[key], b.pointers.get(key, a.pointers[key])
            role, region, delta = _classify_pair(first, second, va, vb)
            words.append(Word(a.index, -1, k_index, role, region, delta, va, vb, 8))
    return words


def input_slots(words: list[Word]) -> list[Word]:
    return [w for w in words if w.role == INPUT]


def noise_positions(first: GraphSnapshot, repeat: GraphSnapshot) -> set[tuple[int, int, int]]:
    """Words that differ between two captures with the same inputs and the same host RNG
    seeds: uninitialised struct padding (host stack bytes), not values the program chose."""
    noise = set()
    for a, b in zip(first.nodes, repeat.nodes, strict=False):
        if a.type != b.type or a.name != b.name:
            continue
        for p_index, (pa, pb) in enumerate(zip(a.params, b.params, strict=False)):
            for (offset, va), (_, vb) in zip(pa.words(), pb.words(), strict=False):
                if va != vb:
                    noise.add((a.index, p_index, offset))
            if pa.size < 8 and pa.data != pb.data:
                noise.add((a.index, p_index, 0))
    return noise


def baked_host_values(words: list[Word], noise: set[tuple[int, int, int]] | None) -> list[Word]:
    """GL505: argument words that differ between the captures with no pointer explanation and
    that are not padding noise. Without a repeat capture to measure the noise, only whole
    scalar arguments (at most 8 bytes) are judged."""
    found = []
    for w in words:
        if w.role != UNEXPLAINED or w.param < 0:
            continue
        if noise is None and w.param_size > 8:
            continue
        if noise is not None and (w.node, w.param, w.offset) in noise:
            continue
        found.append(w)
    return found


def scalar_differences(
    first: GraphSnapshot, second: GraphSnapshot, noise: set[tuple[int, int, int]] | None
) -> list[tuple[int, int, bytes, bytes]]:
    """Scalar arguments narrower than a word (an int or float flag) that differ between captures."""
    found = []
    for a, b in zip(first.nodes, second.nodes, strict=False):
        if a.type != b.type or a.name != b.name:
            continue
        for p_index, (pa, pb) in enumerate(zip(a.params, b.params, strict=False)):
            if pa.size == 1:
                continue  # an empty functor's single byte is padding (indistinguishable from a bool)
            if pa.size < 8 and pa.data != pb.data and (noise is None or (a.index, p_index, 0) not in noise):
                found.append((a.index, p_index, pa.data, pb.data))
    return found


def alignment_of(address: int, cap: int = 256) -> int:
    """The largest power of two (up to ``cap``) that divides ``address``."""
    if address == 0:
        return cap
    return min(cap, address & -address)


def required_alignment(first: GraphSnapshot, shifted: GraphSnapshot, captured: int, element_size: int) -> int:
    """An input's required alignment: the capture's, when a capture on a less aligned copy
    chose other kernels (vectorized loads want 16 bytes); otherwise its element size."""
    return captured if compare_structure(first, shifted) else element_size


@dataclass(frozen=True)
class UnorderedAccess:
    """GL504: two nodes touch overlapping memory, one writes, and no edge path orders them."""

    first: int
    second: int
    address: int


def _overlap(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> int | None:
    for start_a, size_a in a:
        for start_b, size_b in b:
            if start_a < start_b + size_b and start_b < start_a + size_a:
                return max(start_a, start_b)
    return None


def unordered_accesses(snapshot: GraphSnapshot) -> list[UnorderedAccess]:
    """Pairs of nodes whose recorded accesses conflict (write/read or write/write) with no
    dependency path between them in the graph: a race on every replay."""
    import networkx as nx

    dag = nx.DiGraph()
    dag.add_nodes_from(node.index for node in snapshot.nodes)
    dag.add_edges_from(snapshot.edges)
    reach = {node: nx.descendants(dag, node) for node in dag.nodes}
    accessed = [n for n in snapshot.nodes if n.reads or n.writes]
    found = []
    for i, a in enumerate(accessed):
        for b in accessed[i + 1 :]:
            if b.index in reach[a.index] or a.index in reach[b.index]:
                continue
            where = _overlap(a.writes, b.reads + b.writes)
            if where is None:
                where = _overlap(b.writes, a.reads)
            if where is not None:
                found.append(UnorderedAccess(a.index, b.index, where))
    return found
