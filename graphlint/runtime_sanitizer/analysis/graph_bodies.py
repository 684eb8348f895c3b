"""Child-graph and conditional-node bodies inlined into one flat graph (pure).

A graph can hold other graphs: a child-graph node runs one, and a conditional node (CUDA 12.4+:
`torch.cond` captured through PyTorch's conditional nodes, NeMo's while-loop RNN-T decoders)
runs its body zero or more times. The body's kernels read and write memory like any other node,
so a host value baked into a body, a body that reads a rebound input, or a body racing a
side-stream kernel are the same hazards as at top level. Every per-node analysis (the
two-capture word diff, GL505, the ordering check) therefore runs on the flattened graph: the
top-level nodes keep their indices, each body's nodes follow with `Node.inside` naming the
top-level node that holds them, and edges put a body after everything its holder waits for and
before everything that waits for its holder. The launcher re-points top-level kernel nodes
only, so a tensor a body node uses is copied instead (`two_capture.pins`). Where the driver
cannot hand out a conditional node's bodies (CUDA 13.0 drivers have no `cuGraphNodeGetParams`),
the node is `unread`: the sanitizer says so (GL500) and the launcher does not re-point.
"""

from __future__ import annotations

from dataclasses import replace

from graphlint.runtime_sanitizer.analysis.snapshot import GraphSnapshot, Node

# How introspection notes a conditional node whose bodies it could not read.
UNREAD_BODY = "its body was not read"


def unread(snapshot: GraphSnapshot) -> list[Node]:
    """Conditional nodes whose bodies could not be read: whatever their kernels touch is unknown,
    so no analysis may pass them as clean and no launcher may re-point around them."""
    return [node for node in flatten(snapshot).nodes if node.note.startswith(UNREAD_BODY)]


def has_bodies(snapshot: GraphSnapshot) -> bool:
    return any(node.child is not None or node.bodies for node in snapshot.nodes)


def flatten(snapshot: GraphSnapshot) -> GraphSnapshot:
    """The graph with every body inlined after the top-level nodes (the same object when it
    has none, so a flat graph costs nothing)."""
    if not has_bodies(snapshot):
        return snapshot
    nodes = [replace(node, child=None, bodies=[]) for node in snapshot.nodes]
    edges = list(snapshot.edges)
    after: dict[int, list[int]] = {}
    for source, target in snapshot.edges:
        after.setdefault(source, []).append(target)
    for holder in snapshot.nodes:
        for body in bodies_of(holder):
            _inline(flatten(body), holder.index, after.get(holder.index, []), nodes, edges)
    return GraphSnapshot(
        nodes=nodes,
        edges=sorted(edges),
        regions=snapshot.regions,
        provenance=snapshot.provenance,
        version=snapshot.version,
        handle=snapshot.handle,
    )


def bodies_of(node: Node) -> list[GraphSnapshot]:
    """The graphs a node runs: a child-graph node's one, a conditional node's bodies."""
    return ([node.child] if node.child is not None else []) + node.bodies


def _inline(
    body: GraphSnapshot, holder: int, successors: list[int], nodes: list[Node], edges: list[tuple[int, int]]
) -> None:
    """Append a flat body's nodes and edges, ordered after ``holder`` and before its successors."""
    base = len(nodes)
    for node in body.nodes:
        nodes.append(replace(node, index=base + node.index, inside=holder))
    has_in = {target for _, target in body.edges}
    has_out = {source for source, _ in body.edges}
    edges.extend((base + source, base + target) for source, target in body.edges)
    for node in body.nodes:
        if node.inside < 0 and node.index not in has_in:
            edges.append((holder, base + node.index))
        if node.inside < 0 and node.index not in has_out:
            edges.extend((base + node.index, successor) for successor in successors)


def where(node: Node) -> str:
    """How a message names a node: its index, and the top-level node whose body holds it."""
    return f"node {node.index}" if node.inside < 0 else f"node {node.index}, in the body of node {node.inside}"
