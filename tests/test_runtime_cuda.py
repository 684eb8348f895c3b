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
    assert [f.code for f in report.findings] == ["GL508"], report.findings  # informational only
    assert "MiB in its private pool" in report.findings[0].message
    assert report.input_slots, "the input pointer must be found in the first GEMM"
    assert all(w.region == "input0" for w in report.input_slots)
    assert torch.equal(x, before)  # the program's data is untouched


def test_host_value_baked_into_a_kernel_is_gl505() -> None:
    sanitize_callable = _api()

    def noisy(x):
        return x * random.random()

    report = sanitize_callable(noisy, torch.randn(1024, device="cuda"))
    assert [f.code for f in report.findings if f.code != "GL508"] == ["GL505"], report.findings


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
    from graphlint.runtime_sanitizer.capture.two_captures import capture_once

    def copy_twice(x):
        out = torch.empty_like(x)
        out.copy_(x)
        return out + 1

    capture = capture_once(copy_twice, [torch.randn(4096, device="cuda")])
    types = {node.type for node in capture.snapshot.nodes}
    assert "memcpy" in types and "kernel" in types
    assert all(node.note == "" for node in capture.snapshot.nodes if node.type in ("kernel", "memcpy"))


def _race(join_first: bool):
    side = torch.cuda.Stream()

    def program(a, b):
        x = torch.empty_like(a)
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            torch.mul(a, 3.0, out=x)
        if join_first:
            torch.cuda.current_stream().wait_stream(side)
        y = x + b
        if not join_first:
            torch.cuda.current_stream().wait_stream(side)
        return y

    return program


def test_side_stream_write_read_before_the_join_is_gl504() -> None:
    sanitize_callable = _api()
    a, b = torch.randn(1 << 16, device="cuda"), torch.randn(1 << 16, device="cuda")
    racy = sanitize_callable(_race(join_first=False), a, b)
    assert [f.code for f in racy.findings if f.code != "GL508"] == ["GL504"], racy.findings
    joined = sanitize_callable(_race(join_first=True), a, b)
    assert [f.code for f in joined.findings if f.code != "GL508"] == [], joined.findings


def test_vectorized_kernel_requires_its_alignment_gl502() -> None:
    sanitize_callable = _api()
    base = torch.randn((1 << 20) + 4, device="cuda")
    aligned = base[: 1 << 20]
    report = sanitize_callable(lambda t: t * 2 + 1, aligned)
    assert report.alignment[0] >= 16, report.alignment
    misaligned = base[1 : (1 << 20) + 1]
    assert [f.code for f in report.check_launch([misaligned.data_ptr()])] == ["GL502"]
    assert report.check_launch([aligned.data_ptr()]) == []


def test_compiled_function_keeps_its_triton_kernel() -> None:
    sanitize_callable = _api()
    compiled = torch.compile(lambda t: torch.sin(t) * 3 + t)
    x = torch.randn(1 << 16, device="cuda")
    compiled(x)
    report = sanitize_callable(compiled, x)
    assert [f.code for f in report.findings] == ["GL508"], report.findings
    assert report.input_slots
