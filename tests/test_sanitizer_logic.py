"""The runtime sanitizer's pure decisions, on plain values (no GPU): whether it may run on the
installed versions, which findings a user sees, and the graphed-gradient aliasing judgement."""

from __future__ import annotations

import sys

import pytest

from graphlint.runtime_sanitizer import availability

TESTED = {"torch": "2.11.0+cu130", "CUDA": "13.0", "cuda-bindings": "13.3.1"}


def test_the_tested_matrix_runs_without_a_note() -> None:
    assert availability.decide(TESTED, has_device=True, override=False) == availability.Availability()


@pytest.mark.parametrize(
    ("name", "version"),
    [
        ("torch", "2.13.0+cu130"),
        ("torch", "2.1.0"),
        ("CUDA", "12.8"),
        ("cuda-bindings", "12.9.0"),
        ("cuda-bindings", None),
    ],
)
def test_an_untested_version_refuses_and_names_it(name: str, version: str | None) -> None:
    state = availability.decide({**TESTED, name: version}, has_device=True, override=False)
    assert not state.active
    assert f"{name} {version or 'not installed'}" in state.reason
    assert "torch 2.11 + CUDA 13.0" in state.reason and availability.UNTESTED_ENV in state.reason


def test_the_override_runs_on_untested_versions_and_says_so() -> None:
    state = availability.decide({**TESTED, "torch": "2.13.0"}, has_device=True, override=True)
    assert state.active and "torch 2.13.0" in state.untested


def test_no_device_and_no_torch_come_before_versions() -> None:
    assert availability.decide({**TESTED, "torch": "2.13.0"}, False, False).reason == "no CUDA device"
    assert availability.decide({"torch": None}, True, False).reason == "torch is not installed"


def test_a_version_matches_its_prefix_only_at_a_boundary() -> None:
    assert availability.untested_versions({**TESTED, "torch": "2.110.0"}) == ["torch 2.110.0"]


def test_pyproject_runtime_extra_keeps_to_the_tested_matrix() -> None:
    from pathlib import Path

    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib

    project = tomllib.loads((Path(__file__).resolve().parent.parent / "pyproject.toml").read_text())
    runtime = project["project"]["optional-dependencies"]["runtime"]
    assert "torch>=2.11,<2.12" in runtime and "cuda-bindings>=13,<14" in runtime


# -- GL509: graphed gradients aliasing the static buffer ---------------------------------------

BUFFER = [(0x7000_0000, 4096), (0x7100_0000, 1024)]  # the backward graph's static outputs


def _records(**grads: int | None) -> list:
    from graphlint.runtime_sanitizer.analysis.grad_alias import GradRecord

    return [GradRecord(name.replace("_", "."), address) for name, address in grads.items()]


def test_grads_inside_the_static_buffer_are_aliased_and_cleared_or_copied_ones_are_not() -> None:
    from graphlint.runtime_sanitizer.analysis.grad_alias import aliased_grads

    records = _records(fc1_weight=0x7000_0000, fc1_bias=0x7000_0400, fc2_weight=None, fc2_bias=0x9000_0000)
    assert aliased_grads(records, BUFFER) == ("fc1.weight", "fc1.bias")
    assert aliased_grads(_records(fc1_weight=0x7000_0000 + 4096), BUFFER) == ()  # one past the end


def test_a_parameter_is_named_once_per_graph() -> None:
    from graphlint.runtime_sanitizer.analysis.grad_alias import GradAliasTracker

    tracker = GradAliasTracker()
    records = _records(fc1_weight=0x7000_0000, fc2_weight=0x7100_0000)
    assert tracker.judge(1, records, BUFFER) == ("fc1.weight", "fc2.weight")
    assert tracker.judge(1, records, BUFFER) == ()  # the next accumulation step: already reported
    assert tracker.judge(1, _records(fc1_weight=0x7000_0000, fc2_weight=None), BUFFER) == ()  # a subset: no news
    assert tracker.judge(2, records, BUFFER) == ("fc1.weight", "fc2.weight")  # another graph
    assert tracker.judge(1, _records(fc1_weight=None, fc2_weight=None), BUFFER) == ()


def test_the_message_names_parameters_graph_replay_and_fix() -> None:
    from graphlint.runtime_sanitizer.analysis.grad_alias import grad_alias_message

    text = grad_alias_message(("fc1.weight", "fc1.bias"), "graph made by make_graphed_callables at t.py:9", 2)
    for part in ("`fc1.weight`, `fc1.bias`", "t.py:9", "replay 2", "set_to_none=True", "pytorch#181723"):
        assert part in text


