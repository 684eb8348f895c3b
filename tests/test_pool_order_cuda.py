"""GL510 on a real GPU (marker `cuda`): graphs sharing a memory pool, replayed out of capture
order or at once on two unordered streams, in the shape of PyTorch's own
`test_graph_three_successive` and `test_graph_concurrent_replay`; their ordered twins and
the same programs with one pool per graph report nothing."""

from __future__ import annotations

import gc

import pytest

torch = pytest.importorskip("torch", reason="the runtime sanitizer needs torch")
pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device: the runtime sanitizer needs a GPU"),
]

from graphlint.runtime_sanitizer.analysis.postprocess import finish  # noqa: E402
from graphlint.runtime_sanitizer.guard.replay_guard import ReplayGuard  # noqa: E402

SIZE = 1 << 16


@pytest.fixture(autouse=True)
def _settled():
    """Each test's graphs and pools are gone, and the device idle, before the next test runs."""
    yield
    gc.collect()
    torch.cuda.synchronize()


def _successive(order: tuple[int, int, int], share: str, raw: bool):
    """Three graphs: g0 makes c and d, g1 reads c (which then dies), g2 reads d and may get c's
    block. Returns (sum of e, sum of f) after replaying in ``order``, and the GL510 findings."""
    with ReplayGuard() as guard:
        a = torch.ones(SIZE, device="cuda")
        graphs = [torch.cuda.CUDAGraph() for _ in range(3)]
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        holder = {}
        with torch.cuda.stream(side):
            pool = () if share == "none" else (torch.cuda.graph_pool_handle(),)

            def capture(index, work):
                args = pool if share != "pool()" or index == 0 else (graphs[0].pool(),)
                if raw:
                    graphs[index].capture_begin(*args)
                    work()
                    graphs[index].capture_end()
                else:
                    with torch.cuda.graph(graphs[index], pool=args[0] if args else None, stream=side):
                        work()

            def first():
                b = a.clone()
                holder["c"], holder["d"] = b + 1, b + 2

            def second():
                holder["e"] = holder["c"] + 3
                del holder["c"]

            def third():
                holder["f"] = holder["d"] + 4

            capture(0, first)
            capture(1, second)
            capture(2, third)
        torch.cuda.current_stream().wait_stream(side)
        for index in (0, 1, 2):
            graphs[index].replay()
        for index in order:
            graphs[index].replay()
        torch.cuda.synchronize()
        sums = (holder["e"].sum().item(), holder["f"].sum().item())
    return sums, [f for f in finish(guard.findings) if f.code == "GL510"]


@pytest.mark.parametrize("raw", [True, False], ids=["capture_begin", "torch.cuda.graph"])
@pytest.mark.parametrize("share", ["handle", "pool()"])
def test_out_of_capture_order_on_a_shared_pool_is_gl510_and_corrupts(share: str, raw: bool) -> None:
    (e, f), found = _successive((0, 2, 1), share, raw)
    assert e == SIZE * 10 and f == SIZE * 7, (e, f)  # g1 read g2's f, as PyTorch's test shows
    assert len(found) == 1, found
    assert "share" in found[0].message and "capture order" in found[0].message, found[0].message


@pytest.mark.parametrize("raw", [True, False], ids=["capture_begin", "torch.cuda.graph"])
def test_capture_order_and_private_pools_report_nothing(raw: bool) -> None:
    (e, f), found = _successive((0, 1, 2), "handle", raw)
    assert (e, f) == (SIZE * 5, SIZE * 7) and found == [], found
    (e, f), found = _successive((0, 2, 1), "none", raw)
    assert (e, f) == (SIZE * 5, SIZE * 7) and found == [], found


def _with_temporaries(x):
    y = x * 2
    z = y + 1
    return (z * 3).sin() + x


def _concurrent(ordered: bool, share: bool):
    """Two graphs whose temporaries share pool memory, replayed on two streams."""
    with ReplayGuard() as guard:
        a = torch.ones(SIZE, device="cuda")
        g0, g1 = torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()
        pool = torch.cuda.graph_pool_handle() if share else None
        with torch.cuda.graph(g0, pool=pool):
            b = a.clone()
            for _ in range(5):
                b = _with_temporaries(b)
        with torch.cuda.graph(g1, pool=pool):
            c = a.clone()
            for _ in range(5):
                c = _with_temporaries(c)
        s0, s1 = torch.cuda.Stream(), torch.cuda.Stream()
        torch.cuda.synchronize()
        with torch.cuda.stream(s0):
            torch.cuda._sleep(1_000_000)
            s1.wait_stream(s0)
            g0.replay()
        with torch.cuda.stream(s1):
            if ordered:
                s1.wait_stream(s0)
            g1.replay()
        torch.cuda.current_stream().wait_stream(s0)
        torch.cuda.current_stream().wait_stream(s1)
        torch.cuda.synchronize()
    return [f for f in finish(guard.findings) if f.code == "GL510"]


def test_pool_mates_replayed_at_once_on_two_streams_are_gl510() -> None:
    found = _concurrent(ordered=False, share=True)
    assert len(found) == 1 and "another stream" in found[0].message, found


def test_ordered_streams_and_private_pools_report_nothing() -> None:
    assert _concurrent(ordered=True, share=True) == []
    assert _concurrent(ordered=False, share=False) == []
