"""A new rule plugs in with no edit to the machinery: a throwaway rule, declared outside
graphlint's package, answers events the stream and replay flows already emit and confirms its
own candidates in the project phase (`Detector.holds`). If adding a rule ever needs an edit to a
flow module or the project phase, this test fails.

The rule is declared in a child process: the registry and the detectors are process-wide, and a
throwaway code must not leak into the other tests' `graphlint rules`.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

_PLUGIN = """
import ast, sys
from graphlint.checkers.machinery.detectors import Detector
from graphlint.checkers.machinery.flows.replay.replay_flow import KeptOutputRead
from graphlint.checkers.machinery.flows.stream.stream_flow import CrossStreamUse
from graphlint.registry import Rule, declare

RULE = declare(
    Rule(code="GL399", name="throwaway", summary="a throwaway rule", why="a test", example="", use_instead="")
)


class Throwaway(Detector):
    rule = RULE

    def on_CrossStreamUse(self, w, event: CrossStreamUse) -> None:
        w.hazard(RULE.code, event.node, f"cross-stream use of `{event.name}`", always=True)

    def on_KeptOutputRead(self, w, event: KeptOutputRead) -> None:
        # Recorded with a condition for the project phase to judge: the rule keeps it only in
        # `compare` (a stand-in for a fact of another file).
        message = f"`{ast.unparse(event.node)}` kept in {w.display}"
        w.hazard(RULE.code, event.node, message, always=True, condition=(w.display,))

    def holds(self, project, summary, hazard, kind) -> bool:
        return not hazard.condition or hazard.condition[0] == "compare"


from graphlint.cli import main

sys.exit(main(["check", "--select", "GL399", "--format", "json", "--no-cache", "--jobs", "1", sys.argv[1]]))
"""

_PROGRAM = """
import torch

side = torch.cuda.Stream()
static_x = torch.zeros(4, device="cuda")
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g):
    static_out = static_x * 2


def prefetch(w_cpu):
    with torch.cuda.stream(side):
        w = w_cpu.to("cuda", non_blocking=True)
    return w * 2


def compare(a, b):
    static_x.copy_(a)
    g.replay()
    kept_out = static_out
    static_x.copy_(b)
    g.replay()
    return kept_out - static_out


def compare_again(a, b):
    static_x.copy_(a)
    g.replay()
    other = static_out
    static_x.copy_(b)
    g.replay()
    return other - static_out
"""


def test_a_rule_outside_the_package_hears_the_flows_and_judges_its_candidates(tmp_path: Path) -> None:
    program = tmp_path / "program.py"
    program.write_text(textwrap.dedent(_PROGRAM))
    plugin = tmp_path / "plugin.py"
    plugin.write_text(_PLUGIN)
    run = subprocess.run([sys.executable, str(plugin), str(program)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 1, run.stderr
    found = {(f["code"], f["line"], f["message"]) for f in json.loads(run.stdout)}
    assert ("GL399", 14, "cross-stream use of `w`") in found, found
    assert ("GL399", 20, "`static_out` kept in compare") in found, found
    assert not any("compare_again" in message for _, _, message in found), "the rule's own holds() was not asked"
