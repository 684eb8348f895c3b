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

from graphlint.runtime_sanitizer.analysis import two_capture as analysis
from graphlint.runtime_sanitizer.analysis.report import analyze_pair
from graphlint.runtime_sanitizer.analysis.snapshot import GraphSnapshot, load_captures

SNAPSHOTS = Path(__file__).resolve().parent.parent / "fixtures" / "snapshots"
# Input slots a plain re-pointing replay cannot check, and where they are checked instead
VERIFIED_ELSEWHERE = (
    "n/a: a memcpy/memset source (the launcher's job)",
    "n/a: read inside a conditional node's body (the launcher copies it: tests/test_conditional_cuda.py)",
)
PROGRAMS = sorted(p.stem for p in SNAPSHOTS.glob("*.json") if p.stem != "SUMMARY")


def _load(name: str):
    captures, meta = load_captures(SNAPSHOTS / f"{name}.json")
    return captures["first"], captures["second"], captures["repeat"], meta


def _analysed(path: Path, name: str):
    """The analysis of a recorded file's captures, as the sanitizer runs it on the GPU."""
    captures, meta = load_captures(path)
    report = analyze_pair(
        captures["first"],
        captures["second"],
        (name, 1),
        name,
        captures["repeat"],
        captures.get("ordering"),
        captures.get("moved_repeat"),
    )
    return report, captures, meta


def _report(name: str):
    return _analysed(SNAPSHOTS / f"{name}.json", name)


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
    expected = {"race": ["GL504"], "conditional_unread": ["GL500"]}.get(name, [])
    assert [f.code for f in report.findings] == expected, [f.message for f in report.findings]
    found = [[w.node, w.param, w.offset, w.region, w.delta, w.width] for w in report.input_slots]
    assert found == meta["input_slots"]
    assert found, "every recorded program reads its input"
    if name == "conditional_unread":  # the body reads the input too: top-level slots alone differ from eager
        assert (
            meta["repoint_verified_on_gpu"] == "unread body: re-pointing the top-level slots alone matches eager: False"
        )
        return
    assert meta["repoint_verified_on_gpu"] is True or meta["repoint_verified_on_gpu"] in VERIFIED_ELSEWHERE
    # No word outside an input's byte range in both captures is called an input (a 4-byte field
    # holds the low half of an address inside it).
    for word in report.input_slots:
        if word.width == 4:
            (a, da), (b, db) = (
                analysis._low_region(first, word.first, "input"),
                analysis._low_region(second, word.second, "input"),
            )
            assert a is not None and b is not None and da == db, word
            continue
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


def test_a_difference_that_follows_the_input_addresses_is_noise_and_one_that_follows_the_seeds_is_not() -> None:
    """The moved repeat runs on the second capture's inputs with the first capture's seeds: stack
    bytes left in a struct follow the addresses (as in the second capture), a host value follows
    the seeds (as in the first)."""
    first, second, repeat, _ = _load("mlp")
    node, wide = next((n, i) for n in second.nodes for i, p in enumerate(n.params) if p.size >= 64)
    offset = next(
        o
        for (o, a), (_, b) in zip(first.nodes[node.index].params[wide].words(), node.params[wide].words(), strict=True)
        if a == b
    )
    changed = copy.deepcopy(second)
    param = changed.nodes[node.index].params[wide]
    word = bytes((b + 1) % 256 for b in param.data[offset : offset + 8])
    param.data = param.data[:offset] + word + param.data[offset + 8 :]
    follows_addresses = copy.deepcopy(changed)
    assert analyze_pair(first, changed, ("f.py", 1), "f", repeat, None, follows_addresses).findings == []
    follows_seeds = copy.deepcopy(first)
    found = analyze_pair(first, changed, ("f.py", 1), "f", repeat, None, follows_seeds).findings
    assert [f.code for f in found] == ["GL505"], found


def test_snapshot_json_round_trip(tmp_path: Path) -> None:
    first, _, _, _ = _load("transformer_block")
    again = GraphSnapshot.from_dict(first.to_dict())
    assert again == first
    with pytest.raises(ValueError, match="unsupported snapshot version"):
        GraphSnapshot.from_dict({**first.to_dict(), "version": 99})


