"""The coverage report on a real GPU (marker `cuda`), run as a user runs it: `graphlint sanitize
--summary-report` over programs whose kernel launches are counted by hand
(`coverage_programs.py`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="the runtime sanitizer needs torch")
pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device: the runtime sanitizer needs a GPU"),
]

PROGRAM = Path(__file__).with_name("coverage_programs.py")
ROOT = Path(__file__).resolve().parent.parent


def _sanitized(tmp_path: Path, name: str, *flags: str) -> tuple[subprocess.CompletedProcess, dict]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    summary = tmp_path / f"{name}.json"
    command = [sys.executable, "-m", "graphlint", "sanitize", "--summary-report", str(summary), *flags]
    done = subprocess.run(
        [*command, "--", sys.executable, str(PROGRAM), name], capture_output=True, text=True, env=env, timeout=400
    )
    print(done.stdout[-2000:], done.stderr[-3000:])
    return done, json.loads(summary.read_text())


def test_a_program_that_graphs_half_its_step_gets_the_share_counted_by_hand(tmp_path: Path) -> None:
    done, summary = _sanitized(tmp_path, "half_graphed")
    assert done.returncode == 0
    coverage = summary["coverage"]
    assert coverage["measured"], coverage
    assert (coverage["graphed_launches"], coverage["eager_launches"]) == (20, 29), coverage
    assert "coverage: 40.8% of kernel launches ran from graphs (20 of 49)" in done.stderr
    # the sanitizer's own GL506 comparison (2 kernels) is counted apart, in neither share
    assert coverage["own_launches"] == 2, coverage


def test_require_graphed_fails_a_run_below_the_share_and_passes_one_above(tmp_path: Path) -> None:
    assert _sanitized(tmp_path, "half_graphed", "--require-graphed", "50")[0].returncode == 1
    assert _sanitized(tmp_path, "half_graphed", "--require-graphed", "40")[0].returncode == 0


def test_a_compile_that_skips_cudagraphs_is_listed_as_a_fallback(tmp_path: Path) -> None:
    done, summary = _sanitized(tmp_path, "compiled_fallback")
    assert done.returncode == 0
    fallbacks = summary["coverage"]["fallbacks"]
    assert any(f["reason"].startswith("skipping cudagraphs due to mutated inputs") for f in fallbacks), fallbacks
    assert "fell back: " in done.stderr


def test_the_programs_own_profiler_works_and_the_report_says_where_ours_stopped(tmp_path: Path) -> None:
    done, summary = _sanitized(tmp_path, "own_profiler")
    assert done.returncode == 0 and "own profiler saw" in done.stdout
    line = next(n for n, text in enumerate(PROGRAM.read_text().splitlines(), 1) if "torch.profiler.profile(" in text)
    limits = summary["coverage"]["limits"]
    assert any(f"started its own profiler at {PROGRAM}:{line}" in limit for limit in limits), limits
