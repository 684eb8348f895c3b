"""The runtime sanitizer on a real GPU (marker `cuda`; skipped with the reason elsewhere)."""

from __future__ import annotations

import random

import pytest

torch = pytest.importorskip("torch", reason="the runtime sanitizer needs torch")
pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device: the runtime sanitizer needs a GPU"),
]


def _api():
    pytest.importorskip("cuda.bindings", reason="cuda-bindings is not installed")
    from graphlint.runtime_sanitizer.api import sanitize_callable

    return sanitize_callable


def test_clean_mlp_reports_nothing_and_finds_its_input() -> None:
    sanitize_callable = _api()
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64)).cuda()
    x = torch.randn(8, 64, device="cuda")
    before = x.clone()
    report = sanitize_callable(model, x)
    assert report.findings == []
    assert report.input_slots, "the input pointer must be found in the first GEMM"
    assert all(w.region == "input0" for w in report.input_slots)
    assert torch.equal(x, before)  # the program's data is untouched


def test_host_value_baked_into_a_kernel_is_gl505() -> None:
    sanitize_callable = _api()

    def noisy(x):
        return x * random.random()

    report = sanitize_callable(noisy, torch.randn(1024, device="cuda"))
    assert [f.code for f in report.findings] == ["GL505"], report.findings


def test_graph_that_depends_on_python_state_is_gl501() -> None:
    sanitize_callable = _api()
    state = {"calls": 0}

    def unstable(x):
        state["calls"] += 1
        return x * 2 if state["calls"] % 2 else torch.relu(x) + x

    report = sanitize_callable(unstable, torch.randn(1024, device="cuda"), warmup=0)
    assert [f.code for f in report.findings] == ["GL501"], report.findings


def test_snapshot_has_every_node_type_of_a_copy_graph() -> None:
    pytest.importorskip("cuda.bindings", reason="cuda-bindings is not installed")
    from graphlint.runtime_sanitizer.capture import capture_once

    def copy_twice(x):
        out = torch.empty_like(x)
        out.copy_(x)
        return out + 1

    capture = capture_once(copy_twice, [torch.randn(4096, device="cuda")])
    types = {node.type for node in capture.snapshot.nodes}
    assert "memcpy" in types and "kernel" in types
    assert all(node.note == "" for node in capture.snapshot.nodes if node.type in ("kernel", "memcpy"))