def test_a_pointers_low_half_in_a_4_byte_field_is_an_input_slot() -> None:
    """cuDNN's bf16 layout transform on the H200 keeps the input's low 32 bits next to a float in
    its parameter struct; re-pointing must rewrite that field too (verified on the GPU)."""
    report, captures, meta = _report("conv_bf16")
    low = [w for w in report.input_slots if w.width == 4]
    assert low, "the 4-byte field was not found"
    first = captures["first"]
    for word in low:
        assert "cudnn" in first.nodes[word.node].name
        region = first.region_of(first.regions[0].start, ("input",))
        assert word.first == (region.start + word.delta) & 0xFFFFFFFF
    assert meta["repoint_verified_on_gpu"] is True
    assert [w.node for w in low] == [w.node for w in report.input_slots if w.width == 4]
    # The moving field is a pointer, not a baked host value: no GL505 names its node.
    assert not any(f"(node {w.node})" in f.message for f in report.findings for w in low)
    found = [[w.node, w.param, w.offset, w.region, w.delta, w.width] for w in report.input_slots]
    assert found == meta["input_slots"]


def test_a_field_that_only_looks_like_a_low_half_in_one_capture_is_not_a_slot() -> None:
    first, second, _, _ = _load("conv_bf16")
    low = next(w for w in analysis.classify(first, second) if w.width == 4)
    changed = copy.deepcopy(second)
    param = changed.nodes[low.node].params[low.param]
    data = bytearray(param.data)
    data[low.offset : low.offset + 4] = ((low.second + 64) & 0xFFFFFFFF).to_bytes(4, "little")  # another offset
    param.data = bytes(data)
    words = analysis.classify(first, changed)
    assert not any(w.width == 4 and w.role == analysis.INPUT for w in words)


def _renamed(snapshot: GraphSnapshot, index: int, name: str) -> GraphSnapshot:
    renamed = copy.deepcopy(snapshot)
    renamed.nodes[index].name = name
    return renamed


@pytest.mark.parametrize(
    "name",
    [
        "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
        "_Z28ncclDevKernel_AllGather_RING_LL24ncclDevKernelArgsStorageILm4096EE",
        "_ZN4c10d16symmetric_memory26multimem_all_reduce_kernelIfLi16ELi8EEEvPT_mmPPjmm",
        "_ZN4c10d16symmetric_memory26one_shot_all_reduce_kernelIfLi16ELi8EEEvPPT_S3_S3_mmPPjmm",
    ],
)
def test_communication_kernels_pin_their_inputs_and_report_gl507(name: str) -> None:
    first, second, _, _ = _load("mlp")
    slot = analysis.input_slots(analysis.classify(first, second))[0]
    first, second = _renamed(first, slot.node, name), _renamed(second, slot.node, name)
    assert analysis.fixed_address_nodes(first) == {slot.node: name}
    words = analysis.classify(first, second)
    pins = analysis.pins(words, first, output_count=1)
    pin = pins[("input", 0)]
    assert pin.fixed_address and "registered at fixed addresses" in pin.reason and f"node {slot.node}" in pin.reason
    # Exactly the tensors the communication kernel touches are pinned; the rest stay re-pointed.
    touched = {
        (w.role, analysis.tensor_index(w)) for w in words if w.node == slot.node and w.role in ("input", "output")
    }
    assert {key for key, p in pins.items() if p.fixed_address} == touched


@pytest.mark.parametrize("name", PROGRAMS)
def test_no_single_gpu_kernel_is_taken_for_a_communication_kernel(name: str) -> None:
    first, second, _, _ = _load(name)
    assert analysis.fixed_address_nodes(first) == {}
    pins = analysis.pins(analysis.classify(first, second), first, output_count=1)
    assert not any(pin.fixed_address for pin in pins.values())


def test_look_alike_kernel_names_are_not_communication_kernels() -> None:
    first, _, _, _ = _load("mlp")
    for name in (
        "uncclamped_gemm",
        "void at::native::vectorized_elementwise_kernel<4, CUDAFunctor_add<float>>",
        "all_reduce_mean_tree",
    ):
        assert analysis.fixed_address_nodes(_renamed(first, 0, name)) == {}


def test_an_input_only_a_memcpy_reads_is_copied_not_re_pointed() -> None:
    first, second, _, _ = _load("memcpy_memset")
    pins = analysis.pins(analysis.classify(first, second), first, output_count=1)
    assert ("input", 0) in pins and "memcpy" in pins[("input", 0)].reason
    assert not pins[("input", 0)].fixed_address


