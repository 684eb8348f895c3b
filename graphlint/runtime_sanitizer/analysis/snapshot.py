"""A captured CUDA graph as plain, versioned, serialisable data (no CUDA needed to read it).

Introspection (which needs a GPU) writes these; the analysis (which does not) reads them, so
CI tests the analysis on snapshots recorded on a real GPU and committed with provenance.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

SNAPSHOT_VERSION = 1


@dataclass
class Param:
    offset: int
    size: int
    data: bytes  # the argument's bytes as captured

    def words(self) -> list[tuple[int, int]]:
        """Every whole 8-byte little-endian word: (byte offset in the argument, value)."""
        return [(i, int.from_bytes(self.data[i : i + 8], "little")) for i in range(0, len(self.data) - 7, 8)]


@dataclass
class Node:
    index: int
    type: str  # "kernel", "memcpy", "memset", "event_record", "event_wait", "graph", "empty", or another
    name: str = ""  # kernel name
    grid: tuple[int, int, int] = (0, 0, 0)
    block: tuple[int, int, int] = (0, 0, 0)
    shared_bytes: int = 0
    params: list[Param] = field(default_factory=list)
    pointers: dict[str, int] = field(default_factory=dict)  # memcpy/memset: "src"/"dst" -> address
    extent: int = 0  # memcpy/memset bytes
    event: int = 0  # event nodes: the event's handle
    child: GraphSnapshot | None = None
    note: str = ""  # what could not be represented, never dropped silently
    op: str = ""  # the ATen operator that launched it, when the capture was attributed
    reads: list[tuple[int, int]] = field(default_factory=list)  # (address, bytes) the op read
    writes: list[tuple[int, int]] = field(default_factory=list)  # (address, bytes) it wrote
    extra: bool = False  # launched with `extra`: params holds the one packed argument buffer
    # A conditional node's body graphs (`torch.cond`, NeMo's while-loop decoders): one for an
    # if/while node, one per case for a switch; `condition` says which kind.
    bodies: list[GraphSnapshot] = field(default_factory=list)
    condition: str = ""
    # In a flattened snapshot (`graph_bodies.flatten`): the top-level child-graph or conditional
    # node whose body holds this node; -1 for a top-level node.
    inside: int = -1
    # Which operator call of the capture launched it (its index in launch order), when
    # attributed: one call's kernels are ordered among themselves by the library (cuDNN's RNN
    # runs its layers on internal streams), which its operator-level accesses cannot show.
    call: int = -1


@dataclass
class Region:
    """A device address range the sanitizer knows: an input, an output, a parameter, pool memory."""

    name: str
    role: str  # "input", "output", "parameter", "pool"
    start: int
    nbytes: int
    # Outputs of an attributed capture: the index of the first graph node created after the
    # output's storage was allocated. Nodes before it that touch the same addresses used other
    # tensors (the allocator handed a freed intermediate's block to the output). 0: unknown.
    born: int = 0

    def contains(self, address: int) -> bool:
        return self.start <= address < self.start + self.nbytes


@dataclass
class GraphSnapshot:
    nodes: list[Node]
    edges: list[tuple[int, int]]
    regions: list[Region] = field(default_factory=list)
    provenance: dict[str, Any] = field(default_factory=dict)
    version: int = SNAPSHOT_VERSION
    # The driver's handle of the graph while it is being read (not saved): how the operators
    # recorded during capture find the body graph they were captured into.
    handle: int = field(default=0, compare=False)

    def region_of(self, address: int, roles: tuple[str, ...] | None = None) -> Region | None:
        for region in self.regions:
            if (roles is None or region.role in roles) and region.contains(address):
                return region
        return None

    # -- serialisation -------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        def node_dict(node: Node) -> dict[str, Any]:
            data = asdict(node)
            data["params"] = [{"offset": p.offset, "size": p.size, "hex": p.data.hex()} for p in node.params]
            data["child"] = node.child.to_dict() if node.child is not None else None
            data["bodies"] = [body.to_dict() for body in node.bodies]
            return data

        return {
            "version": self.version,
            "provenance": self.provenance,
            "regions": [asdict(r) for r in self.regions],
            "nodes": [node_dict(n) for n in self.nodes],
            "edges": [list(e) for e in self.edges],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GraphSnapshot:
        if data.get("version") != SNAPSHOT_VERSION:
            raise ValueError(f"unsupported snapshot version {data.get('version')!r} (expected {SNAPSHOT_VERSION})")
        nodes = []
        for raw in data["nodes"]:
            params = [Param(p["offset"], p["size"], bytes.fromhex(p["hex"])) for p in raw.get("params", [])]
            child = cls.from_dict(raw["child"]) if raw.get("child") else None
            nodes.append(
                Node(
                    index=raw["index"],
                    type=raw["type"],
                    name=raw.get("name", ""),
                    grid=tuple(raw.get("grid", (0, 0, 0))),
                    block=tuple(raw.get("block", (0, 0, 0))),
                    shared_bytes=raw.get("shared_bytes", 0),
                    params=params,
                    pointers=dict(raw.get("pointers", {})),
                    extent=raw.get("extent", 0),
                    event=raw.get("event", 0),
                    child=child,
                    note=raw.get("note", ""),
                    op=raw.get("op", ""),
                    reads=[tuple(r) for r in raw.get("reads", [])],
                    writes=[tuple(w) for w in raw.get("writes", [])],
                    extra=raw.get("extra", False),
                    bodies=[cls.from_dict(body) for body in raw.get("bodies", [])],
                    condition=raw.get("condition", ""),
                    inside=raw.get("inside", -1),
                    call=raw.get("call", -1),
                )
            )
        return cls(
            nodes=nodes,
            edges=[tuple(e) for e in data["edges"]],
            regions=[Region(**r) for r in data.get("regions", [])],
            provenance=data.get("provenance", {}),
            version=data["version"],
        )


def save_captures(path: Path, captures: dict[str, GraphSnapshot], meta: dict[str, Any]) -> None:
    """The captures of one callable (first, second, repeat), as the analysis needs them."""
    data = {"meta": meta, **{name: snapshot.to_dict() for name, snapshot in captures.items()}}
    path.write_text(json.dumps(data, indent=1) + "\n")


def load_captures(path: Path) -> tuple[dict[str, GraphSnapshot], dict[str, Any]]:
    data = json.loads(path.read_text())
    meta = data.pop("meta", {})
    return {name: GraphSnapshot.from_dict(raw) for name, raw in data.items()}, meta
