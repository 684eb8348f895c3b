"""Bodies of conditional and child-graph nodes are analysed like top-level nodes (no GPU needed).

The graphs here are built by hand in the shape a GPU records (tests/test_conditional_cuda.py
records the real one): a kernel that sets the condition from a device flag, an if-node whose
body scales the input into the output, and a kernel after it."""

from __future__ import annotations

import copy
from pathlib import Path

from graphlint.runtime_sanitizer.analysis import two_capture as analysis
from graphlint.runtime_sanitizer.analysis.graph_bodies import flatten, unread
from graphlint.runtime_sanitizer.analysis.report import analyze_pair, ordering_findings
from graphlint.runtime_sanitizer.analysis.snapshot import GraphSnapshot, Node, Param, Region, load_captures

SNAPSHOTS = Path(__file__).resolve().parent.parent / "fixtures" / "snapshots"

X, FLAG, OUT = 0x7F00_0000_0000, 0x7F00_0010_0000, 0x7F00_0020_0000
MOVED = 0x1000_0000  # the second capture's inputs sit this much higher


def _pointer(address: int) -> Param:
    return Param(0, 8, address.to_bytes(8, "little"))


def _scalar(value: int) -> Param:
    return Param(8, 4, value.to_bytes(4, "little"))


def _kernel(index: int, name: str, *params: Param) -> Node:
    return Node(index=index, type="kernel", name=name, params=list(params))


def _capture(shift: int = 0, scale: int = 7) -> GraphSnapshot:
    body = GraphSnapshot(nodes=[_kernel(0, "mul_scalar", _pointer(X + shift), _pointer(OUT), _scalar(scale))], edges=[])
    holder = Node(index=1, type="conditional", condition="if", bodies=[body])
    return GraphSnapshot(
        nodes=[_kernel(0, "set_handle", _pointer(FLAG + shift)), holder, _kernel(2, "add", _pointer(OUT))],
        edges=[(0, 1), (1, 2)],
        regions=[
            Region("input0", "input", X + shift, 4096),
            Region("input1", "input", FLAG + shift, 1),
            Region("output0", "output", OUT, 4096),
        ],
    )


def test_a_body_is_inlined_after_its_holder_and_before_what_waits_for_it() -> None:
    flat = flatten(_capture())
    assert [(n.index, n.name or n.type, n.inside) for n in flat.nodes] == [
        (0, "set_handle", -1),
        (1, "conditional", -1),
        (2, "add", -1),
        (3, "mul_scalar", 1),
    ]
    assert {(1, 3), (3, 2)} <= set(flat.edges), flat.edges
    assert flatten(flat) is flat, "a graph with no bodies left is returned as it is"


def test_nested_bodies_name_the_top_level_node_that_holds_them() -> None:
    outer = _capture()
    inner_holder = Node(
        index=1, type="conditional", condition="while", bodies=[copy.deepcopy(outer.nodes[1].bodies[0])]
    )
    outer.nodes[1].bodies[0].nodes.append(inner_holder)
    outer.nodes[1].bodies[0].edges.append((0, 1))
    flat = flatten(outer)
    assert [n.inside for n in flat.nodes if n.name == "mul_scalar"] == [1, 1]
    assert len(flat.nodes) == 6 and not any(n.bodies for n in flat.nodes)


def test_an_input_the_body_reads_is_found_and_copied_not_re_pointed() -> None:
    report = analyze_pair(_capture(), _capture(MOVED), ("decode.py", 9), "step", _capture())
    assert report.findings == [], [f.message for f in report.findings]
    slots = {(w.node, w.region, w.inside) for w in report.input_slots}
    assert slots == {(0, "input1", -1), (3, "input0", 1)}
    pins = analysis.pins(report.words, _capture(), output_count=1, ordering=flatten(_capture()))
    assert "body of node 1" in pins[("input", 0)].reason
    assert ("input", 1) not in pins, "the flag is read at top level: re-pointed"


def test_a_host_value_baked_into_a_body_is_gl505_named_with_its_holder() -> None:
    report = analyze_pair(_capture(), _capture(MOVED, scale=9), ("decode.py", 9), "step", _capture())
    assert [f.code for f in report.findings] == ["GL505"]
    assert "`mul_scalar` (node 3, in the body of node 1)" in report.findings[0].message


def test_a_race_inside_a_body_is_gl504() -> None:
    graph = _capture()
    body = graph.nodes[1].bodies[0]
    body.nodes = [
        Node(index=0, type="kernel", name="write", op="aten.mul.out", writes=[(OUT, 64)]),
        Node(index=1, type="kernel", name="read", op="aten.add.Tensor", reads=[(OUT, 64)]),
    ]
    (race,) = ordering_findings(graph, "step", ("decode.py", 9))
    assert race.code == "GL504" and "node 3, in the body of node 1" in race.message
    body.edges = [(0, 1)]
    assert ordering_findings(graph, "step", ("decode.py", 9)) == []


def test_bodies_survive_the_snapshot_file() -> None:
    graph = _capture()
    again = GraphSnapshot.from_dict(graph.to_dict())
    assert again.nodes[1].condition == "if" and again.nodes[1].bodies[0].nodes[0].name == "mul_scalar"
    assert flatten(again).to_dict() == flatten(graph).to_dict()


def test_a_body_the_driver_could_not_read_is_gl500_on_the_recorded_graph() -> None:
    """Recorded on an H100 whose driver (CUDA 13.0) cannot hand out a conditional node's body; on
    the GPU, re-pointing the top-level input slot alone gave other results than eager
    (`meta.repoint_verified_on_gpu`), which is why the launcher copies such graphs instead."""
    captures, meta = load_captures(SNAPSHOTS / "conditional_unread.json")
    (blind,) = unread(captures["first"])
    assert blind.type == "conditional" and blind.index == 1
    report = analyze_pair(captures["first"], captures["second"], ("decode.py", 9), "step", captures["repeat"])
    assert [f.code for f in report.findings] == ["GL500"]
    assert "node 1 of `step` is a conditional node" in report.findings[0].message
    assert meta["repoint_verified_on_gpu"].endswith("matches eager: False")
