"""Generated worst cases of `graphlint check`: costs that must grow linearly with their input.

Each case is generated at sizes n, 2n, 4n and checked in process (no cache, one job); the
report is the time at each size and the ratio of each time to the previous one. Linear cost
doubles (ratio about 2), quadratic cost quadruples (about 4). It prints ratios rather than
asserting a time, so it is a measurement to read, not a test to flake:

    python benchmarks/worst_cases.py [--base N] [--json out.json]

- ``call-depth``: a capture calls f0, f0 calls f1, ... f(n-1) does `.item()` (each function
  reached held its whole call path: quadratic in the depth);
- ``stream-blocks``: one captured function with n `with torch.cuda.stream(side):` blocks, each
  forked and joined (GL109 walked the function once per block: quadratic in the blocks);
- ``decided-branches``: a captured call passes a constant to a function with n branches on it,
  each calling a helper (each call was checked against every branch: quadratic in the branches);
- ``stacked-decorators``: a captured function under n stacked project decorators, values
  followed (each level read the one below twice: exponential in the stack; ColossalAI's tests
  stack a dozen, and the value flow took minutes there).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from graphlint.config import ConfigResolver
from graphlint.engine import CheckOptions, check

HEADER = 'import torch\n\ng = torch.cuda.CUDAGraph()\nx = torch.zeros(4, device="cuda")\n'


def call_depth(n: int) -> str:
    functions = "".join(f"def f{i}(t):\n    return f{i + 1}(t)\n\n\n" for i in range(n - 1))
    last = f"def f{n - 1}(t):\n    return t.sum().item()\n\n\n"
    return HEADER + "\n\n" + functions + last + "with torch.cuda.graph(g):\n    f0(x)\n"


def stream_blocks(n: int) -> str:
    block = (
        "        side.wait_stream(torch.cuda.current_stream())\n"
        "        with torch.cuda.stream(side):\n"
        "            y = x * 2\n"
        "        torch.cuda.current_stream().wait_stream(side)\n"
    )
    return HEADER + "\n\ndef step(side):\n    with torch.cuda.graph(g):\n" + block * n


def decided_branches(n: int) -> str:
    helper = "def helper(t):\n    return t.sum().item()\n\n\n"
    branches = "".join(f"    if mode == {i}:\n        helper(t)\n" for i in range(n))
    step = f"def step(t, mode):\n{branches}    return t\n\n\n"
    return HEADER + "\n\n" + helper + step + f"with torch.cuda.graph(g):\n    step(x, {n - 1})\n"


def stacked_decorators(n: int) -> str:
    stack = "".join(f"@keep({i})\n" for i in range(n))
    return (
        HEADER
        + "\n\ndef keep(tag):\n    def wrap(f):\n        return f\n\n    return wrap\n\n\n"
        + stack
        + "def step(t):\n    return t.sum().item()\n\n\nwith torch.cuda.graph(g):\n    step(x)\n"
    )


CASES: dict[str, tuple[Callable[[int], str], str]] = {
    "call-depth": (call_depth, "GL101"),
    "stream-blocks": (stream_blocks, "GL109"),
    "decided-branches": (decided_branches, "GL101"),
    "stacked-decorators": (stacked_decorators, "GL101"),
}
# Cases that exercise the value flow, so they are checked with values followed.
FOLLOW_VALUES = frozenset({"stacked-decorators"})


def seconds(source: str, follow_values: bool = False) -> float:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        (root / "case.py").write_text(source)
        start = time.perf_counter()
        options = CheckOptions(jobs=1, cache_dir=None, follow_values=follow_values)
        check([str(root)], ConfigResolver(cwd=root), options)
        return time.perf_counter() - start


def measure(base: int) -> dict[str, list[dict[str, float]]]:
    results: dict[str, list[dict[str, float]]] = {}
    for name, (generate, _) in CASES.items():
        rows: list[dict[str, float]] = []
        for size in (base, 2 * base, 4 * base):
            took = seconds(generate(size), name in FOLLOW_VALUES)
            ratio = took / rows[-1]["seconds"] if rows else float("nan")
            rows.append({"size": size, "seconds": round(took, 3), "ratio": round(ratio, 2)})
            print(f"{name:14} n={size:6d} {took:8.2f} s  x{ratio:.2f} of the previous size", flush=True)
        results[name] = rows
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=int, default=500, help="the smallest size (default 500)")
    parser.add_argument("--json", help="also write the measurements here")
    args = parser.parse_args()
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 20_000))
    results = measure(args.base)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
