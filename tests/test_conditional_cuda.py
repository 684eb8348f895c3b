"""Graphs with a conditional node on a real GPU (marker `cuda`; skipped with the reason elsewhere).

The body of a conditional node is a graph of its own. Before its bodies were walked, a host
value baked into a body went unreported, and the launcher re-pointed the top-level kernels that
read an input while the body kept reading the captured one. Where the driver reads bodies
(`cuGraphNodeGetParams`), they are analysed; where it cannot, the sanitizer says so and the
launcher copies."""

from __future__ import annotations

import warnings

import pytest

torch = pytest.importorskip("torch", reason="the sanitizer needs torch")
pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device: conditional nodes need a GPU"),
]

from conditional_programs import (  # noqa: E402
    conditional_nodes_supported,
    driver_reads_bodies,
    gated_host_scale,
    gated_update,
)


@pytest.fixture(autouse=True)
def _needs_conditional_nodes() -> None:
    pytest.importorskip("cuda.bindings", reason="cuda-bindings is not installed")
    if not conditional_nodes_supported():
        pytest.skip("this driver cannot add conditional nodes (CUDA 12.4+)")


def _reads_bodies(wanted: bool) -> None:
    if driver_reads_bodies() != wanted:
        pytest.skip("this driver reads conditional bodies" if not wanted else "this driver cannot read bodies")


def _input() -> torch.Tensor:
    return torch.randn(1 << 12, device="cuda")


@torch.inference_mode()
def test_the_body_of_a_conditional_node_is_read_and_analysed() -> None:
    from graphlint.runtime_sanitizer.analysis.graph_bodies import flatten
    from graphlint.runtime_sanitizer.api import sanitize_callable
    from graphlint.runtime_sanitizer.capture.two_captures import capture_attributed, capture_once

    _reads_bodies(True)
    step = gated_update(torch.randn(1 << 12, device="cuda"))
    x = _input()
    snapshot = capture_once(step, [x]).snapshot
    (holder,) = [node for node in snapshot.nodes if node.type == "conditional"]
    assert holder.condition == "if" and len(holder.bodies) == 1
    assert any(node.type == "kernel" for node in holder.bodies[0].nodes), holder.bodies[0].nodes
    ordering = capture_attributed(step, [x], snapshot)
    assert ordering is not None, "the attributed capture has the same nodes, bodies included"
    body_ops = [node.op for node in flatten(ordering).nodes if node.inside >= 0 and node.type == "kernel"]
    assert body_ops and all(body_ops), f"every body kernel is attributed to its operator: {body_ops}"
    report = sanitize_callable(step, x)
    assert [f.code for f in report.findings] == [], [f.message for f in report.findings]
    assert any(word.inside == holder.index for word in report.input_slots), "the body reads input 0"


@torch.inference_mode()
def test_a_host_value_baked_into_the_body_is_gl505() -> None:
    from graphlint.runtime_sanitizer.api import sanitize_callable

    _reads_bodies(True)
    report = sanitize_callable(gated_host_scale(), _input())
    baked = [f for f in report.findings if f.code == "GL505"]
    assert baked and "in the body of node" in baked[0].message, [f.message for f in report.findings]


@torch.inference_mode()
def test_a_body_the_driver_cannot_read_is_reported_never_passed_as_clean() -> None:
    from graphlint.runtime_sanitizer.api import sanitize_callable

    _reads_bodies(False)
    report = sanitize_callable(gated_host_scale(), _input())
    hazards = [f for f in report.findings if f.code != "GL508"]  # GL508: the pool's size, informational
    assert [f.code for f in hazards] == ["GL500"], [f.message for f in report.findings]
    assert "conditional node" in hazards[0].message and "not analysed" in hazards[0].message


@pytest.mark.parametrize("taken", [True, False])
@torch.inference_mode()
def test_the_launcher_never_re_points_around_a_body_and_equals_eager(taken: bool) -> None:
    from graphlint.launcher.launcher import ParameterizedLauncher

    step = gated_update(torch.randn(1 << 12, device="cuda"), taken)
    launcher = ParameterizedLauncher(step, (_input(),))
    if driver_reads_bodies():
        assert launcher.fallback_reason is None, launcher.fallback_reason
        assert "body of node" in launcher.pinned.get("input 0", ""), launcher.pinned
    else:
        assert "conditional node" in (launcher.fallback_reason or ""), launcher.fallback_reason
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a copying launcher says once why it copies
        for _ in range(3):
            x = _input()
            (out,) = launcher(x)
            assert torch.equal(out, step(x))
