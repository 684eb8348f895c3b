"""Where a replay first leaves eager execution (GL512, `analysis/divergence.py`), and the eager
run's undoing of what it writes (`guard/eager_compare.py`, on CPU tensors)."""

from __future__ import annotations

import pytest

from graphlint.runtime_sanitizer.analysis.divergence import (
    CapturedOp,
    Divergence,
    divergence_message,
    first_divergent,
    same_path_length,
)


def _ops(names: list[str], nodes: list[int]) -> list[CapturedOp]:
    ops, start = [], 0
    for index, (name, count) in enumerate(zip(names, nodes, strict=True)):
        ops.append(CapturedOp(name, ("prog.py", 10 + index), start, start + count))
        start += count
    return ops


@pytest.mark.parametrize("first_bad", [0, 1, 5, 17, 29])
def test_bisection_finds_the_first_differing_operator_in_few_probes(first_bad: int) -> None:
    ops = _ops([f"aten.op{i}" for i in range(30)], [1] * 30)
    asked: list[int] = []

    def differs(index: int) -> bool:
        asked.append(index)
        return index >= first_bad

    found = first_divergent(ops, [op.name for op in ops], differs)
    assert found == Divergence(first_bad, path_differs=False)
    assert len(asked) <= 6  # log2(30) + the check of the last one


def test_operators_that_created_no_node_are_never_probed() -> None:
    ops = _ops(["aten.t", "aten.addmm", "aten.view", "aten.div"], [0, 1, 0, 1])
    asked: list[int] = []

    def differs(index: int) -> bool:
        asked.append(index)
        return index == 3

    assert first_divergent(ops, [op.name for op in ops], differs) == Divergence(3, path_differs=False)
    assert set(asked) <= {1, 3}


def test_where_the_paths_part_before_any_output_differs_that_point_is_named() -> None:
    ops = _ops(["aten.mm", "aten.relu", "aten.add"], [1, 1, 1])
    eager = ["aten.mm", "aten.gelu", "aten.add"]
    assert same_path_length([op.name for op in ops], eager) == 1
    found = first_divergent(ops, eager, lambda index: False)
    assert found == Divergence(1, path_differs=True)
    message = divergence_message("graph captured at prog.py:3", 4, ["`y` differs"], found, ops, eager)
    assert "leaves the captured path at operator 2 (prog.py:11)" in message
    assert "`aten.relu`, eager runs `aten.gelu`" in message


def test_no_operator_named_when_none_differs_on_the_same_path() -> None:
    ops = _ops(["aten.mm", "aten.add"], [1, 1])
    assert first_divergent(ops, ["aten.mm", "aten.add"], lambda index: False) is None
    message = divergence_message("graph", 2, ["`y` differs"], None, ops, [], why_not="the graph's node list is gone")
    assert message.endswith("The first differing kernel is not named: the graph's node list is gone")


def test_the_message_names_the_operator_its_line_and_the_replay() -> None:
    ops = _ops(["aten.addmm", "aten.div"], [1, 1])
    found = first_divergent(ops, ["aten.addmm", "aten.div"], lambda index: index == 1)
    message = divergence_message("graph captured at prog.py:3", 3, ["`probs` differs in 32 of 32"], found, ops, [])
    assert message.startswith("replay 3 of the graph captured at prog.py:3 differs from running its block eagerly")
    assert "`aten.div` at prog.py:11 (operator 2, graph node 2" in message


torch = pytest.importorskip("torch", reason="the eager run's undo needs torch")


def test_the_eager_run_puts_back_every_tensor_it_wrote_in_place() -> None:
    from graphlint.runtime_sanitizer.guard.eager_compare import _UndoWrites

    cache = torch.arange(6.0)
    view = cache[2:4]
    kept = torch.ones(3)
    mode = _UndoWrites(record=True)
    with mode:
        made = torch.zeros(3)
        made.add_(1)  # made in the run: not the program's, not backed up
        view.mul_(10)
        cache[0] = 7.0
        kept.copy_(made * 5)
    written = mode.written(set())  # whole storages: both writes into `cache` are seen
    assert [t.data_ptr() for t in written] == [cache.data_ptr(), kept.data_ptr()]
    assert written[0].tolist() == [7.0, 1.0, 20.0, 30.0, 4.0, 5.0] and kept[0].item() == 5.0
    # Memory the run allocated where the mode could not see it (compiled code) is not the program's
    assert [t.data_ptr() for t in mode.written({cache.untyped_storage().data_ptr()})] == [kept.data_ptr()]
    mode.undo()
    assert torch.equal(cache, torch.arange(6.0)) and torch.equal(kept, torch.ones(3))
    assert not mode.random


