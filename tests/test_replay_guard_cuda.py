"""Sanitized replay on a real GPU: GL503 stale reads and GL506 unchanged inputs (marker `cuda`)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="the replay guard needs torch")
pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device: sanitized replay needs a GPU"),
]

from graphlint.runtime_sanitizer.guard.replay_guard import ReplayGuard  # noqa: E402


def _captured(model, static_x):
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        model(static_x)
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        static_out = model(static_x)
    return g, static_out


def test_stale_view_of_a_plain_graph_output_is_gl503_and_a_clone_is_not() -> None:
    model = torch.nn.Linear(16, 16).cuda()
    static_x = torch.randn(4, 16, device="cuda")
    with torch.no_grad(), ReplayGuard() as guard:
        g, static_out = _captured(model, static_x)
        static_x.copy_(torch.randn(4, 16, device="cuda"))
        g.replay()
        first_row = static_out[0]  # a handle of replay 1
        kept = static_out.clone()  # a copy: safe
        static_x.copy_(torch.randn(4, 16, device="cuda"))
        g.replay()
        _ = kept * 2
        _ = first_row * 2  # read after replay 2
    codes = [f.code for f in guard.findings]
    assert codes == ["GL503"], guard.findings
    assert guard.findings[0].path.endswith("test_replay_guard_cuda.py")


def test_graphed_callable_outputs_kept_across_calls_are_gl503() -> None:
    model = torch.nn.Linear(16, 16).cuda()
    sample = torch.randn(4, 16, device="cuda", requires_grad=True)
    with ReplayGuard() as guard:
        graphed = torch.cuda.make_graphed_callables(model, (sample,))
        a = graphed(torch.randn(4, 16, device="cuda", requires_grad=True))
        b = graphed(torch.randn(4, 16, device="cuda", requires_grad=True))
        (a - b).sum()
    assert "GL503" in [f.code for f in guard.findings], guard.findings


def test_replays_on_unchanged_inputs_are_gl506_and_updated_ones_are_not() -> None:
    model = torch.nn.Linear(16, 16).cuda()
    static_x = torch.randn(4, 16, device="cuda")
    with torch.no_grad(), ReplayGuard() as stale:
        g, _static_out = _captured(model, static_x)
        for batch in [torch.randn(4, 16, device="cuda") for _ in range(3)]:
            static_x_rebound = batch  # noqa: F841 - the bug: rebinding instead of copy_
            g.replay()
    assert [f.code for f in stale.findings] == ["GL506"], stale.findings
    with torch.no_grad(), ReplayGuard() as clean:
        g2, out2 = _captured(model, static_x)
        for batch in [torch.randn(4, 16, device="cuda") for _ in range(3)]:
            static_x.copy_(batch)
            g2.replay()
            _ = out2.sum()
    assert clean.findings == [], clean.findings


def test_a_graph_that_updates_its_own_inputs_is_not_gl506() -> None:
    """A captured update step (parameters written in place by the graph itself) computes
    something new on every replay, though no eager op bumps its inputs' versions."""
    weight = torch.randn(16, 16, device="cuda")
    static_x = torch.randn(4, 16, device="cuda")

    def step(x):
        grad = (x @ weight).t() @ x / 4
        weight.sub_(0.01 * grad)  # the graph writes one of its own inputs
        return weight.norm()

    with torch.no_grad(), ReplayGuard() as guard:
        g, norm = _captured(step, static_x)
        seen = []
        for _ in range(4):
            g.replay()
            seen.append(norm.item())
    assert len(set(seen)) == 4, "each replay really computes something new"
    assert [f.code for f in guard.findings] == [], guard.findings


def test_uninstall_restores_torch() -> None:
    original = torch.cuda.CUDAGraph.replay
    with ReplayGuard():
        assert torch.cuda.CUDAGraph.replay is not original
    assert torch.cuda.CUDAGraph.replay is original


def _replayed_and_kept(model, keep):
    """Three replays on new inputs, keeping `keep(static_out)` after each; the guard's findings."""
    static_x = torch.randn(4, 16, device="cuda")
    kept = []
    with torch.no_grad(), ReplayGuard() as guard:
        g, static_out = _captured(model, static_x)
        for _ in range(3):
            static_x.copy_(torch.randn(4, 16, device="cuda"))
            g.replay()
            kept.append(keep(static_out))
        _ = torch.stack(kept).sum()  # read after the loop
    return guard.findings


