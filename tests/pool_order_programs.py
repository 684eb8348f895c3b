"""The GL510 programs of tests/test_pool_order_cuda.py, run in a process of their own: graphs
sharing a pool that are replayed out of order leave state behind that broke a later test's
capture in the same process (see that file). Prints a JSON line: the sums and GL510 messages."""

from __future__ import annotations

import json
import sys

import torch

from graphlint.runtime_sanitizer.analysis.postprocess import finish
from graphlint.runtime_sanitizer.guard.replay_guard import ReplayGuard

SIZE = 1 << 16


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


if __name__ == "__main__":
    kind, *args = sys.argv[1:]
    if kind == "successive":
        order, share, raw = tuple(int(c) for c in args[0]), args[1], args[2] == "raw"
        sums, found = _successive(order, share, raw)  # type: ignore[arg-type]
    else:
        sums, found = None, _concurrent(args[0] == "ordered", args[1] == "share")
    print(json.dumps({"sums": sums, "messages": [f.message for f in found]}))
