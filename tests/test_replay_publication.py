"""Where a capture's output stored into `self` becomes the class's static output: right after
a capture that runs once, not inside a loop (the replay flow asks the walker's frames), where
each pass stores the output of another capture."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import check_json

RUNNER = """\
import torch


class Runner:
    def __init__(self, model):
        self.model = model
        self.graph = None
        self.outputs = {}

    def capture(self, x):
{capture}
    def forward(self, x):
        self.graph.replay()
        return self.outputs["hidden"]


def decode(runner: Runner, x, steps):
    outs = []
    for _ in range(steps):
        outs.append(runner.forward(x))
    return outs
"""
ONCE = """\
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            hidden = self.model(x)
        self.outputs["hidden"] = hidden
"""
PER_SIZE = """\
        for size in (1, 2, 4):
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                hidden = self.model(x[:size])
            self.outputs["hidden"] = hidden
"""


@pytest.mark.parametrize(("capture", "kept_across_replays"), [(ONCE, [23]), (PER_SIZE, [])])
def test_an_output_stored_into_self_is_published_only_outside_a_loop(
    tmp_path: Path, capture: str, kept_across_replays: list[int]
) -> None:
    (tmp_path / "runner.py").write_text(RUNNER.replace("{capture}\n", capture))
    findings = check_json("--exit-zero", "runner.py", cwd=tmp_path)
    assert [f["line"] for f in findings if f["code"] == "GL201"] == kept_across_replays
