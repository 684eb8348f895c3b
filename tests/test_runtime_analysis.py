"""The two-capture analysis on snapshots recorded on an H200 (no GPU needed).

Each program's input slots were verified on the GPU by re-pointing exactly those words at
fresh inputs and comparing with eager (`meta.repoint_verified_on_gpu`); here the pure
analysis must find exactly those slots again from the committed bytes, and report the
seeded hazards.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from graphlint.runtime_sanitizer import analysis
from graphlint.runtime_sanitizer.report import analyze_pair
from graphlint.runtime_sanitizer.snapshot import GraphSnapshot, load_captures

SNAPSHOTS = Path(__file__).resolve().parent.parent / "fixtures" / "snapshots"
PROGRAMS = sorted(p.stem for p in SNAPSHOTS.glob("*.json") if p.stem != "SUMMARY")


def _load(name: str):
    captures, meta = load_captures(SNAPSHOTS / f"{name}.json")
    return captures["first"], captures["second"], captures["repeat"], meta


def _report(name: str):
    captures, meta = load_captures(SNAPSHOTS / f"{name}.json")
    report = analyze_pair(
        captures["first"], captures["second"], (name, 1), name, captures["repeat"], captures.get("ordering")
    )
    return report, captures, meta


def test_every_required_program_was_recorded() -> None:
    assert {"mlp", "transformer_block", "gemm", "compiled", "two_streams", "memcpy_memset"} <= set(PROGRAMS)
    first, _, _, _ = _load("memcpy_memset")
    assert {"memcpy", "memset", "kernel"} <= {node.type for node in first.nodes}
    provenance = first.provenance
    assert provenance["device"] == "NVIDIA H200" and provenance["torch"] and provenance["driver"]


@pytest.mark.parametrize("name", PROGRAMS)
def test_input_slots_are_exactly_the_gpu_verified_ones(name: str) -> None:
    report, captures, meta = _report(name)
    first, second = captures["first"], captures["second"]
    expected = ["GL504"] if name == "race" else []
    assert [f.code for f in report.findings] == expected, [f.message for f in report.findings]
    found = [[w.node, w.param, w.offset, w.region, w.delta] for w in report.input_slots]
    assert found == meta["input_slots"]
    assert found, "every recorded program reads its input"
    assert meta["repoint_verified_on_gpu"] in (True, "n/a: a memcpy/memset source (the launcher's job)")
    # No word outside an input's byte range in both captures is called an input.
    for word in report.input_slots:
        a = first.region_of(word.first, ("input",))
        b = second.region_of(word.second, ("input",))
        assert a is not None and b is not None and word.first - a.start == word.second - b.start


def test_side_stream_race_recorded_on_the_gpu_is_gl504_and_joined_streams_are_not() -> None:
    report, _, _ = _report("race")
    assert [f.code for f in report.findings] == ["GL504"]
    assert "aten.mul.out" in report.findings[0].message and "aten.add.Tensor" in report.findings[0].message
    joined, captures, meta = _report("two_streams")
    assert meta["ordering_checked"] and "ordering" in captures
    assert joined.findings == []


def test_alignment_requirement_from_the_recorded_misaligned_capture() -> None:
    captures, meta = load_captures(SNAPSHOTS / "elementwise.json")
    first, shifted = captures["first"], captures["shifted"]
    assert "vectorized" in first.nodes[0].name and "vectorized" not in shifted.nodes[0].name
    captured = analysis.alignment_of(meta["captured_alignment"])
    assert analysis.required_alignment(first, shifted, captured, 4) == captured >= 16
    report, _, _ = _report("elementwise")
    report.alignment[0] = captured
    aligned = first.regions[0].start
    assert [f.code for f in report.check_launch([aligned + 4])] == ["GL502"]
    assert report.check_launch([aligned + captured]) == []


def test_cublas_struct_pointer_is_found_inside_the_by_value_struct() -> None:
    first, second, _repeat, _ = _load("gemm")
    words = analysis.classify(first, second)
    slots = analysis.input_slots(words)
    assert slots and all(first.nodes[w.node].params[w.param].size >= 128 for w in slots)


def test_a_kernel_that_differs_between_captures_is_gl501() -> None:
    first, second, repeat, _ = _load("mlp")
    changed = copy.deepcopy(second)
    changed.nodes[2].name = changed.nodes[2].name.replace("vectorized", "unrolled")
    report = analyze_pair(first, changed, ("mlp.py", 3), "mlp", repeat)
    assert [f.code for f in report.findings] == ["GL501"]
    assert "node 2" in report.findings[0].message
    missing = copy.deepcopy(second)
    missing.nodes.pop()
    assert [f.code for f in analyze_pair(first, missing, ("mlp.py", 3), "mlp").findings] == ["GL501"]


def test_a_scalar_that_differs_between_captures_is_gl505_but_padding_noise_is_not() -> None:
    first, second, repeat, _ = _load("compiled")
    node = next(n for n in second.nodes if n.type == "kernel")
    scalar = next(i for i, p in enumerate(node.params) if 2 <= p.size <= 8)
    changed = copy.deepcopy(second)
    param = changed.nodes[node.index].params[scalar]
    param.data = bytes((b + 1) % 256 for b in param.data)
    report = analyze_pair(first, changed, ("f.py", 1), "f", repeat)
    assert [f.code for f in report.findings] == ["GL505"]
    # The same difference also present between the two identical captures is noise.
    noisy_repeat = copy.deepcopy(repeat)
    noisy_repeat.nodes[node.index].params[scalar].data = bytes((b + 7) % 256 for b in param.data)
    assert analyze_pair(first, changed, ("f.py", 1), "f", noisy_repeat).findings == []


def test_snapshot_json_round_trip(tmp_path: Path) -> None:
    first, _, _, _ = _load("transformer_block")
    again = GraphSnapshot.from_dict(first.to_dict())
    assert again == first
    with pytest.raises(ValueError, match="unsupported snapshot version"):
        GraphSnapshot.from_dict({**first.to_dict(), "version": 99})
