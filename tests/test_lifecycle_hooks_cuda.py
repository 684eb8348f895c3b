"""The guard on torch's lifecycle hooks, on a real GPU (marker `cuda`): no released torch has the
hooks yet, so they are stood in for (`hook_stand_ins`) by wrapping torch's own capture and replay
methods to call them where torch does. The capture is then read after it ended, from its live
graph, not from the capturing stream: the same GL504 and GL503 as through the patches."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="the replay guard needs torch")
pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device: sanitized replay needs a GPU"),
]

import side_stream_captures  # noqa: E402
from hook_stand_ins import fire_from_torch, stand_in_registrars  # noqa: E402
from side_stream_captures import capture_side_write_then_read  # noqa: E402

from graphlint.runtime_sanitizer.analysis.postprocess import finish  # noqa: E402
from graphlint.runtime_sanitizer.guard.replay_guard import ReplayGuard  # noqa: E402


@pytest.fixture
def hooked(monkeypatch: pytest.MonkeyPatch) -> None:
    fire_from_torch(torch, monkeypatch, stand_in_registrars(torch, monkeypatch))


def _side_write(a):
    x = torch.empty_like(a)
    torch.mul(a, 3.0, out=x)
    return x


@pytest.mark.usefixtures("hooked")
def test_a_hooked_capture_reading_a_side_stream_write_before_the_join_is_gl504() -> None:
    _, _, _, _, guard, line = capture_side_write_then_read(_side_write, lambda x, b: x + b, join_first=False)
    assert guard.hooked
    assert guard.graphs.analysed == 1 and guard.graphs.refused == [], guard.graphs.refused
    findings = [f for f in finish(guard.findings) if not f.informational]
    assert [f.code for f in findings] == ["GL504"], findings
    assert findings[0].path == side_stream_captures.__file__ and findings[0].line == line


@pytest.mark.usefixtures("hooked")
def test_a_hooked_capture_joined_first_reports_nothing_and_computes_eagerly() -> None:
    y, a, b, _, guard, _ = capture_side_write_then_read(_side_write, lambda x, b: x + b, join_first=True)
    assert guard.hooked and guard.graphs.refused == [], guard.graphs.refused
    assert finish(guard.findings) == [], guard.findings
    assert torch.equal(y, a * 3.0 + b) and guard.graphs.analysed == 1


@pytest.mark.usefixtures("hooked")
def test_hooked_replays_are_numbered_so_a_stale_view_is_gl503() -> None:
    model = torch.nn.Linear(16, 16).cuda()
    static_x = torch.randn(4, 16, device="cuda")
    with torch.no_grad(), ReplayGuard() as guard:
        model(static_x)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            static_out = model(static_x)
        g.replay()
        first_row = static_out[0]
        g.replay()
        _ = first_row * 2
    assert guard.hooked and guard.graphs.refused == [], guard.graphs.refused
    assert [f.code for f in guard.findings] == ["GL503"], guard.findings