def test_a_baked_value_that_looks_like_pool_memory_is_still_gl505() -> None:
    """A host value whose 32 bits fall inside some pool segment (modulo 2**32) in each capture
    is not a pointer's low half: with gigabytes of segments almost any value would be."""
    first, second, repeat, _ = _load("compiled")
    node = next(n for n in second.nodes if n.type == "kernel")
    scalar = next(i for i, p in enumerate(node.params) if p.size == 4)  # an int argument
    pool_first = next(r for r in first.regions if r.role == "pool")
    pool_second = next(r for r in second.regions if r.role == "pool")
    changed = [copy.deepcopy(s) for s in (first, second, repeat)]
    values = (pool_first.start + 16, pool_second.start + 48, pool_first.start + 16)  # the repeat: same seeds
    for snapshot, value in zip(changed, values, strict=True):
        param = snapshot.nodes[node.index].params[scalar]
        param.data = (value & 0xFFFFFFFF).to_bytes(4, "little") + param.data[4:]
    report = analyze_pair(*changed[:2], ("f.py", 1), "f", changed[2])
    assert [f.code for f in report.findings] == ["GL505"]


# -- two ranks with NCCL collectives (issue 20), recorded by scripts/record_multigpu.py ------------

MULTIGPU = SNAPSHOTS / "multigpu"
RECORDER = SNAPSHOTS.parent.parent / "scripts" / "record_multigpu.py"
# program -> the inputs/outputs a collective reads or writes directly (pinned, GL507) and the
# findings the pair of captures must give (GL508 is the live sanitizer's, not the pair's)
TWO_RANK = {
    "allreduce": (set(), []),  # y = x * 2; all_reduce(y); y + 1: the collective's buffer is internal
    "allgather": ({("input", 0), ("output", 0)}, []),  # all_gather_into_tensor(g, x); g, g * 2 + b
    "ddp_step": ({("output", 1)}, []),  # the averaged gradient bucket is returned
    "tp_pair": (set(), []),  # the bias is added after the all_reduce
    "race_allreduce": (set(), ["GL504"]),  # a side stream writes what the all_reduce reads, unjoined
}
TWO_RANK_FILES = [(name, rank) for name in TWO_RANK for rank in (0, 1)]


def _two_rank(name: str, rank: int):
    path = MULTIGPU / f"{name}-rank{rank}.json"
    if not path.exists():
        pytest.skip(f"two-rank snapshots not recorded yet ({path.relative_to(SNAPSHOTS.parent.parent)})")
    return _analysed(path, name)


def test_the_recorder_writes_the_files_these_tests_read() -> None:
    source = RECORDER.read_text()
    assert 'SNAPSHOT_DIR = "multigpu"' in source and 'f"{name}-rank{rank}.json"' in source
    for name in TWO_RANK:
        assert f'"{name}": {{' in source, name
    for variable in ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS"):
        assert variable in source.split("import torch")[0], f"{variable} must be set before torch is imported"


@pytest.mark.parametrize(("name", "rank"), TWO_RANK_FILES)
def test_two_rank_snapshots_carry_their_provenance(name: str, rank: int) -> None:
    _, captures, meta = _two_rank(name, rank)
    assert meta["program"] == name and meta["rank"] == rank and meta["world_size"] == 2
    for snapshot in captures.values():
        provenance = snapshot.provenance
        assert provenance["rank"] == rank and provenance["world_size"] == 2 and provenance["backend"] == "nccl"
        assert provenance["device_count"] >= 2 and provenance["local_device"] == rank
        assert provenance["nccl"][0].isdigit() and provenance["torch"] and provenance["recorded"]
        assert provenance["env"] == {
            "NCCL_NVLS_ENABLE": "0",
            "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
            "NVSHMEM_DISABLE_NVLS": "1",
        }


# An elementwise kernel's by-value struct in ddp_step and tp_pair has bytes that differ between the
# first and second capture but not in the repeat (stack bytes past an OffsetCalculator's dims, stack
# addresses among them): `uninitialised_structs` tells them from host values.
@pytest.mark.parametrize(("name", "rank"), TWO_RANK_FILES)
def test_two_rank_captures_give_no_gl501_or_gl505_from_the_collectives(name: str, rank: int) -> None:
    report, captures, _ = _two_rank(name, rank)
    first = captures["first"]
    assert analysis.fixed_address_nodes(first), "no NCCL kernel node was recognised"
    assert [f.code for f in report.findings] == TWO_RANK[name][1], [f.message for f in report.findings]
    # The repeat capture is the same graph, so argument noise was measured, not guessed.
    assert analysis.compare_structure(first, captures["repeat"]) == []


