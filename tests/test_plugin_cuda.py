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
import random

import pytest
import torch

from graphlint.launcher.launcher import ParameterizedLauncher


class PythonStateGraph(torch.nn.Module):  # the graph depends on a Python counter
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(16, 16)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return self.lin(x) * 2 if self.calls % 2 else torch.relu(self.lin(x))


class HostScale(torch.nn.Module):
    def __init__(self, scale=None):
        super().__init__()
        self.lin = torch.nn.Linear(16, 16)
        self.scale = scale

    def forward(self, x):
        return self.lin(x) * (random.random() if self.scale is None else self.scale)


class SideStream(torch.nn.Module):
    def __init__(self, join_first):
        super().__init__()
        self.lin = torch.nn.Linear(16, 16)
        self.side = torch.cuda.Stream()
        self.join_first = join_first

    def forward(self, x):
        h = self.lin(x)
        self.side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.side):
            y = h * 3
        if self.join_first:
            torch.cuda.current_stream().wait_stream(self.side)
        out = y + h
        torch.cuda.current_stream().wait_stream(self.side)
        return out


def graphed(module):
    module = module.cuda()
    return torch.cuda.make_graphed_callables(module, (torch.randn(4, 16, device="cuda"),))


def test_unstable_capture_hazard():
    graphed(PythonStateGraph())


def test_unstable_capture_clean_twin():
    graphed(HostScale(scale=0.5))


def test_baked_host_value_hazard():
    graphed(HostScale())


def test_unordered_stream_access_hazard():
    graphed(SideStream(join_first=False))


def test_unordered_stream_access_clean_twin():
    graphed(SideStream(join_first=True))


def elementwise_launcher():
    return ParameterizedLauncher(lambda t: t * 2 + 1, [torch.randn(1 << 20, device="cuda")])


@torch.inference_mode()
def test_misaligned_launch_hazard():
    base = torch.randn((1 << 20) + 4, device="cuda")
    elementwise_launcher()(base[1 : (1 << 20) + 1])


@torch.inference_mode()
def test_misaligned_launch_clean_twin():
    base = torch.randn((1 << 20) + 4, device="cuda")
    elementwise_launcher()(base[: 1 << 20])


@torch.inference_mode()
def test_fixed_address_launch_hazard():
    launcher = elementwise_launcher()
    launcher(launcher.outputs[0])


@torch.inference_mode()
def test_fixed_address_launch_clean_twin():
    launcher = elementwise_launcher()
    launcher(torch.randn(1 << 20, device="cuda"))


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


def graphed_training(clear):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).cuda()
    run = torch.cuda.make_graphed_callables(model, (torch.randn(8, 16, device="cuda"),))
    for _ in range(4):
        if clear:
            model.zero_grad(set_to_none=True)
        run(torch.randn(8, 16, device="cuda")).pow(2).sum().backward()


def test_graphed_grad_alias_hazard():
    graphed_training(clear=False)


def test_graphed_grad_alias_clean_twin():
    graphed_training(clear=True)


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
    text = result.stdout.str()
    print(text[-6000:])
    hazards = {
        "test_stale_read_hazard": "GL503",
        "test_unchanged_inputs_hazard": "GL506",
        "test_unstable_capture_hazard": "GL501",
        "test_baked_host_value_hazard": "GL505",
        "test_unordered_stream_access_hazard": "GL504",
        "test_misaligned_launch_hazard": "GL502",
        "test_fixed_address_launch_hazard": "GL507",
        "test_graphed_grad_alias_hazard": "GL509",
    }
    result.assert_outcomes(passed=9, failed=len(hazards))
    assert "graphlint sanitizer: active, mode error" in text
    for test, code in hazards.items():
        assert f"{test}: {code}" in text, (test, code)
    failed = {line.split("::")[-1].split()[0] for line in result.stdout.lines if line.startswith("FAILED")}
    assert failed == set(hazards)
    # GL508 (pool memory) is listed for graphed callables and fails nothing: the clean twins pass.
    assert "test_unstable_capture_clean_twin: GL508" in text
    # The gradient hazard is named once, at the backward() line (autograd runs it on its own thread).
    gl509 = [line for line in result.stdout.lines if line.startswith("test_seeded.py::") and ": GL509 [" in line]
    assert len(gl509) == 1 and "test_seeded.py:" in gl509[0] and "set_to_none=True" in gl509[0], gl509
    written = (pytester.path / "test_seeded.py").read_text().splitlines()
    backward_line = next(i for i, text in enumerate(written, start=1) if text.endswith(".pow(2).sum().backward()"))
    assert gl509[0].endswith(f"test_seeded.py:{backward_line})"), gl509
    assert "graphs: " in text and " analysed, " in text


def test_warn_mode_reports_without_failing(pytester) -> None:
    pytester.makepyfile(test_seeded=SUITE)
    result = pytester.runpytest_subprocess(*plugin_args(), "--graphlint-sanitize", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=17)
    assert "GL503" in result.stdout.str()
