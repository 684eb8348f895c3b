"""Two-capture analysis (pure Python, no CUDA): which words of which kernel arguments are
input pointers, and what differs between two captures that should be identical.

Kernel arguments are opaque bytes: cuBLAS passes pointers inside a 736-byte by-value
struct, ATen's elementwise kernels inside `std::array<char*, N>`, and struct padding holds
uninitialised host stack bytes. So every 8-byte word of every argument is classified, and
one capture is never trusted: a word is an input pointer only if it lies inside the same
input at the same byte offset in both captures, whose inputs sit at different addresses.

Some kernels also keep a pointer's low 32 bits in a 4-byte field (cuDNN's layout-transform
kernels on the H200 carry the input's low half next to a float in their parameter struct).
A 4-byte field that holds the low half of the same input at the same offset in both captures
is a slot too (width 4): re-pointing must rewrite it, or the kernel computes with a stale
address.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from graphlint.runtime_sanitizer.analysis.snapshot import GraphSnapshot, Node, Param

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
    width: int = 8  # bytes the launcher rewrites: 8 for a pointer, 4 for a pointer's low half
    inside: int = -1  # the top-level node whose body holds the node (`graph_bodies`); -1: top level


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
    """Every 8-byte argument word (and memcpy/memset pointer) of two structurally equal captures,
    plus the 4-byte fields that hold a pointer's low half."""
    words: list[Word] = []
    for a, b in zip(first.nodes, second.nodes, strict=False):
        if a.type != b.type or a.name != b.name:
            continue
        for p_index, (pa, pb) in enumerate(zip(a.params, b.params, strict=False)):
            param_words = []
            for (offset, va), (_, vb) in zip(pa.words(), pb.words(), strict=False):
                role, region, delta = _classify_pair(first, second, va, vb)
                param_words.append(
                    Word(a.index, p_index, offset, role, region, delta, va, vb, pa.size, inside=a.inside)
                )
            low = _low_halves(first, second, a.index, p_index, pa, pb, param_words)
            low_bytes = {byte for w in low for byte in range(w.offset, w.offset + 4)}
            words.extend(w for w in param_words if not _explained_by(w, low_bytes, pa, pb))
            words.extend(low)
        for k_index, key in enumerate(sorted(a.pointers)):
            va, vb = a.pointers[key], b.pointers.get(key, a.pointers[key])
            role, region, delta = _classify_pair(first, second, va, vb)
            words.append(Word(a.index, -1, k_index, role, region, delta, va, vb, 8, inside=a.inside))
    return words


_LOW = 1 << 32
_POINTER_ROLES = (INPUT, OUTPUT, PARAMETER, POOL)


def _low_region(snapshot: GraphSnapshot, low: int, role: str):
    """The region of ``role`` with an address whose low 32 bits are ``low``, and its offset."""
    for region in snapshot.regions:
        if region.role == role:
            delta = (low - region.start) % _LOW
            if delta < max(region.nbytes, 1):
                return region, delta
    return None, None


def _low_halves(
    first: GraphSnapshot, second: GraphSnapshot, node: int, p_index: int, pa: Param, pb: Param, full: list[Word]
) -> list[Word]:
    """4-byte fields that differ between the captures and hold the low half of the same input
    or output at the same offset in both, outside whole pointers. Pool memory is not matched:
    with gigabytes of segments, almost any 32-bit value is some segment's low half, and a
    baked host value (GL505) would be explained away."""
    covered: set[int] = set()
    for w in full:
        if w.role in _POINTER_ROLES:
            covered.update(range(w.offset, w.offset + 8))
    found = []
    for offset in range(0, pa.size - 3, 4):
        if offset in covered or pa.data[offset : offset + 4] == pb.data[offset : offset + 4]:
            continue
        la = int.from_bytes(pa.data[offset : offset + 4], "little")
        lb = int.from_bytes(pb.data[offset : offset + 4], "little")
        for role in (INPUT, OUTPUT):
            ra, da = _low_region(first, la, role)
            rb, db = _low_region(second, lb, role)
            if ra is not None and rb is not None and ra.name == rb.name and da == db:
                inside = first.nodes[node].inside
                found.append(Word(node, p_index, offset, role, ra.name, da, la, lb, pa.size, width=4, inside=inside))
                break
    return found


