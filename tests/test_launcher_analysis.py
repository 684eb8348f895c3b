"""The launcher's pure parts (no GPU): `extra` argument buffers, output births, the device-side
updater's tables, and the analysis on snapshots recorded on an H200 (fixtures/snapshots)."""

from __future__ import annotations

import ctypes
from pathlib import Path

import pytest

from graphlint.launcher.device_update import DeviceSlot, pack_slots
from graphlint.runtime_sanitizer.analysis import two_capture as analysis
from graphlint.runtime_sanitizer.analysis.snapshot import GraphSnapshot, Node, Region, load_captures
from graphlint.runtime_sanitizer.capture.introspection import _extra_buffer, packed_extra

SNAPSHOTS = Path(__file__).resolve().parent.parent / "fixtures" / "snapshots"


def test_an_extra_array_yields_its_packed_argument_bytes() -> None:
    buffer = ctypes.create_string_buffer(bytes(range(48)), 48)
    array, _size = packed_extra(buffer)
    assert _extra_buffer(ctypes.addressof(array)) == bytes(range(48))


def test_an_extra_array_with_other_keys_or_no_size_is_not_guessed() -> None:
    buffer = ctypes.create_string_buffer(16)
    unknown = (ctypes.c_void_p * 3)(7, ctypes.addressof(buffer), 0)
    no_size = (ctypes.c_void_p * 3)(1, ctypes.addressof(buffer), 0)
    assert _extra_buffer(ctypes.addressof(unknown)) is None
    assert _extra_buffer(ctypes.addressof(no_size)) is None
    assert _extra_buffer(0) is None


def test_updater_tables_group_slots_by_node_in_the_kernels_layout() -> None:
    slots = [DeviceSlot(1, 16, 0, 8, 8), DeviceSlot(0, 0, 1, 0, 8), DeviceSlot(1, 40, 2, 0, 4)]
    rows, firsts = pack_slots([0x1000, 0x2000], slots)
    assert rows == [[0x1000, 0, 0, 1 | 8 << 32], [0x2000, 16, 8, 0 | 8 << 32], [0x2000, 40, 0, 2 | 4 << 32]]
    assert firsts == [0, 1, 3]
    with pytest.raises(ValueError, match="not device-updatable"):
        pack_slots([None, 0x2000], slots)


def test_an_outputs_birth_survives_serialisation() -> None:
    snapshot = GraphSnapshot(nodes=[], edges=[], regions=[Region("output0", "output", 4096, 64, born=7)])
    assert GraphSnapshot.from_dict(snapshot.to_dict()).regions[0].born == 7
    old = snapshot.to_dict()
    del old["regions"][0]["born"]  # snapshots recorded before births were kept
    assert GraphSnapshot.from_dict(old).regions[0].born == 0


def _word(node: int) -> analysis.Word:
    return analysis.Word(node, 0, 0, analysis.OUTPUT, "output0", 0, 4096, 8192, 8)


def test_a_node_that_ran_before_the_output_existed_is_not_the_outputs() -> None:
    regions = [Region("output0", "output", 4096, 64, born=2)]
    nodes = [Node(i, "kernel", writes=[(4096, 64)]) for i in range(3)]
    ordering = GraphSnapshot(nodes=nodes, edges=[], regions=regions)
    assert not analysis.really_output(_word(0), ordering)  # an intermediate in the same block
    assert analysis.really_output(_word(2), ordering)
    nodes[2].writes = [(4096, 32)]  # another range: another tensor
    assert not analysis.really_output(_word(2), ordering)


def _recorded(name: str) -> dict:
    path = SNAPSHOTS / f"{name}.json"
    if not path.exists():
        pytest.skip(f"{path.name} not recorded yet (scripts/record_snapshots.py on a GPU)")
    return load_captures(path)[0]


def test_recorded_bf16_gemm_kernels_launched_with_extra_carry_their_pointers_in_the_buffer() -> None:
    captures = _recorded("gemm_bf16")
    first, second = captures["first"], captures["second"]
    extra = [node for node in first.nodes if node.extra]
    assert extra, "nvjet kernels launched with `extra` were recorded"
    assert all(len(node.params) == 1 and node.params[0].size > 0 for node in extra)
    words = analysis.classify(first, second)
    in_extra = {(w.role, w.node) for w in words if first.nodes[w.node].extra}
    assert any(role == analysis.INPUT for role, _ in in_extra), "the first GEMM reads the input from its buffer"
    assert any(role == analysis.OUTPUT for role, _ in in_extra), "the last GEMM writes the output from its buffer"


