"""The coverage report (issue #33): the share of GPU work that ran from graphs, worked out from
profiler records without torch, and what `graphlint sanitize` does with it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from graphlint.runtime_sanitizer.analysis.coverage import Coverage, compile_fallback, from_trace_events
from graphlint.runtime_sanitizer.analysis.graph_counts import GraphCounts

RECORDED = Path(__file__).resolve().parent.parent / "fixtures" / "snapshots" / "coverage"


def _launch(name: str, correlation: int) -> dict:
    return {
        "ph": "X",
        "cat": "cuda_runtime",
        "name": name,
        "ts": correlation,
        "dur": 2,
        "args": {"correlation": correlation},
    }


def _kernel(name: str, correlation: int, dur: float) -> dict:
    return {
        "ph": "X",
        "cat": "kernel",
        "name": name,
        "ts": correlation,
        "dur": dur,
        "args": {"correlation": correlation},
    }


def _half_graphed_step() -> list[dict]:
    """One step: a graph of three kernels replayed twice, and two eager kernels after each."""
    events: list[dict] = []
    correlation = 100
    for _ in range(2):
        correlation += 1
        events.append(_launch("cudaGraphLaunch", correlation))
        events += [_kernel(k, correlation, 10.0) for k in ("gemm", "relu", "reduce")]
        for name, dur in (("softmax", 5.0), ("sample", 25.0)):
            correlation += 1
            events += [_launch("cudaLaunchKernel", correlation), _kernel(name, correlation, dur)]
    events.append({"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoH", "dur": 50, "args": {"correlation": 1}})
    events.append({"ph": "i", "cat": "cpu_op", "name": "aten::mm"})  # not a kernel: not counted
    return events


def test_kernels_launched_by_a_graph_launch_count_as_graphed_and_the_rest_as_eager():
    coverage = from_trace_events(_half_graphed_step())
    assert (coverage.graphed_launches, coverage.eager_launches) == (6, 4)  # counted by hand above
    assert coverage.launch_share() == pytest.approx(60.0)
    assert (coverage.graphed_us, coverage.eager_us) == (60.0, 60.0)
    assert coverage.time_share() == pytest.approx(50.0)
    assert [name for name, _ in coverage.top_eager()] == ["sample", "softmax"]  # most GPU time first
    assert coverage.eager_kernels["sample"] == [2, 50.0]


def test_a_trace_recorded_on_the_gpu_gives_the_counts_made_by_hand():
    recorded = json.loads((RECORDED / "half_graphed_trace.json").read_text())
    assert recorded["device"] == "NVIDIA H200" and recorded["torch"].startswith("2.11")
    coverage = from_trace_events(recorded["events"], recorded["own_work"], recorded["base_ns"])
    # 20 from graphs; 29 eager by hand, and one more fill outside the window; the comparison's 3 apart
    assert (coverage.graphed_launches, coverage.eager_launches, coverage.own_launches) == (20, 30, 3)
    unwindowed = from_trace_events(recorded["events"])  # without the window they count as the program's
    assert (unwindowed.eager_launches, unwindowed.own_launches) == (33, 0)
    late = json.loads((RECORDED / "captured_before_profiling_trace.json").read_text())
    replays = from_trace_events(late["events"], (), late["base_ns"])
    assert (replays.graphed_launches, replays.eager_launches) == (8, 0)  # captured before, replayed after


def test_driver_graph_launches_and_suffixed_names_are_graph_launches_and_look_alikes_are_not():
    events = [
        {**_launch("cuGraphLaunch_ptsz", 1), "cat": "cuda_driver"},
        _kernel("a", 1, 1.0),
        _launch("cudaGraphLaunchFake", 2),  # another call that only starts like one
        _kernel("b", 2, 1.0),
        _launch("cudaGraphInstantiate", 3),
        _kernel("c", 3, 1.0),
    ]
    coverage = from_trace_events(events)
    assert (coverage.graphed_launches, coverage.eager_launches) == (1, 2)


def test_a_run_with_no_records_has_no_share_and_fails_any_requirement():
    unmeasured = Coverage(limits=["a profiler was already running when the sanitizer started: not measured"])
    assert unmeasured.launch_share() is None and unmeasured.below(0)
    assert "coverage: not measured" in unmeasured.summary() and "already running" in unmeasured.summary()
    idle = from_trace_events([])
    assert idle.measured and idle.launch_share() is None and "no kernel ran" in idle.summary()
    measured = from_trace_events(_half_graphed_step())
    assert measured.below(60.5) and not measured.below(60.0)


def test_the_summary_gives_both_shares_the_costliest_eager_kernels_and_each_fallback():
    coverage = from_trace_events(_half_graphed_step())
    coverage.fallbacks.append(compile_fallback("skipping cudagraphs due to mutated inputs (1 instances)"))
    text = coverage.summary()
    assert text.splitlines()[0] == (
        "coverage: 60.0% of kernel launches ran from graphs (6 of 10), 50.0% of kernel GPU time (0.06 ms of 0.12 ms)"
    )
    assert "  eager: sample: 2 launches, 50 us" in text
    assert "  fell back: skipping cudagraphs due to mutated inputs (1 instances)" in text


def test_a_compile_fallback_is_located_at_the_innermost_frame_its_message_quotes():
    message = (
        "skipping cudagraphs due to mutated inputs (1 instances). Found from : \n"
        '   File "/work/train.py", line 40, in <module>\n'
        "    loss = step(batch)\n"
        '   File "/work/model.py", line 12, in step\n'
        "    buf.add_(1)\n"
    )
    fallback = compile_fallback(message)
    assert fallback.where == "/work/model.py:12"
    assert fallback.reason == "skipping cudagraphs due to mutated inputs (1 instances)"
    assert compile_fallback("skipping cudagraphs due to cpu device (x)").where == ""


def test_coverage_travels_with_the_graph_counts_and_sums_over_tests():
    first = GraphCounts(seen=1, analysed=1, coverage=from_trace_events(_half_graphed_step()))
    first.coverage.fallbacks.append(compile_fallback("skipping cudagraphs due to cpu device (arg1)"))
    again = GraphCounts.from_dict(first.to_dict())
    assert again == first
    total = GraphCounts()
    total.add(again)
    total.add(GraphCounts.from_dict(first.to_dict()))
    assert total.coverage is not None and total.coverage.graphed_launches == 12
    assert total.coverage.eager_kernels["sample"] == [4, 100.0]
    assert len(total.coverage.fallbacks) == 1  # the same fallback from two tests is listed once
    assert "coverage" not in GraphCounts(seen=1).to_dict() and "coverage" not in GraphCounts(seen=1).summary()


def _sanitize(*arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "graphlint", "sanitize", *arguments],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_cli_turns_coverage_on_by_default_and_off_with_no_coverage():
    code = "import os; print(os.environ.get('GRAPHLINT_SANITIZE_COVERAGE'))"
    assert _sanitize("--", "python", "-c", code).stdout.strip() == "1"
    assert _sanitize("--no-coverage", "--", "python", "-c", code).stdout.strip() == "0"


@pytest.mark.parametrize("value", ["abc", "101", "-1"])
def test_require_graphed_takes_a_percentage(value: str):
    done = _sanitize("--require-graphed", value, "--", "python", "-c", "pass")
    assert done.returncode == 2 and "--require-graphed" in done.stderr


def test_require_graphed_needs_coverage_and_fails_a_run_with_no_share():
    done = _sanitize("--require-graphed", "50", "--no-coverage", "--", "python", "-c", "pass")
    assert done.returncode == 2 and "drop --no-coverage" in done.stderr
    # No torch, no GPU: nothing measured, so a requirement cannot be met
    done = _sanitize("--require-graphed", "0", "--", "python", "-c", "pass")
    assert done.returncode == 1 and "--require-graphed 0: no share was measured" in done.stderr


def test_the_summary_report_is_json_that_says_whether_the_sanitizer_ran(tmp_path):
    report = tmp_path / "out" / "summary.json"
    done = _sanitize("--summary-report", str(report), "--", "python", "-c", "raise SystemExit(3)")
    assert done.returncode == 3  # the program's own status, unchanged
    summary = json.loads(report.read_text())
    assert summary["status"] == 3 and summary["inactive"] == "the program did not import torch"
    assert summary["seen"] == 0 and "coverage" not in summary
