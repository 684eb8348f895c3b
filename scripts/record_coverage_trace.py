"""Record, on a GPU, the profiler records the coverage report reads (issue #33), for the CPU
tests: the program of `tests/coverage_programs.py::half_graphed` (counted by hand: 20 kernel
launches from graphs, 29 eager), then a comparison standing for the sanitizer's own work, inside
a host-time window the trace keeps under torch's profiler with CUDA activity only, as the guard
runs it. Kept: kernels and the host calls that launched them, with their correlation ids.
A second trace profiles replays of a graph captured before the profiler started.

    python3 scripts/record_coverage_trace.py OUTDIR
"""

from __future__ import annotations

import json
import platform
import sys
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from coverage_programs import _twice_plus_one, half_graphed

KEPT = {"kernel", "cuda_runtime", "cuda_driver"}


def _compact(profiler) -> tuple[list[dict], int]:
    path = Path("/tmp/graphlint-trace.json")
    profiler.export_chrome_trace(str(path))
    data = json.loads(path.read_text())
    events = [
        {
            "cat": e["cat"],
            "name": e["name"],
            "ts": e.get("ts", 0),
            "dur": e.get("dur", 0),
            "args": {"correlation": (e.get("args") or {}).get("correlation")},
        }
        for e in data["traceEvents"]
        if e.get("cat") in KEPT
    ]
    return events, int(data.get("baseTimeNanoseconds", 0))


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    provenance = {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "script": "scripts/record_coverage_trace.py",
    }
    with profile(activities=[ProfilerActivity.CUDA]) as profiler:
        half_graphed()
        x = torch.ones(16, device="cuda")  # one more eager kernel, outside the window
        torch.cuda.synchronize()
        start = time.time_ns()
        torch.equal(x, x + 1)  # the add, the comparison and its reduction: kernels of the kind the guard runs
        window = [start, time.time_ns()]
    early, base = _compact(profiler)
    record = {**provenance, "base_ns": base, "own_work": [window], "events": early}
    (out / "half_graphed_trace.json").write_text(json.dumps(record, indent=0))
    x = torch.ones(1 << 10, device="cuda")
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        _twice_plus_one(x)
    with profile(activities=[ProfilerActivity.CUDA]) as profiler:
        for _ in range(4):
            graph.replay()
        torch.cuda.synchronize()
    late, base = _compact(profiler)
    record = {**provenance, "base_ns": base, "events": late}
    (out / "captured_before_profiling_trace.json").write_text(json.dumps(record, indent=0))
    names = sorted({(e["cat"], e["name"][:60]) for e in early + late})
    print(json.dumps(provenance), names, sep="\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