def test_recorded_output_reuse_leaves_earlier_intermediates_alone() -> None:
    captures = _recorded("output_reuse")
    first, second, ordering = captures["first"], captures["second"], captures["ordering"]
    born = next(r.born for r in ordering.regions if r.name == "output0")
    assert born > 0
    outputs = [w for w in analysis.classify(first, second) if w.role == analysis.OUTPUT]
    early = [w for w in outputs if w.node < born]
    assert early, "the output's block served an earlier intermediate at the same offset in both captures"
    kept = [w for w in outputs if analysis.really_output(w, ordering)]
    assert kept and all(w.node >= born for w in kept)


def test_a_small_tensor_many_kernels_use_is_cheaper_to_copy_a_large_or_rarely_used_one_is_not() -> None:
    """The launcher's copy-or-re-point choice (update_cost): copy when re-pointing every user
    costs more CPU than a copy launch and the copy is faster than the device-side updater."""
    from graphlint.launcher.update_cost import cheaper_to_copy, nodes_per_tensor

    nodes = nodes_per_tensor(
        [(("input", 0), n) for n in range(80)]
        + [(("input", 0), 3)]  # one node using it twice counts once
        + [(("input", 1), n) for n in range(3)]
        + [(("input", 2), n) for n in range(80)]
        + [(("output", 0), 99)]
    )
    assert nodes == {("input", 0): 80, ("input", 1): 3, ("input", 2): 80, ("output", 0): 1}
    sizes = {("input", 0): 16 << 10, ("input", 1): 16 << 10, ("input", 2): 1 << 30, ("output", 0): 16 << 10}
    chosen = cheaper_to_copy(nodes, sizes)
    assert set(chosen) == {("input", 0)}
    assert "80 kernels use it (16384 bytes)" in chosen[("input", 0)]


def test_the_self_check_fails_a_graph_with_nan_where_eager_is_finite() -> None:
    """A graph that gives NaN where eager computes numbers gives the same NaN through its own
    copy-in/replay/clone-out, so equality with that is not enough: held against eager it fails."""
    torch = pytest.importorskip("torch")
    from graphlint.launcher.launcher import nonfinite_divergence

    eager = [torch.ones(4, 5), torch.arange(3)]
    graph = [torch.ones(4, 5), torch.arange(3)]
    assert nonfinite_divergence(graph, eager) is None
    graph[0][1, 2] = float("nan")
    graph[0][3, 0] = float("inf")
    message = nonfinite_divergence(graph, eager)
    assert message is not None and "output 0 has 2 non-finite values where eager computes finite ones" in message


def test_nan_that_eager_also_gives_is_no_divergence() -> None:
    torch = pytest.importorskip("torch")
    from graphlint.launcher.launcher import nonfinite_divergence

    eager = [torch.tensor([float("nan"), 1.0])]
    assert nonfinite_divergence([torch.tensor([float("nan"), 1.0])], eager) is None
    assert nonfinite_divergence([torch.tensor([1.0, 2.0])], eager) is None, "finite where eager is not: no failure"
    assert "2 outputs and eager 1" in nonfinite_divergence([torch.ones(1), torch.ones(1)], eager)


def test_without_an_attributed_capture_an_output_is_cloned_not_re_pointed() -> None:
    """levit_128s and crossvit_tiny_240 in bfloat16 (H100): with no attributed capture, an
    intermediate that held the output's block earlier was re-pointed with the output, and wrote
    past the caller's smaller tensor into a weight (or faulted). The recorded reuse shows both."""
    captures = _recorded("output_reuse")
    first, second, ordering = captures["first"], captures["second"], captures["ordering"]
    words = analysis.classify(first, second)
    assert any(w.role == analysis.OUTPUT for w in words)
    blind = analysis.pins(words, first, output_count=1, ordering=None)
    assert ("output", 0) in blind and not blind[("output", 0)].fixed_address
    assert "no attributed capture" in blind[("output", 0)].reason
    kept = [w for w in words if w.role != analysis.OUTPUT or analysis.really_output(w, ordering)]
    assert ("output", 0) not in analysis.pins(kept, first, output_count=1, ordering=ordering)
    assert all(key[0] == "input" for key in blind if key != ("output", 0)), "inputs are never pinned for this"


def test_the_state_fingerprint_sees_one_changed_element_and_holds_nan_equal_to_itself() -> None:
    torch = pytest.importorskip("torch")
    from graphlint.launcher.launcher import state_fingerprint

    state = [
        torch.tensor([1.0, float("nan"), 3.0]),
        torch.ones(4, 2, dtype=torch.bfloat16).t(),  # not contiguous
        torch.tensor(7, dtype=torch.int64),  # a 0-d step counter
        torch.tensor([True, False]),
    ]
    before = state_fingerprint(state)
    assert torch.equal(before, state_fingerprint([t.clone() for t in state])), "NaN equals itself bit for bit"
    state[1][0, 3] = 2.0
    assert not torch.equal(before, state_fingerprint(state))
    assert state_fingerprint([]).numel() == 0