@pytest.mark.parametrize(("name", "rank"), TWO_RANK_FILES)
def test_two_rank_compute_kernels_have_input_slots_around_the_collectives(name: str, rank: int) -> None:
    report, captures, meta = _two_rank(name, rank)
    first, second = captures["first"], captures["second"]
    communication = analysis.fixed_address_nodes(first)
    compute = [w for w in report.input_slots if w.node not in communication]
    assert compute, "no compute kernel's input pointer was found"
    assert all(first.nodes[w.node].type == "kernel" for w in compute)
    found = [[w.node, w.param, w.offset, w.region, w.delta, w.width] for w in report.input_slots]
    assert found == meta["input_slots"], "the analysis no longer finds the slots it found when recording"
    for word in report.input_slots:  # inside the same input at the same offset in both captures
        a, b = first.region_of(word.first, ("input",)), second.region_of(word.second, ("input",))
        assert a is not None and b is not None and a.name == b.name and word.first - a.start == word.second - b.start


@pytest.mark.parametrize(("name", "rank"), TWO_RANK_FILES)
def test_two_rank_collective_buffers_are_pinned_and_only_those(name: str, rank: int) -> None:
    _, captures, meta = _two_rank(name, rank)
    first, second = captures["first"], captures["second"]
    words = analysis.classify(first, second)
    pins = analysis.pins(words, first, output_count=meta["outputs"], ordering=captures.get("ordering"))
    fixed = {key for key, pin in pins.items() if pin.fixed_address}
    assert fixed == TWO_RANK[name][0], {key: pin.reason for key, pin in pins.items()}
    for key in fixed:
        assert "registered at fixed addresses" in pins[key].reason and "nccl" in pins[key].reason.lower()
    # Everything a communication kernel's arguments point at is either pinned or internal memory.
    communication = analysis.fixed_address_nodes(first)
    for word in words:
        if word.node in communication and word.role in (analysis.INPUT, analysis.OUTPUT):
            assert (word.role, analysis.tensor_index(word)) in fixed


@pytest.mark.parametrize(("name", "rank"), TWO_RANK_FILES)
def test_two_rank_gl504_is_judged_around_the_collectives(name: str, rank: int) -> None:
    report, captures, meta = _two_rank(name, rank)
    assert meta["ordering_checked"] and "ordering" in captures
    ordering = captures["ordering"]
    for index in analysis.fixed_address_nodes(captures["first"]):
        node = ordering.nodes[index]
        assert node.op.startswith("c10d."), f"NCCL node {index} not attributed to its c10d operator: {node.op!r}"
        assert node.reads or node.writes
    races = [f for f in report.findings if f.code == "GL504"]
    if name == "race_allreduce":
        assert len(races) == 1
        assert "aten.mul.out" in races[0].message and "c10d.allreduce_" in races[0].message
    else:
        assert races == []


def test_a_communication_kernels_arguments_that_differ_between_captures_are_not_gl505() -> None:
    """NCCL's arguments hold its own per-capture values (work storage, offsets into buffers it
    registered); a word that differs only in the moved capture is GL505 on a compute kernel
    and nothing on a collective, whose buffers are pinned anyway."""
    first, second, repeat, _ = _load("compiled")
    node = next(n for n in second.nodes if n.type == "kernel")
    scalar = next(i for i, p in enumerate(node.params) if 2 <= p.size <= 8)
    changed = copy.deepcopy(second)
    param = changed.nodes[node.index].params[scalar]
    param.data = bytes((b + 1) % 256 for b in param.data)
    assert [f.code for f in analyze_pair(first, changed, ("f.py", 1), "f", repeat).findings] == ["GL505"]
    nccl = "_Z39ncclDevKernel_AllGather_RING_LL24ncclDevKernelArgsStorageILm4096EE"
    renamed = [_renamed(s, node.index, nccl) for s in (first, changed, repeat)]
    assert analyze_pair(*renamed[:2], ("f.py", 1), "f", renamed[2]).findings == []


def test_a_gather_s_offset_calculators_hold_stack_bytes_that_are_never_gl505() -> None:
    # Recorded on an H100: the words that differ between the captures are what the host stack
    # left in by-value structs. The repeats measured all of them this time; in the gather's and
    # the index's OffsetCalculators (unfilled dimensions) the stack addresses among them tell the
    # same without the repeats, as they must when a repeat happens to agree. The arange kernel's
    # small struct holds no address: only the repeats can tell its differing word is not a value.
    report, captures, _ = _report("gather")
    assert [f.code for f in report.findings] == []
    words = analysis.classify(captures["first"], captures["second"])
    assert analysis.uninitialised_structs(words) == {(1, 1), (2, 1)}
    unmeasured = analysis.baked_host_values(words, noise=set())
    assert [(w.node, w.param_size) for w in unmeasured] == [(0, 24)]