def _explained_by(word: Word, low_bytes: set[int], pa: Param, pb: Param) -> bool:
    """An unexplained 8-byte word whose differing bytes all lie in low-half pointer fields."""
    if word.role != UNEXPLAINED or not low_bytes:
        return False
    differing = [i for i in range(word.offset, word.offset + 8) if pa.data[i] != pb.data[i]]
    return all(i in low_bytes for i in differing)


# Kernels whose buffers are registered with a communication library at fixed addresses (NCCL
# collectives, PyTorch's symmetric-memory kernels, NVSHMEM): re-pointing them corrupts
# communication, so their inputs and outputs are never moved (GL507).
FIXED_ADDRESS_KERNEL = re.compile(r"nccl[A-Z_]|nvshmem|symmetric_memory|symm_mem|multimem_|(?:one|two)_shot_all_reduce")


def fixed_address_nodes(snapshot: GraphSnapshot) -> dict[int, str]:
    """Node index -> kernel name, for kernels whose buffers must stay where they were captured."""
    return {
        node.index: node.name
        for node in snapshot.nodes
        if node.type == "kernel" and FIXED_ADDRESS_KERNEL.search(node.name)
    }


@dataclass(frozen=True)
class Pin:
    """An input or output that a parameterized launch copies through its static buffer."""

    role: str  # INPUT or OUTPUT
    index: int
    reason: str
    fixed_address: bool  # a communication kernel uses it (GL507)


def tensor_index(word: Word) -> int:
    """The input or output number of an input/output word ("input3" -> 3)."""
    assert word.region is not None, word  # input/output words always name their region
    return int(word.region[len(word.role) :])


def _communication_buffers(ordering: GraphSnapshot | None) -> dict[tuple[str, int], Pin]:
    """Inputs and outputs a communication kernel touches, from the operator accesses recorded in
    an attributed capture. NCCL 2.19+ keeps its buffers in device-side argument storage, not in
    the kernel's parameters (seen on two H200s with NCCL 2.28.9), so scanning the arguments
    finds nothing: what the c10d operator read and wrote is the only evidence."""
    if ordering is None:
        return {}
    found: dict[tuple[str, int], Pin] = {}
    for index, name in fixed_address_nodes(ordering).items():
        node = ordering.nodes[index]
        for start, size in [*node.reads, *node.writes]:
            for region in ordering.regions:
                if region.role not in (INPUT, OUTPUT) or not _overlaps(region, start, size):
                    continue
                key = (region.role, int(region.name[len(region.role) :]))
                found[key] = Pin(
                    region.role,
                    key[1],
                    f"{region.role} {key[1]} is used by `{node.op or '?'}` through `{name[:60]}` (node {index}), a "
                    "communication kernel whose buffers are registered at fixed addresses: it is copied through the "
                    "graph's static buffer, never re-pointed",
                    True,
                )
    return found


def _overlaps(region, start: int, size: int) -> bool:
    return region.start < start + size and start < region.start + region.nbytes


# Without an attributed capture (`really_output`), the words in an output's range cannot be told
# from an intermediate's that held the same block earlier in the capture. Re-pointing those
# sends the intermediate's writes to the caller's fresh output, and past its end when the
# intermediate was larger: timm's levit_128s in bfloat16 overwrote a weight that way, and
# crossvit_tiny_240 faulted (an H100, issue #34).
UNATTRIBUTED_OUTPUT = (
    "output {index}: no attributed capture tells its own kernels from an intermediate's that used its memory "
    "earlier in the capture, so it is cloned from the static output, never re-pointed"
)