def test_allocated_blocks_are_the_starts_of_active_blocks_in_every_segment() -> None:
    """The eager run tells its own allocations (Inductor's `empty_strided_cuda`, which no
    dispatch mode sees) from the program's by the caching allocator's blocks before and after."""
    from types import SimpleNamespace

    from graphlint.runtime_sanitizer.guard.eager_compare import allocated_blocks

    segments = [
        {
            "address": 0x1000,
            "blocks": [
                {"size": 0x100, "state": "active_allocated"},
                {"size": 0x80, "state": "inactive"},
                {"size": 0x80, "state": "active_allocated"},
            ],
        },
        {"address": 0x9000, "blocks": [{"size": 0x200, "state": "active_pending_free"}]},
    ]
    fake = SimpleNamespace(cuda=SimpleNamespace(memory_snapshot=lambda: segments))
    assert allocated_blocks(fake) == {0x1000, 0x1180}


def test_a_random_operator_is_noted() -> None:
    from graphlint.runtime_sanitizer.guard.eager_compare import _UndoWrites

    mode = _UndoWrites(record=False)
    with mode:
        torch.nn.functional.dropout(torch.ones(4), p=0.5)
    assert "bernoulli" in mode.random or "dropout" in mode.random, mode.random


def _sanitize(*arguments: str):
    import subprocess
    import sys

    command = [sys.executable, "-m", "graphlint", "sanitize", *arguments]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def test_the_cli_hands_compare_eager_to_the_program_and_refuses_it_with_poison() -> None:
    code = "import os; print(os.environ.get('GRAPHLINT_SANITIZE_COMPARE_EAGER'))"
    assert _sanitize("--compare-eager", "--", "python", "-c", code).stdout.strip() == "1"
    assert _sanitize("--", "python", "-c", code).stdout.strip() == "None"
    done = _sanitize("--poison", "--compare-eager", "--", "python", "-c", "pass")
    assert done.returncode == 2 and "cannot be combined" in done.stderr


def test_the_summary_counts_compared_replays_and_keeps_them_through_json() -> None:
    from graphlint.runtime_sanitizer.analysis.graph_counts import GraphCounts

    counts = GraphCounts(seen=1, analysed=1, compared_replays=4)
    assert "--compare-eager: 4 replays compared" in counts.summary()
    again = GraphCounts.from_dict(counts.to_dict())
    assert again.compared_replays == 4
    total = GraphCounts()
    total.add(again)
    total.add(GraphCounts(compared_replays=1))
    assert total.compared_replays == 5
    assert "compared_replays" not in GraphCounts().to_dict()


def test_what_the_block_reads_that_changed_is_named_scalars_by_value_tensors_by_identity() -> None:
    from graphlint.runtime_sanitizer.analysis.divergence import Seen, changed_reads

    before = {
        "temperature": Seen(1, scalar="1.0"),
        "self.static_x": Seen(10, tensor=True),
        "self.weight": Seen(20, tensor=True),
        "steps": Seen(3, scalar="4"),
    }
    now = {
        "temperature": Seen(2, scalar="0.5"),
        "self.static_x": Seen(11, tensor=True),
        "self.weight": Seen(20, tensor=True),
        "steps": Seen(3, scalar="4"),
    }
    changes = changed_reads(before, now)
    assert changes[0] == "`temperature` was 1.0 at the capture and is 0.5 now"
    assert changes[1].startswith("`self.static_x` is another tensor than at the capture (rebound")
    assert len(changes) == 2
    message = divergence_message("graph", 3, ["`y` differs"], None, [], [], changed=changes)
    assert message.endswith("Changed since the capture: " + "; ".join(changes))


def test_reads_are_looked_up_in_instance_dictionaries_never_through_properties() -> None:
    from graphlint.runtime_sanitizer.guard.eager_compare import _seen_reads

    class Holder:
        calls = 0

        def __init__(self) -> None:
            self.static_x = torch.zeros(2)
            self.scale = 2.0
            self.layer = torch.nn.Linear(2, 2)

        @property
        def computed(self):
            Holder.calls += 1
            return torch.ones(1)

    holder = Holder()
    seen = _seen_reads(
        ("self.static_x", "self.scale", "self.computed", "self.layer.weight", "missing"), {"self": holder}
    )
    assert set(seen) == {"self.static_x", "self.scale", "self.layer.weight"}
    assert seen["self.scale"].scalar == "2.0" and seen["self.static_x"].tensor
    assert Holder.calls == 0  # a property is program code: never run by the sanitizer
