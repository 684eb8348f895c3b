"""Sanitized training loops and plain captures on a real GPU (marker `cuda`): GL509 for graphed
gradients accumulated into the static buffer, GL504 for a plain capture's unjoined side
stream, and their correct twins, which report nothing and compute what eager computes."""

from __future__ import annotations

import sys

import pytest

torch = pytest.importorskip("torch", reason="the runtime sanitizer needs torch")
pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device: the runtime sanitizer needs a GPU"),
]

import side_stream_captures  # noqa: E402
from side_stream_captures import capture_side_write_then_read  # noqa: E402

from graphlint.runtime_sanitizer.analysis.postprocess import finish  # noqa: E402
from graphlint.runtime_sanitizer.guard.replay_guard import ReplayGuard  # noqa: E402


def _mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).cuda()


def _batches():
    generator = torch.Generator(device="cuda").manual_seed(1)
    return [torch.randn(8, 16, device="cuda", generator=generator) for _ in range(4)]


def _accumulate(clear_each_step: bool, graphed: bool):
    """Four backward passes; returns the gradients, the findings and the backward() line."""
    model = _mlp()
    line = 0
    with ReplayGuard() as guard:
        run = torch.cuda.make_graphed_callables(model, (torch.randn(8, 16, device="cuda"),)) if graphed else model
        for batch in _batches():
            if clear_each_step:
                model.zero_grad(set_to_none=True)
            run(batch).pow(2).sum().backward()
            line = sys._getframe().f_lineno - 1
    grads = [p.grad.clone() for p in model.parameters()]
    return grads, [f for f in finish(guard.findings) if not f.informational], line


def test_graphed_grads_accumulated_without_clearing_are_gl509_at_the_backward_line() -> None:
    grads, findings, line = _accumulate(clear_each_step=False, graphed=True)
    assert [f.code for f in findings] == ["GL509"], findings
    finding = findings[0]
    assert finding.path == __file__ and finding.line == line, finding
    for name in ("`0.weight`", "`0.bias`", "`2.weight`", "`2.bias`", "set_to_none=True", "make_graphed_callables"):
        assert name in finding.message, finding.message
    eager, _, _ = _accumulate(clear_each_step=False, graphed=False)
    assert not all(torch.allclose(a, b) for a, b in zip(grads, eager, strict=True))  # the hazard is real


def test_graphed_grads_cleared_every_step_report_nothing_and_equal_eager() -> None:
    grads, findings, _ = _accumulate(clear_each_step=True, graphed=True)
    assert findings == [], findings
    eager, _, _ = _accumulate(clear_each_step=True, graphed=False)
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(grads, eager, strict=True))


def _plain_capture(join_first: bool):
    """The side stream writes `x` with `torch.mul(out=)`; the main stream adds `b` to it."""

    def write(a):
        x = torch.empty_like(a)
        torch.mul(a, 3.0, out=x)
        return x

    y, _, b, x, guard, line = capture_side_write_then_read(write, lambda x, b: x + b, join_first)
    return y, x, b, guard, line


def test_plain_capture_reading_a_side_stream_write_before_the_join_is_gl504() -> None:
    _, _, _, guard, line = _plain_capture(join_first=False)
    findings = [f for f in finish(guard.findings) if not f.informational]
    assert [f.code for f in findings] == ["GL504"], findings
    assert findings[0].path == side_stream_captures.__file__ and findings[0].line == line
    assert "aten.mul.out" in findings[0].message and "aten.add.Tensor" in findings[0].message
    assert guard.graphs.analysed == 1 and guard.graphs.refused == []


def test_plain_capture_joined_before_the_read_reports_nothing_and_computes_eagerly() -> None:
    y, x, b, guard, _ = _plain_capture(join_first=True)
    assert finish(guard.findings) == [], guard.findings
    assert torch.equal(y, x + b)
    assert guard.graphs.seen == 1 and guard.graphs.analysed == 1


PROGRAM = """
import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).cuda()
graphed = torch.cuda.make_graphed_callables(model, (torch.randn(8, 16, device="cuda"),))
for step in range(4):
    if CLEAR:
        model.zero_grad(set_to_none=True)
    graphed(torch.randn(8, 16, device="cuda")).pow(2).sum().backward()
print("grad norm", float(model[0].weight.grad.norm()))
"""


@pytest.mark.parametrize("clear", [False, True])
def test_graphlint_sanitize_reports_gl509_at_the_programs_backward_line(tmp_path, clear: bool) -> None:
    import json

    from conftest import run_cli

    script = tmp_path / "train.py"
    script.write_text(PROGRAM.replace("CLEAR", str(clear)))
    report = tmp_path / "findings.json"
    result = run_cli("sanitize", "--mode", "error", "--report", str(report), "--", "python", str(script))
    rows = [row for row in json.loads(report.read_text()) if row["severity"] != "info"]
    assert "grad norm" in result.stdout, result.stderr
    assert "seen, 1 analysed, 0 refused" in result.stderr, result.stderr
    if clear:
        assert result.returncode == 0 and rows == [], result.stderr
    else:
        assert result.returncode == 1, result.stderr
        lines = PROGRAM.splitlines()
        backward_line = next(i for i, text in enumerate(lines, start=1) if "backward()" in text)
        assert [(r["code"], r["path"], r["line"]) for r in rows] == [("GL509", str(script), backward_line)], rows