def pins(
    words: list[Word],
    snapshot: GraphSnapshot,
    output_count: int,
    view_outputs: Iterable[int] = (),
    ordering: GraphSnapshot | None = None,
) -> dict[tuple[str, int], Pin]:
    """Which inputs and outputs must not be re-pointed: those a communication kernel uses (their
    buffers are registered at fixed addresses), those a memcpy/memset node or a node inside a
    child-graph or conditional body touches (not re-pointed), outputs no kernel argument moves
    with (memory the graph does not own), outputs that are views into a larger buffer (a fresh tensor cannot stand in for them), and
    every output when there is no attributed ``ordering`` (`UNATTRIBUTED_OUTPUT`)."""
    communication = fixed_address_nodes(snapshot)
    found: dict[tuple[str, int], Pin] = {}
    for w in words:
        if w.role not in (INPUT, OUTPUT):
            continue
        key = (w.role, tensor_index(w))
        if w.node in communication and not (key in found and found[key].fixed_address):
            found[key] = Pin(
                w.role,
                key[1],
                f"{w.role} {key[1]} is used by `{communication[w.node][:80]}` (node {w.node}), a communication "
                "kernel whose buffers are registered at fixed addresses: it is copied through the graph's static "
                "buffer, never re-pointed",
                True,
            )
        elif w.param < 0 and key not in found:
            found[key] = Pin(
                w.role,
                key[1],
                f"{w.role} {key[1]} is touched by a memcpy/memset node: copied through its static buffer",
                False,
            )
    _pin_body_tensors(words, found)
    for key, pin in _communication_buffers(ordering).items():
        if not (key in found and found[key].fixed_address):
            found[key] = pin
    moved = {tensor_index(w) for w in words if w.role == OUTPUT}
    if ordering is None:
        for index in sorted(moved):
            found.setdefault((OUTPUT, index), Pin(OUTPUT, index, UNATTRIBUTED_OUTPUT.format(index=index), False))
    for index in range(output_count):
        if index not in moved and (OUTPUT, index) not in found:
            found[(OUTPUT, index)] = Pin(
                OUTPUT,
                index,
                f"output {index} is not written through a kernel argument that moves with it (memory the graph does "
                "not own): it is cloned from the static output",
                False,
            )
    for index in view_outputs:
        found.setdefault(
            (OUTPUT, index),
            Pin(OUTPUT, index, f"output {index} is a view into a larger buffer: cloned after replay", False),
        )
    return found


def _pin_body_tensors(words: list[Word], found: dict[tuple[str, int], Pin]) -> None:
    """Inputs and outputs a node inside a child-graph or conditional body uses: the launcher
    re-points top-level kernel nodes only (`graph_bodies`), so they are copied."""
    for w in words:
        key = (w.role, tensor_index(w)) if w.role in (INPUT, OUTPUT) else None
        if key is not None and w.inside >= 0 and key not in found:
            found[key] = Pin(
                w.role,
                key[1],
                f"{w.role} {key[1]} is used inside the body of node {w.inside} (a child graph or conditional node), "
                "which re-pointing does not reach: copied through its static buffer",
                False,
            )


