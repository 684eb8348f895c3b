"""The pytest plugin on a real GPU: a suite of seeded hazards under --graphlint-sanitize=error."""

from __future__ import annotations

import pytest

from conftest import plugin_args

torch = pytest.importorskip("torch", reason="the sanitizer needs torch")
pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device: the sanitizer needs a GPU"),
]

SUITE = """
import pytest
import torch


def captured():
    model = torch.nn.Linear(16, 16).cuda()
    static_x = torch.randn(4, 16, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        model(static_x)
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = model(static_x)
    return g, static_x, out


@torch.no_grad()
def test_stale_read_hazard():
    g, x, out = captured()
    x.copy_(torch.randn_like(x))
    g.replay()
    first = out[0]
    x.copy_(torch.randn_like(x))
    g.replay()
    assert first.shape == (16,)
    first.sum()


@torch.no_grad()
def test_stale_read_clean_twin():
    g, x, out = captured()
    x.copy_(torch.randn_like(x))
    g.replay()
    first = out[0].clone()
    x.copy_(torch.randn_like(x))
    g.replay()
    first.sum()


@torch.no_grad()
def test_unchanged_inputs_hazard():
    g, x, out = captured()
    for batch in [torch.randn_like(x) for _ in range(3)]:
        x_new = batch
        g.replay()


@torch.no_grad()
def test_unchanged_inputs_clean_twin():
    g, x, out = captured()
    for batch in [torch.randn_like(x) for _ in range(3)]:
        x.copy_(batch)
        g.replay()


@pytest.mark.graphlint(ignore=["GL503"])
@torch.no_grad()
def test_findings_fixture_sees_its_own_findings(graphlint_findings):
    g, x, out = captured()
    g.replay()
    first = out[0]
    x.copy_(torch.randn_like(x))
    g.replay()
    first.sum()
    assert [f.code for f in graphlint_findings] == ["GL503"]


@pytest.mark.graphlint(ignore=["GL506"])
@torch.no_grad()
def test_unchanged_inputs_ignored_by_marker():
    g, x, out = captured()
    for _ in range(3):
        g.replay()
"""


def test_error_mode_fails_exactly_the_hazardous_tests(pytester) -> None:
    pytester.makepyfile(test_seeded=SUITE)
    result = pytester.runpytest_subprocess(*plugin_args(), "--graphlint-sanitize=error", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=4, failed=2)
    text = result.stdout.str()
    assert "graphlint sanitizer: active, mode error" in text
    assert "test_stale_read_hazard: GL503" in text
    assert "test_unchanged_inputs_hazard: GL506" in text
    failed = {line.split("::")[-1].split()[0] for line in result.stdout.lines if line.startswith("FAILED")}
    assert failed == {"test_stale_read_hazard", "test_unchanged_inputs_hazard"}
    print(text[-3000:])


def test_warn_mode_reports_without_failing(pytester) -> None:
    pytester.makepyfile(test_seeded=SUITE)
    result = pytester.runpytest_subprocess(*plugin_args(), "--graphlint-sanitize", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=6)
    assert "GL503" in result.stdout.str()
