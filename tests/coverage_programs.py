"""Programs for the coverage report's GPU tests (`test_coverage_cuda.py`), each with the kernel
launches counted by hand. Usage: python coverage_programs.py NAME"""

from __future__ import annotations

import sys

import torch


def _twice_plus_one(t: torch.Tensor) -> torch.Tensor:
    return t * 2 + 1  # two elementwise kernels


def half_graphed() -> None:
    """Each of 10 steps replays a graph of 2 kernels and runs 2 kernels eagerly. By hand:
    graphed 10 x 2 = 20; eager 1 (the fill) + 3 x 2 (the warm-up) + 2 (torch's capture fills
    its RNG state: two int64 fills, seen in the trace without graphlint) + 10 x 2 = 29."""
    x = torch.full((1 << 20,), 1.0, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            _twice_plus_one(x)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = _twice_plus_one(x)
    for _ in range(10):
        graph.replay()
        out = y * 3 - 1  # the eager half of the step
    torch.cuda.synchronize()
    assert out[0].item() == 8.0


def _mutates_its_input(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    b.add_(1)  # an input mutated: torch.compile skips cudagraphs here
    return a * 2


def compiled_fallback() -> None:
    compiled = torch.compile(_mutates_its_input, mode="reduce-overhead")
    a, b = torch.ones(8, device="cuda"), torch.zeros(8, device="cuda")
    for _ in range(3):
        compiled(a, b)
    torch.cuda.synchronize()
    assert b[0].item() == 3.0


def own_profiler() -> None:
    """The program profiles itself: its profiler must see its kernels as without graphlint."""
    x = torch.ones(1024, device="cuda")
    _twice_plus_one(x)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as profiler:
        _twice_plus_one(x)
        torch.cuda.synchronize()
    kernels = [e for e in profiler.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    print(f"own profiler saw {len(kernels)} kernels")
    assert kernels


if __name__ == "__main__":
    {"half_graphed": half_graphed, "compiled_fallback": compiled_fallback, "own_profiler": own_profiler}[sys.argv[1]]()