def really_output(word: Word, ordering: GraphSnapshot) -> bool:
    """Whether an output word belongs to the output tensor itself. An address in the output's
    range can belong to an intermediate that the allocator freed and handed to the output later
    in the capture (same address, often the same size): such a node ran before the output's
    storage was allocated (`Region.born`), or its operator accessed another range. Those nodes
    keep using the graph's own memory, which is what they did at capture; re-pointing some of
    them but not the nodes that write that intermediate through a pointer the scan does not see
    makes results wrong. ``ordering`` is the attributed capture (each node's operator accesses)."""
    region = next(r for r in ordering.regions if r.name == word.region)
    if word.node < region.born:
        return False
    node = ordering.nodes[word.node]
    return any(start == region.start and size == region.nbytes for start, size in node.reads + node.writes)


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
    scalar arguments (at most 8 bytes) are judged. A by-value struct in which some differing
    word is an address (`uninitialised_structs`) holds stack bytes, and its differing words
    are not judged."""
    found = []
    stacky = uninitialised_structs(words)
    for w in words:
        if w.role != UNEXPLAINED or w.param < 0:
            continue
        if noise is None and w.param_size > 8:
            continue
        if noise is not None and (w.node, w.param, w.offset) in noise:
            continue
        if (w.node, w.param) in stacky:
            continue
        found.append(w)
    return found


# Where Linux maps thread stacks, shared libraries and the CUDA driver's unified addresses.
_MAPPED = (0x7F00_0000_0000, 0x8000_0000_0000)


def _address_like(value: int) -> bool:
    low = value & 0xFFFF_FFFF_FFFF  # a misaligned window keeps a 48-bit address in its low bytes
    return _MAPPED[0] <= low < _MAPPED[1]


def uninitialised_structs(words: list[Word]) -> set[tuple[int, int]]:
    """(node, argument) of the by-value structs (over 8 bytes) in which a word unexplained by
    any pointer differs between the captures and reads as a stack or mapped address in either.
    No Python scalar looks like that: it is what the host stack held where the struct has
    uninitialised bytes (an OffsetCalculator's sizes past its dims), and the other differing
    words of that struct may be stack bytes too, which no host value can be told from."""
    return {
        (w.node, w.param)
        for w in words
        if w.role == UNEXPLAINED and w.param >= 0 and w.param_size > 8
        if _address_like(w.first) or _address_like(w.second)
    }


def scalar_differences(
    first: GraphSnapshot,
    second: GraphSnapshot,
    noise: set[tuple[int, int, int]] | None,
    words: Sequence[Word] = (),
) -> list[tuple[int, int, bytes, bytes]]:
    """Scalar arguments narrower than a word (an int or float flag) that differ between captures
    and are not a pointer's low half (``words`` from `classify`)."""
    pointer_fields = {(w.node, w.param) for w in words if w.width == 4}
    found = []
    for a, b in zip(first.nodes, second.nodes, strict=False):
        if a.type != b.type or a.name != b.name:
            continue
        for p_index, (pa, pb) in enumerate(zip(a.params, b.params, strict=False)):
            if pa.size == 1:
                continue  # an empty functor's single byte is padding (indistinguishable from a bool)
            if (a.index, p_index) in pointer_fields:
                continue
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


_MEMORY_NODES = ("kernel", "memcpy", "memset")


def unordered_accesses(snapshot: GraphSnapshot) -> list[UnorderedAccess]:
    """Pairs of nodes whose recorded accesses conflict (write/read or write/write) with no
    dependency path between them in the graph: a race on every replay. Two nodes of one
    operator call are not judged: each carries the whole call's accesses, not its own."""
    import networkx as nx

    dag = nx.DiGraph()
    dag.add_nodes_from(node.index for node in snapshot.nodes)
    dag.add_edges_from(snapshot.edges)
    reach = {node: nx.descendants(dag, node) for node in dag.nodes}
    # Only nodes that run on the device's memory can race. An operator's accesses are recorded
    # on every node it created, but its event record/wait nodes (c10d collectives add them
    # around each NCCL kernel) order work, they touch no memory.
    accessed = [n for n in snapshot.nodes if (n.reads or n.writes) and n.type in _MEMORY_NODES]
    found = []
    for i, a in enumerate(accessed):
        for b in accessed[i + 1 :]:
            if b.index in reach[a.index] or a.index in reach[b.index] or a.call == b.call >= 0:
                continue
            where = _overlap(a.writes, b.reads + b.writes)
            if where is None:
                where = _overlap(b.writes, a.reads)
            if where is not None:
                found.append(UnorderedAccess(a.index, b.index, where))
    return found


def unattributed_nodes(snapshot: GraphSnapshot) -> list[Node]:
    """Kernel, memcpy and memset nodes no recorded operator launched (Triton, extension and
    library kernels called outside ATen): their memory accesses are unknown, so an ordering
    check that passes over them could miss a race."""
    return [n for n in snapshot.nodes if n.type in _MEMORY_NODES and not n.op]
