"""Graphs of Triton kernels through the runtime sanitizer on a real GPU (marker `cuda`).

torch.compile's kernels are launched from Python, outside ATen, and the guard used to refuse
every graph that held one (GL500): most users of CUDA graphs, who get theirs from
`mode="reduce-overhead"`, got no analysis at all. Now each Triton launch gives its nodes the
reads and writes of its signature, so such graphs are analysed: a compiled function captured
by hand, and torch.compile's own CUDA graph trees.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="the runtime sanitizer needs torch")
pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device: the runtime sanitizer needs a GPU"),
]

import side_stream_captures  # noqa: E402
from side_stream_captures import capture_side_write_then_read  # noqa: E402

from graphlint.runtime_sanitizer.analysis.postprocess import finish  # noqa: E402
from graphlint.runtime_sanitizer.guard.replay_guard import ReplayGuard  # noqa: E402


def _triple(a):
    return a * 3.0 + 1.0


def _add(x, b):
    return x + b


def _capture_compiled(join_first: bool):
    """Two compiled functions (Inductor's Triton kernels), compiled and warmed up first: the side
    stream's writes `x`, the main stream's reads it before (racy) or after (correct) the join."""
    triple, add = torch.compile(_triple), torch.compile(_add)
    warm = torch.randn(1 << 16, device="cuda")
    for _ in range(2):
        add(triple(warm), warm)
    torch.cuda.synchronize()
    y, a, b, _, guard, line = capture_side_write_then_read(triple, add, join_first)
    return y, a, b, guard, line, lambda a, b: add(triple(a), b)


def test_a_compiled_read_of_a_side_stream_write_before_the_join_is_gl504() -> None:
    _, _, _, guard, line, _ = _capture_compiled(join_first=False)
    findings = [f for f in finish(guard.findings) if not f.informational]
    assert guard.graphs.refused == [], guard.graphs.refused
    assert [f.code for f in findings] == ["GL504"], findings
    assert findings[0].path == side_stream_captures.__file__ and findings[0].line == line
    assert findings[0].message.count("triton triton_") == 2, findings[0].message


def test_a_compiled_capture_joined_before_the_read_is_analysed_and_reports_nothing() -> None:
    y, a, b, guard, _, compiled = _capture_compiled(join_first=True)
    assert guard.graphs.seen == 1 and guard.graphs.analysed == 1 and guard.graphs.refused == []
    assert finish(guard.findings) == [] or all(f.informational for f in finish(guard.findings)), guard.findings
    # the replay runs the very kernels the compiled functions launch eagerly: equal bit for bit
    # (eager ATen may differ in the last bits: Inductor fuses `a * 3.0 + 1.0` into one kernel)
    assert torch.equal(y, compiled(a, b))


def test_reduce_overhead_graphs_are_analysed_not_refused() -> None:
    torch._dynamo.reset()

    def step(x, w):
        return torch.relu(x @ w).sin() * 2 + x

    compiled = torch.compile(step, mode="reduce-overhead")
    w = torch.randn(256, 256, device="cuda")
    inputs = [torch.randn(64, 256, device="cuda") for _ in range(5)]
    with ReplayGuard() as guard:
        outs = [compiled(x, w).clone() for x in inputs]
    torch.cuda.synchronize()
    assert guard.graphs.seen >= 1, "torch.compile captured no graph under the guard"
    assert guard.graphs.refused == [], guard.graphs.refused
    assert guard.graphs.analysed == guard.graphs.seen
    assert [f.code for f in finish(guard.findings) if not f.informational] == []
    for x, out in zip(inputs, outs, strict=True):
        assert torch.allclose(out, step(x, w), atol=1e-4, rtol=1e-4)
