"""The graph torch.compile(mode="reduce-overhead") captured on a real GPU, as the guard read it
(fixtures/snapshots/triton/, recorded on an H100 by scripts/record_triton_graph.py, provenance in
the file). Before Triton launches carried their signatures, the fused kernel here had no
operator and no accesses, and the guard refused the graph. These tests hold the recorded
reading to what the analysis needs: every node attributed, the Triton kernel's accesses
taken from its in_ptr/out_ptr names, and the ordering check able to run (and silent: one stream).
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from graphlint.runtime_sanitizer.analysis.report import ordering_findings
from graphlint.runtime_sanitizer.analysis.snapshot import GraphSnapshot, load_captures
from graphlint.runtime_sanitizer.analysis.two_capture import unattributed_nodes

SNAPSHOT = Path(__file__).resolve().parent.parent / "fixtures" / "snapshots" / "triton" / "reduce_overhead.json"


@pytest.fixture(scope="module")
def graph() -> GraphSnapshot:
    captures, meta = load_captures(SNAPSHOT)
    assert meta["refused"] == [], "the recording run refused a graph"
    return captures["guarded"]


def _triton(graph: GraphSnapshot):
    return [node for node in graph.nodes if node.op.startswith("triton ")]


def test_every_node_of_the_compiled_graph_is_attributed(graph: GraphSnapshot) -> None:
    assert graph.nodes, "the recorded graph is empty"
    assert unattributed_nodes(graph) == []
    assert {node.op for node in graph.nodes} >= {"aten.mm.out"}, "the matmul between the fused kernels is ATen's"


def test_the_fused_kernel_reads_its_in_ptrs_and_writes_its_out_ptr(graph: GraphSnapshot) -> None:
    [fused] = _triton(graph)
    assert fused.name in fused.op  # the kernel's own name, as the launch gave it
    assert len(fused.reads) == 2 and len(fused.writes) == 1
    # `relu(x @ w).sin() * 2 + x` in place over the matmul's output (in_out_ptr0), reading x (in_ptr0)
    assert fused.writes[0] in fused.reads
    gemm_writes = {tuple(w) for node in graph.nodes if node.op == "aten.mm.out" for w in node.writes}
    assert tuple(fused.writes[0]) in gemm_writes


def test_the_ordering_check_runs_on_it_and_one_stream_has_no_race(graph: GraphSnapshot) -> None:
    assert ordering_findings(graph, "reduce-overhead step", ("prog.py", 3)) == []


def test_without_the_signature_the_fused_kernel_leaves_the_graph_unreadable(graph: GraphSnapshot) -> None:
    bare = copy.deepcopy(graph)
    for node in _triton(bare):
        node.op, node.reads, node.writes = "", [], []
    assert [node.index for node in unattributed_nodes(bare)] == [node.index for node in _triton(graph)]


def test_an_edge_removed_between_the_matmul_and_the_fused_kernel_is_a_race(graph: GraphSnapshot) -> None:
    [fused] = _triton(graph)
    racy = copy.deepcopy(graph)
    racy.edges = [edge for edge in racy.edges if edge[1] != fused.index]
    found = ordering_findings(racy, "reduce-overhead step", ("prog.py", 3))
    # one race per cuBLAS node that writes the buffer the fused kernel updates in place
    assert found and {f.code for f in found} == {"GL504"}
    assert all("triton triton_poi_fused" in f.message for f in found)
