"""A plain capture whose side stream writes what the main stream then reads, before or after
joining it: the GL504 program that the `cuda` tests run with ATen operators
(test_sanitize_training_cuda.py) and with compiled Triton kernels (test_triton_graphs_cuda.py)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any


def capture_side_write_then_read(write: Callable, read: Callable, join_first: bool) -> tuple[Any, ...]:
    """Under the guard, capture `x = write(a)` on a side stream and `y = read(x, b)` on the main
    one, joined before the read or only after it; replay once. Returns (y, a, b, x, the guard,
    the capture's line)."""
    import torch

    from graphlint.runtime_sanitizer.guard.replay_guard import ReplayGuard

    a, b = torch.randn(1 << 16, device="cuda"), torch.randn(1 << 16, device="cuda")
    side = torch.cuda.Stream()
    g = torch.cuda.CUDAGraph()
    with ReplayGuard() as guard:
        with torch.cuda.graph(g):
            capture_line = sys._getframe().f_lineno - 1
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                x = write(a)
            if join_first:
                torch.cuda.current_stream().wait_stream(side)
            y = read(x, b)
            torch.cuda.current_stream().wait_stream(side)
        g.replay()
        torch.cuda.synchronize()
    return y, a, b, x, guard, capture_line