def test_zeroing_an_aliased_grad_in_place_still_corrupts_it() -> None:
    """Why GL509 judges the alias, not whether the values were zeroed: a CPU model of the
    graphed backward (it writes a persistent buffer and returns it detached) shows autograd
    adopting the buffer as `.grad` and then adding the buffer onto itself."""
    torch = pytest.importorskip("torch", reason="needs torch")
    buffer = torch.zeros(3)

    class StaticGradient(torch.autograd.Function):
        @staticmethod
        def forward(ctx, w):
            return w * 1.0

        @staticmethod
        def backward(ctx, grad):
            buffer.copy_(grad)  # the replay writes the static gradient buffer
            return buffer.detach()

    def run(clear) -> list[float]:
        w = torch.zeros(3, requires_grad=True)
        for step in range(4):
            if step:
                clear(w)
            StaticGradient.apply(w).sum().backward()
        return w.grad.tolist()

    assert run(lambda w: w.grad.zero_()) == [2.0] * 3  # not 1: the alias doubles the newest gradient
    assert run(lambda w: None) == [2.0] * 3  # not 4: the accumulated sum is lost
    assert run(lambda w: setattr(w, "grad", None)) == [1.0] * 3  # cleared to None: correct


# -- what users see: locations, merged duplicates, suppressions --------------------------------


def _finding(path: str, line: int, code: str = "GL503", message: str = "an output of replay 1 is read"):
    from graphlint.runtime_sanitizer.analysis.report import rule_finding
    from graphlint.runtime_sanitizer.rules import STALE_OUTPUT_READ

    finding = rule_finding(STALE_OUTPUT_READ, message, (path, line))
    return finding if code == "GL503" else finding.__class__(**{**finding.to_dict(), "code": code, "fix": None})


def test_identical_findings_are_merged_with_a_count() -> None:
    from graphlint.runtime_sanitizer.analysis.postprocess import finish

    found = finish([_finding("a.py", 3)] * 4 + [_finding("a.py", 4)])
    assert [(f.line, f.message) for f in found] == [
        (3, "an output of replay 1 is read (4 times)"),
        (4, "an output of replay 1 is read"),
    ]


def test_runtime_findings_are_suppressed_on_the_reported_line(tmp_path) -> None:
    from graphlint.runtime_sanitizer.analysis.postprocess import finish

    program = tmp_path / "prog.py"
    program.write_text(
        "a = 1  # noqa: GL503\nb = 2  # graphlint: ignore[GL503]\nc = 3  # noqa: GL506\nd = 4\n", encoding="utf-8"
    )
    found = finish([_finding(str(program), line) for line in (1, 2, 3, 4)], ignored=())
    assert [f.line for f in found] == [3, 4]
    assert finish([_finding(str(program), 4)], ignored=["GL503"]) == []
    skipped = tmp_path / "skipped.py"
    skipped.write_text("# graphlint: skip-file\nx = 1\n", encoding="utf-8")
    assert finish([_finding(str(skipped), 2)]) == []
    assert [f.path for f in finish([_finding("<string>", 1)])] == ["<string>"]  # no file: kept


def test_the_user_line_is_the_innermost_frame_outside_torch_and_graphlint() -> None:
    pytest.importorskip("torch", reason="needs torch: torch's own frames are told apart by its folder")
    from graphlint.runtime_sanitizer.guard.sites import innermost_user_frame

    path, line = innermost_user_frame()
    assert (
        path == __file__
        and line == test_the_user_line_is_the_innermost_frame_outside_torch_and_graphlint.__code__.co_firstlineno + 4
    )


