"""The fields a caller sets on an object before a capture decide the callees' branches on them.

A runner that plans a batch before capturing marks it (`batch.mark_planned()`), and the captured
step skips its eager plan (`if batch.needs_plan():`), whose host sync would fail the capture.
A batch built in a decode mode (`View(mode=Mode.DECODE, ...)`) never runs the step's prefill arm
(`if view.mode.is_prefill():`). Anything less than certain decides nothing: a mark after the
capture, a mark that allows a re-plan, a field a call in between may change, or two captures
that pass objects in different states."""

from __future__ import annotations

from pathlib import Path

from conftest import check_json, run_cli

BATCH = """\
class Batch:
    planned: bool = False
    replan_ok: bool = False

    def __init__(self, lengths):
        self.lengths = lengths

    def mark_planned(self, replan_ok: bool = False):
        self.planned = True
        self.replan_ok = replan_ok

    def needs_plan(self) -> bool:
        if not self.planned:
            return True
        if not self.replan_ok:
            return False
        return self.lengths is None

    def forget(self):
        self.planned = False
"""

WORKER = """\
import torch

from pkg.batch import Batch


class Worker:
    def plan_eagerly(self, batch: Batch) -> None:
        self.total = batch.lengths.sum().item()   # 8: the eager plan's host sync
        batch.mark_planned()

    def plan_for_capture(self, batch: Batch) -> None:
        self.total = 0
        batch.mark_planned()

    def step(self, batch: Batch):
        if batch.needs_plan():
            self.plan_eagerly(batch)
        return batch.lengths * 2


class Runner:
    def __init__(self):
        self.worker = Worker()
        self.graph = torch.cuda.CUDAGraph()

    def capture(self, lengths):
        batch = Batch(lengths)

        def run_once():
            return self.worker.step(batch)

        self.worker.plan_for_capture(batch)
        with torch.cuda.graph(self.graph):
            self.out = run_once()
"""


def _lines(root: Path) -> list[int]:
    return sorted(f["line"] for f in check_json("--select", "GL101", "pkg", cwd=root))


def _tree(write_tree, worker: str = WORKER, batch: str = BATCH) -> Path:
    return write_tree({"pkg/__init__.py": "", "pkg/batch.py": batch, "pkg/worker.py": worker})


def test_a_batch_marked_before_the_capture_skips_the_eager_plan(write_tree) -> None:
    root = _tree(write_tree)
    assert _lines(root) == []
    shown = run_cli("captures", "pkg", cwd=root).stdout
    assert "`batch.needs_plan()` is False with batch.planned=True, batch.replan_ok=False" in shown


def test_the_nearest_legal_look_alike_an_unmarked_batch_plans_in_the_capture(write_tree) -> None:
    root = _tree(write_tree, WORKER.replace("        self.worker.plan_for_capture(batch)\n", ""))
    assert _lines(root) == [8]


def test_a_mark_that_allows_a_replan_decides_nothing(write_tree) -> None:
    """`needs_plan` then reads `lengths`, which nothing set: the plan may run."""
    worker = WORKER.replace(
        "        batch.mark_planned()\n\n    def step", "        batch.mark_planned(True)\n\n    def step"
    )
    assert _lines(_tree(write_tree, worker)) == [8]


def test_a_mark_after_the_closure_is_handed_to_the_capture_decides_nothing(write_tree) -> None:
    worker = WORKER.replace(
        "        self.worker.plan_for_capture(batch)\n        with torch.cuda.graph(self.graph):\n            self.out = run_once()",
        "        with torch.cuda.graph(self.graph):\n            self.out = run_once()\n        self.worker.plan_for_capture(batch)",
    )
    assert _lines(_tree(write_tree, worker)) == [8]


def test_a_call_in_between_that_may_unmark_the_batch_decides_nothing(write_tree) -> None:
    worker = WORKER.replace(
        "            return self.worker.step(batch)",
        "            if lengths is None:\n                batch.forget()\n            return self.worker.step(batch)",
    )
    assert _lines(_tree(write_tree, worker)) == [8]


MODES = """\
import torch


class Mode:
    DECODE = 1
    PREFILL = 2

    def is_prefill(self):
        return self == Mode.PREFILL


class View:
    def __init__(self, mode, size):
        self.mode = mode
        self.size = size


def prefill_plan(view):
    return view.size.max().item()                 # 19: only a prefill plans


def forward(view):
    if view.mode.is_prefill():
        prefill_plan(view)
    return view.size + 1


def capture(size):
    view = View(mode=Mode.DECODE, size=size)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        forward(view)
    return graph
"""


def test_an_object_built_in_decode_mode_never_runs_the_prefill_arm(write_tree) -> None:
    root = write_tree({"pkg/__init__.py": "", "pkg/modes.py": MODES})
    assert _lines(root) == []
    shown = run_cli("captures", "pkg", cwd=root).stdout
    assert "`view.mode.is_prefill()` is False with view.mode=Mode.DECODE" in shown


def test_the_look_alike_built_in_prefill_mode_reports_the_plan(write_tree) -> None:
    root = write_tree({"pkg/__init__.py": "", "pkg/modes.py": MODES.replace("mode=Mode.DECODE", "mode=Mode.PREFILL")})
    assert _lines(root) == [19]


def test_two_captures_of_objects_in_different_modes_decide_nothing(write_tree) -> None:
    source = MODES + (
        "\n\ndef capture_prefill(size):\n"
        "    view = View(mode=Mode.PREFILL, size=size)\n"
        "    graph = torch.cuda.CUDAGraph()\n"
        "    with torch.cuda.graph(graph):\n"
        "        forward(view)\n"
    )
    root = write_tree({"pkg/__init__.py": "", "pkg/modes.py": source})
    assert _lines(root) == [19]


def test_an_enumeration_member_decides_only_against_members_of_its_own_enumeration() -> None:
    """`Mode.DECODE` is a constant like `True`; against a plain number (an IntEnum equals its
    value) or another enumeration's member it decides nothing."""
    import ast

    from graphlint.checkers.machinery.constants import param_tests

    def decide(test: str, held: str) -> bool | None:
        found = param_tests.read_test(ast.parse(test, mode="eval").body, frozenset({"mode"}))
        assert found is not None
        return param_tests.evaluate(found, {"mode": frozenset({held})})

    assert decide("mode == Mode.DECODE", "<Mode.DECODE>") is True
    assert decide("mode is Mode.DECODE", "<Mode.PREFILL>") is False
    assert decide("mode in (Mode.DECODE, Mode.IDLE)", "<Mode.PREFILL>") is False
    assert decide("mode == Mode.DECODE", "1") is None
    assert decide("mode == Other.DECODE", "<Mode.DECODE>") is None
    assert decide("mode", "<Mode.DECODE>") is None