def test_the_static_output_itself_kept_across_replays_is_gl503_naming_the_container() -> None:
    model = torch.nn.Linear(16, 16).cuda()
    findings = _replayed_and_kept(model, lambda out: out)
    assert [f.code for f in findings] == ["GL503"], findings
    message = findings[0].message
    assert "static output of the graph captured at" in message and "test_replay_guard_cuda.py" in message
    assert "kept 2 times in one list" in message and ".clone()" in message
    assert findings[0].path.endswith("test_replay_guard_cuda.py")


def test_clones_of_the_static_output_kept_across_replays_are_not_gl503() -> None:
    model = torch.nn.Linear(16, 16).cuda()
    assert _replayed_and_kept(model, lambda out: out.clone()) == []


def test_a_static_input_refilled_in_place_and_read_after_each_replay_is_not_gl503() -> None:
    # The shape of PyTorch's RNG graph tests: the graph fills a tensor made before the capture;
    # the program refills it with copy_() before each replay and reads it after: always current.
    target = torch.zeros(1000, device="cuda")
    start = torch.ones(1000, device="cuda")
    with torch.no_grad(), ReplayGuard() as guard:
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            target.mul_(3)
        for _ in range(3):
            target.copy_(start)
            g.replay()
            assert torch.equal(target, start * 3)
    assert not {"GL503", "GL506"} & {f.code for f in guard.findings}, guard.findings


def test_a_graph_that_draws_random_numbers_is_not_gl506_on_unchanged_inputs() -> None:
    # Each replay advances the generator's offset: the same inputs give new numbers.
    static_x = torch.ones(1000, device="cuda")
    with torch.no_grad(), ReplayGuard() as guard:
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            noisy = static_x * torch.rand(1000, device="cuda")
        draws = []
        for _ in range(4):
            g.replay()
            draws.append(noisy.clone())
    assert not torch.equal(draws[0], draws[1])
    assert "GL506" not in [f.code for f in guard.findings], guard.findings


def _capture_with_temporaries() -> int:
    """The peak bytes a capture allocates when its temporaries die inside it: their blocks are
    reused within it, unless something holds them."""
    x = torch.ones(1 << 18, device="cuda")
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = x
        for _ in range(6):
            y = y.clone() + 1  # each step's input dies as the next is made
    peak = torch.cuda.max_memory_allocated() - before
    del g, y
    return peak


def test_the_guard_does_not_keep_a_capture_s_temporaries_alive() -> None:
    # Holding them would make the capture use more memory and move later addresses: PyTorch's
    # memory-statistics and pool-sharing tests observe exactly that.
    plain_peak = _capture_with_temporaries()
    with torch.no_grad(), ReplayGuard():
        watched_peak = _capture_with_temporaries()
    assert watched_peak == plain_peak


def test_a_graph_s_state_dies_with_the_graph() -> None:
    with torch.no_grad(), ReplayGuard() as guard:
        static_x = torch.ones(16, device="cuda")
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            _ = static_x * 2
        assert len(guard._graphs) == 1
        del g
        assert guard._graphs == {}


def test_an_lstm_with_dropout_is_not_gl504_inside_its_own_cudnn_call() -> None:
    # cuDNN runs the layers of one RNN call on internal streams; each of its kernels carries the
    # whole call's accesses, so pairs inside the call are the library's business, not a race.
    # PyTorch's test_graph_cudnn_dropout's sizes: 34,573 such pairs were reported before.
    model = torch.nn.LSTM(512, 512, 2, dropout=0.5).cuda()
    x = torch.ones(100, 192, 512, device="cuda")
    model(x)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with ReplayGuard() as guard, torch.cuda.stream(side):
        g = torch.cuda.CUDAGraph()
        g.capture_begin()
        model(x)
        g.capture_end()
    torch.cuda.current_stream().wait_stream(side)
    assert guard.graphs.analysed == 1, guard.graphs.refused  # judged, not refused
    assert "GL504" not in [f.code for f in guard.findings], guard.findings[:3]