def test_on_a_thread_without_user_frames_the_backward_call_is_the_user_line() -> None:
    """Autograd runs CUDA backward on its own thread, where no user frame exists: the finding
    goes to the line that called backward(), recorded while the guard is installed."""

    torch = pytest.importorskip("torch", reason="needs torch")
    from concurrent.futures import ThreadPoolExecutor

    from graphlint.runtime_sanitizer.guard.replay_guard import ReplayGuard
    from graphlint.runtime_sanitizer.guard.sites import user_site

    seen = []

    class EngineThread(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            with ThreadPoolExecutor(1) as pool:  # a thread whose only frames are the library's
                seen.append(pool.submit(user_site).result())
            return grad * 2

    x = torch.ones(2, requires_grad=True)
    original = torch.Tensor.backward
    with ReplayGuard():
        EngineThread.apply(x).sum().backward()
        backward_line = sys._getframe().f_lineno - 1
    assert seen == [(__file__, backward_line)]
    assert torch.Tensor.backward is original  # uninstall restores torch


# -- plain captures: ordering and refusals -----------------------------------------------------


def _race_ordering():
    from pathlib import Path

    from graphlint.runtime_sanitizer.analysis.snapshot import load_captures

    captures, _ = load_captures(Path(__file__).resolve().parent.parent / "fixtures" / "snapshots" / "race.json")
    return captures["ordering"]


def test_a_plain_capture_with_an_unjoined_side_stream_is_gl504_at_the_capture_line() -> None:
    from graphlint.runtime_sanitizer.analysis.report import ordering_findings

    found = ordering_findings(_race_ordering(), "graph captured at prog.py:7", ("prog.py", 7))
    assert [(f.code, f.path, f.line) for f in found] == [("GL504", "prog.py", 7)]
    assert "graph captured at prog.py:7" in found[0].message


def test_nodes_no_operator_launched_make_the_ordering_unknown() -> None:
    import copy

    from graphlint.runtime_sanitizer.analysis.two_capture import unattributed_nodes

    snapshot = _race_ordering()
    assert unattributed_nodes(snapshot) == []
    triton = copy.deepcopy(snapshot)
    triton.nodes[1].op = ""  # e.g. a Triton kernel: launched outside ATen's dispatcher
    assert [n.index for n in unattributed_nodes(triton)] == [1]


def test_without_cuda_bindings_a_plain_capture_is_refused_with_the_reason(monkeypatch) -> None:
    from graphlint.runtime_sanitizer import driver
    from graphlint.runtime_sanitizer.capture.plain_capture import CaptureOrdering, Refused

    def missing():
        raise driver.IntrospectionError("cuda-bindings is not installed")

    monkeypatch.setattr(driver, "bindings", missing)
    ordering = CaptureOrdering()
    ordering.start()
    with pytest.raises(Refused, match="cuda-bindings is not installed"):
        ordering.finish(0)


def test_graph_counts_name_every_refusal() -> None:
    from graphlint.runtime_sanitizer.analysis.graph_counts import GraphCounts

    counts = GraphCounts(seen=3, analysed=2, refused=[("graph captured at p.py:4", "2 of 5 nodes ... unknown")])
    again = GraphCounts.from_dict(counts.to_dict())
    assert again == counts
    assert counts.summary().splitlines() == [
        "3 graphs seen, 2 analysed, 1 refused",
        "  refused: graph captured at p.py:4: 2 of 5 nodes ... unknown",
    ]


def test_graph_pool_memory_finding_is_informational_and_names_both_sizes() -> None:
    from graphlint.runtime_sanitizer.analysis.report import memory_finding

    finding = memory_finding(3 << 20, 1 << 19, ("train.py", 12), "Block")
    assert (finding.code, finding.path, finding.line, finding.informational) == ("GL508", "train.py", 12, True)
    assert "3.0 MiB in its private pool" in finding.message and "give back 512.0 KiB" in finding.message


@pytest.mark.parametrize(
    ("count", "text"),
    [(0, "0 bytes"), (1000, "1000 bytes"), (1536, "1.5 KiB"), (34 << 20, "34.0 MiB"), (3 << 30, "3.0 GiB")],
)
def test_graph_pool_sizes_keep_small_outputs_visible(count: int, text: str) -> None:
    """A training graph frees a few kilobytes of outputs; `0.0 MiB` read as nothing at all."""
    from graphlint.runtime_sanitizer.analysis.report import byte_size

    assert byte_size(count) == text


# -- GL503: a static output kept across replays ------------------------------------------------


class _Output:
    """A stand-in for a static output tensor: the check only compares identities."""


def test_kept_count_counts_the_object_itself_and_tuples_holding_it() -> None:
    from collections import OrderedDict, deque

    from graphlint.runtime_sanitizer.analysis.kept_outputs import holders, kept_count

    out, other = _Output(), _Output()
    assert kept_count([out, out, other], out) == 2
    assert kept_count(deque([out, (1, out), (2, other)]), out) == 2
    assert kept_count({0: out, 1: out, out: 3}, out) == 2  # values, not keys
    assert kept_count(OrderedDict(a=other), out) == 0
    kept, pair, namespace = [out, out], (out, out), {"__builtins__": {}, "a": out, "b": out}
    found = holders(out, [kept, pair, namespace, kept, object(), [other]])
    assert found == [(kept, 2)]  # tuples cannot grow, module globals are names, each container once
    assert holders(out, [kept], skip=[id(kept)]) == []


def _replay_loop(keep, replays: int = 3):
    """Replays with the watch before each; `keep(out, i)` runs after replay i. The findings."""
    import sys

    from graphlint.runtime_sanitizer.analysis.kept_outputs import KeptWatch

    out, watch, found = _Output(), KeptWatch(), []
    for i in range(replays):
        found += [(type(c).__name__, n, i + 1) for c, n in watch.check(out, sys.getrefcount(out))]
        keep(out, i)
    return found


def test_the_same_output_kept_across_replays_is_found_once_at_the_third_replay() -> None:
    from collections import deque

    kept, history, ring, steps = [], {}, deque(maxlen=2), []
    assert _replay_loop(lambda out, i: kept.append(out)) == [("list", 2, 3)]
    assert _replay_loop(lambda out, i: history.__setitem__(i, out), replays=6) == [("dict", 2, 3)]
    assert _replay_loop(lambda out, i: ring.append(out)) == [("deque", 2, 3)]
    assert _replay_loop(lambda out, i: steps.append((i, out))) == [("list", 2, 3)]


def test_copies_single_references_and_structures_built_once_are_not_found() -> None:
    import copy

    copies, latest, pairs, names = [], {}, [], type("Holder", (), {})()
    assert _replay_loop(lambda out, i: copies.append(copy.copy(out)), replays=5) == []
    assert _replay_loop(lambda out, i: latest.__setitem__("out", out), replays=5) == []  # always the newest
    # a pair made once (two references in one tuple, never growing)
    assert _replay_loop(lambda out, i: pairs.append((out, out)) if i == 0 else None, replays=5) == []
    assert _replay_loop(lambda out, i: setattr(names, f"out{i}", out), replays=5) == []  # attributes


def test_the_heap_is_scanned_only_when_references_were_added() -> None:
    from graphlint.runtime_sanitizer.analysis.kept_outputs import MAX_SCANS, KeptWatch

    watch = KeptWatch()
    assert not watch.wants_scan(3)  # the first replay sets the mark
    assert not watch.wants_scan(3) and not watch.wants_scan(2)
    assert watch.wants_scan(4) and not watch.wants_scan(4)
    for refcount in range(5, 5 + 2 * MAX_SCANS):
        watch.wants_scan(refcount)
    assert watch.scans == MAX_SCANS  # a bounded number of scans without a finding
    reported = KeptWatch(high_water=1)
    kept = [1]
    reported.judge([(kept, 1)])
    assert reported.judge([(kept, 2)]) == [(kept, 2)] and reported.done
    assert not reported.wants_scan(10)  # never scanned again once reported


def test_attribute_dicts_are_told_from_collections() -> None:
    from graphlint.runtime_sanitizer.analysis.kept_outputs import is_attribute_dict

    holder = type("Holder", (), {})()
    holder.a = 1
    assert is_attribute_dict(vars(holder)) and is_attribute_dict(vars(sys))
    assert not is_attribute_dict({"a": 1}) and not is_attribute_dict([1])


def test_the_guard_reports_a_kept_static_output_as_gl503_with_the_container() -> None:
    """The guard's per-replay check on a CPU tensor standing in for a captured static output."""
    torch = pytest.importorskip("torch", reason="needs torch")
    import weakref

    from graphlint.runtime_sanitizer.analysis.kept_outputs import KeptWatch
    from graphlint.runtime_sanitizer.guard.graph_state import GraphState
    from graphlint.runtime_sanitizer.guard.replay_guard import ReplayGuard

    def loop(keep):
        guard = ReplayGuard()
        static_out = torch.zeros(4, 16)
        state = GraphState("graph captured at prog.py:7", outputs=[(weakref.ref(static_out), KeptWatch())])
        kept = []
        for _ in range(4):
            state.replays += 1
            guard._check_kept(state)
            kept.append(keep(static_out))
        return guard.findings

    (finding,) = loop(lambda out: out)
    assert (finding.code, finding.path) == ("GL503", __file__)
    assert "graph captured at prog.py:7" in finding.message and "float32 tensor of shape (4, 16)" in finding.message
    assert "kept 2 times in one list" in finding.message and ".clone()" in finding.message
    assert loop(lambda out: out.clone()) == []


def test_gl506_needs_still_version_counters_and_still_contents() -> None:
    """A buffer refilled behind autograd's version counter (through `.data`, another tensor on
    the same storage, an extension) is new data: not GL506. Truly unchanged inputs are."""
    torch = pytest.importorskip("torch")
    import weakref

    from graphlint.runtime_sanitizer.guard.graph_state import GraphState
    from graphlint.runtime_sanitizer.guard.replay_guard import ReplayGuard

    def replays(write_behind_counter: bool) -> list[str]:
        graph, x = object(), torch.zeros(4)
        with ReplayGuard() as guard:
            guard._graphs[id(graph)] = GraphState("graph under test", [(weakref.ref(x), x._version)])
            for step in range(4):
                if write_behind_counter:
                    x.data.fill_(float(step))  # new contents, same version counter
                guard._before_replay(graph)
        return [f.code for f in guard.findings]

    assert replays(write_behind_counter=False) == ["GL506"]
    assert replays(write_behind_counter=True) == []


# -- what PyTorch's own graph tests taught (test_cuda.py -k graph) ------------------------------


def test_two_kernels_of_one_operator_call_are_not_a_race_but_two_calls_are_one_finding() -> None:
    import copy

    from graphlint.runtime_sanitizer.analysis.report import ordering_findings

    racy = _race_ordering()
    a, b = (n for n in racy.nodes if n.reads or n.writes)
    assert len(ordering_findings(racy, "g", ("prog.py", 7))) == 1
    one_call = copy.deepcopy(racy)  # cuDNN's RNN: one call's kernels on its internal streams
    for node in one_call.nodes:
        node.call = 0
    assert ordering_findings(one_call, "g", ("prog.py", 7)) == []
    # Two calls of several kernels each, all unordered: one finding for the pair of calls.
    doubled = copy.deepcopy(racy)
    for node in doubled.nodes:
        node.call = 0 if node.index == a.index else 1
    extra = copy.deepcopy(doubled.nodes[b.index])
    extra.index = len(doubled.nodes)
    doubled.nodes.append(extra)
    (finding,) = ordering_findings(doubled, "g", ("prog.py", 7))
    assert "(2 pairs of these two operators' nodes)" in finding.message


def _word(first: int, second: int, offset: int = 0, size: int = 400):
    from graphlint.runtime_sanitizer.analysis import two_capture as analysis

    return analysis.Word(2, 1, offset, analysis.UNEXPLAINED, None, None, first, second, size)


def test_a_struct_whose_differing_bytes_hold_a_stack_address_is_not_gl505() -> None:
    from graphlint.runtime_sanitizer.analysis.two_capture import baked_host_values

    # An OffsetCalculator's sizes past its dims: what the host stack held, addresses among it.
    garbage = [_word(0x17FFFA742EA40, 0x1000000000050, 8), _word(0x4000000000000000, 0x322EA820, 16)]
    assert baked_host_values(garbage, set()) == []
    # A Python scalar baked into a struct with no such bytes is still GL505.
    scalar = [_word(0x3FF0000000000000, 0x4000000000000000, 8)]
    assert baked_host_values(scalar, set()) == scalar
    # and a whole 8-byte argument that happens to look like an address is judged as before
    small = [_word(0x7F85D1404AC0, 0x7F8507C20EF4, 0, 8)]
    assert baked_host_values(small, set()) == small


class _Notes:
    """The guard's handle checks, counting which results the mode calls new."""

    def __init__(self) -> None:
        self.new: list = []

    def _check_read(self, tensor) -> None:
        pass

    def _note_new(self, tensor) -> None:
        self.new.append(tensor)

    def _before_op(self, func, tensors) -> None:
        pass

    def _after_op(self, func, tensors, results) -> None:
        pass


def test_an_in_place_refill_is_not_a_new_handle_but_a_view_is() -> None:
    torch = pytest.importorskip("torch", reason="needs torch")
    from graphlint.runtime_sanitizer.guard.dispatch_modes import HandleWatch

    static = torch.zeros(8)
    notes = _Notes()
    with HandleWatch(notes):
        static.copy_(torch.ones(8))  # refilling a static input: the same tensor
        torch.add(static, 1, out=static)
        view = static[:4]
    assert not any(t is static for t in notes.new)
    assert any(t is view for t in notes.new)


def test_the_capture_recorder_notes_random_operators() -> None:
    torch = pytest.importorskip("torch", reason="needs torch")
    from graphlint.runtime_sanitizer.guard.dispatch_modes import CaptureRecorder

    with CaptureRecorder() as plain:
        torch.ones(4) * 2
    with CaptureRecorder() as random:
        torch.nn.functional.dropout(torch.ones(4), 0.5)
    assert not plain.draws_random
    assert random.draws_random
