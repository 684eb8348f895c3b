"""Overhead of sanitized replay (needs CUDA): per replay step, and for a whole test suite.

python benchmarks/sanitizer_overhead.py
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

import torch

from graphlint.runtime_sanitizer.guard.replay_guard import ReplayGuard


def replay_step_us(guarded: bool, steps: int = 2000) -> float:
    model = torch.nn.Linear(256, 256).cuda()
    static_x = torch.randn(64, 256, device="cuda")
    guard = ReplayGuard().install() if guarded else None
    try:
        with torch.no_grad():
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                model(static_x)
            torch.cuda.current_stream().wait_stream(side)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                out = model(static_x)
            batches = [torch.randn_like(static_x) for _ in range(8)]
            samples = []
            for i in range(steps):
                start = time.perf_counter()
                static_x.copy_(batches[i % 8])  # a typical step: copy in, replay, reduce the output
                g.replay()
                out.sum()
                samples.append(time.perf_counter() - start)
            torch.cuda.synchronize()
    finally:
        if guard is not None:
            guard.uninstall()
    return statistics.median(samples[100:]) * 1e6


def suite_seconds(flag: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-m",
            "cuda",
            "tests/test_launcher_cuda.py",
            "tests/test_replay_guard_cuda.py",
            *flag,
        ],
        check=False,
        capture_output=True,
    )
    return time.perf_counter() - start


def main() -> int:
    plain, guarded = replay_step_us(False), replay_step_us(True)
    print(
        f"copy_ + replay + sum, median CPU per step: {plain:.1f} us plain, {guarded:.1f} us sanitized "
        f"(+{guarded - plain:.1f} us)"
    )
    off, on = suite_seconds([]), suite_seconds(["--graphlint-sanitize"])
    print(f"graph-using test suite: {off:.1f} s without, {on:.1f} s with --graphlint-sanitize")
    return 0


if __name__ == "__main__":
    sys.exit(main())
