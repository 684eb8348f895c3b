"""Triton kernels in a capture get reads and writes from their signatures (CPU: fake launchers).

Inductor's kernels are launched from Python, so a compiled graph's nodes had no accesses and
the ordering check refused the graph. These tests drive the wrappers with stand-ins for
Inductor's autotuner and Triton's JITFunction: the roles come from the names, the original
launch runs unchanged, and the wrappers are gone when the recording stops. On the GPU,
tests/test_triton_graphs_cuda.py runs real compiled graphs through the guard.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import ClassVar

import pytest

from graphlint.runtime_sanitizer.analysis.kernel_signatures import BOTH, READ, WRITE, argument_roles
from graphlint.runtime_sanitizer.capture.triton_launches import TritonLaunches


def test_inductor_names_say_what_is_read_and_written() -> None:
    names = ["in_ptr0", "in_out_ptr0", "out_ptr0", "out_ptr1", "ws_ptr", "xnumel"]
    roles = argument_roles(names, mutated=("in_out_ptr0", "out_ptr1"), inductor=True)
    assert roles == [READ, BOTH, WRITE, BOTH, BOTH, BOTH]


def test_an_input_inductor_lists_as_mutated_is_written_too() -> None:
    assert argument_roles(["in_ptr2"], mutated=("in_ptr2",), inductor=True) == [BOTH]


def test_a_hand_written_kernel_reads_and_writes_everything_it_is_given() -> None:
    assert argument_roles(["x_ptr", "out_ptr", "in_ptr0"], inductor=False) == [BOTH, BOTH, BOTH]


class _Autotuner:
    """Stands in for Inductor's CachingAutotuner: `run(*args, stream=...)` launches one kernel."""

    triton_meta: ClassVar[dict] = {
        "signature": {"in_ptr0": "*fp32", "out_ptr0": "*fp32", "xnumel": "i32", "XBLOCK": "constexpr"}
    }
    mutated_arg_names: ClassVar[list[str]] = []
    launched: ClassVar[list[tuple]] = []

    fn = SimpleNamespace(__name__="triton_poi_fused_sin_0")  # a JITFunction there

    def run(self, *args, stream, **kwargs):
        _Autotuner.launched.append((args, stream))
        _NODES.append(1)
        return "done"


class _Subclass(_Autotuner):
    def run(self, *args, stream, **kwargs):
        return super().run(*args, stream=stream, **kwargs)


_NODES: list[int] = []


def _record(targets):
    noted: list[tuple] = []
    launches = TritonLaunches(
        lambda *note: noted.append(note),
        count=lambda: len(_NODES),
        ranges=lambda value: [(value, 8)] if isinstance(value, int) and value >= 0x1000 else [],
        targets=targets,
    )
    return launches, noted


def test_a_launch_is_noted_with_the_nodes_it_added_and_its_accesses() -> None:
    _NODES.clear()
    launches, noted = _record([(_Autotuner, True)])
    with launches:
        assert _Autotuner().run(0x1000, 0x2000, 64, stream=7) == "done"
    assert _Autotuner.launched[-1] == ((0x1000, 0x2000, 64), 7), "the launch ran with the same arguments"
    assert noted == [("triton triton_poi_fused_sin_0", 0, 1, [(0x1000, 8)], [(0x2000, 8)])]


def test_the_wrappers_are_removed_when_the_recording_stops() -> None:
    original = _Autotuner.__dict__["run"]
    launches, noted = _record([(_Autotuner, True)])
    with launches:
        assert _Autotuner.__dict__["run"] is not original
    assert _Autotuner.__dict__["run"] is original
    _Autotuner().run(0x1000, 0x2000, 1, stream=0)
    assert noted == [], "a launch after the recording is not noted"


def test_a_subclass_calling_the_base_run_is_noted_once() -> None:
    _NODES.clear()
    launches, noted = _record([(_Autotuner, True), (_Subclass, True)])
    with launches:
        _Subclass().run(0x1000, 0x2000, 64, stream=0)
    assert len(noted) == 1 and noted[0][1:3] == (0, 1)


class _JITFunction:
    """Stands in for triton.runtime.jit.JITFunction: a kernel written by hand."""

    arg_names: ClassVar[list[str]] = ["x_ptr", "y_ptr", "n", "BLOCK"]
    __name__ = "add_kernel"

    def run(self, *args, grid, warmup, **kwargs):
        _NODES.append(1)


def test_a_hand_written_kernel_reads_and_writes_its_tensors_keywords_included() -> None:
    _NODES.clear()
    launches, noted = _record([(_JITFunction, False)])
    with launches:
        _JITFunction().run(0x1000, y_ptr=0x3000, n=16, BLOCK=128, grid=(1,), warmup=False)
    name, before, after, reads, writes = noted[0]
    assert name == "triton add_kernel" and (before, after) == (0, 1)
    assert reads == writes == [(0x1000, 8), (0x3000, 8)]


class _OddAutotuner(_Autotuner):
    triton_meta: ClassVar[dict] = {"signature": None}  # a layout this graphlint does not know

    def run(self, *args, stream, **kwargs):
        return super().run(*args, stream=stream, **kwargs)


def test_a_signature_that_cannot_be_read_never_breaks_the_launch_and_is_unreadable() -> None:
    _NODES.clear()
    launches, noted = _record([(_OddAutotuner, True)])
    with launches:
        assert _OddAutotuner().run(0x1000, 0x2000, 64, stream=0) == "done"
    assert noted == [("triton kernel", None, None, [], [])], "the recorder counts it unreadable: the graph is refused"


def test_only_modules_the_program_loaded_are_wrapped(monkeypatch) -> None:
    """Importing Inductor or Triton at a capture's start could touch the device mid-capture."""
    import sys

    from graphlint.runtime_sanitizer.capture.triton_launches import launch_targets

    monkeypatch.delitem(sys.modules, "triton.runtime.jit", raising=False)
    monkeypatch.setitem(
        sys.modules, "torch._inductor.runtime.triton_heuristics", SimpleNamespace(CachingAutotuner=_Autotuner)
    )
    assert launch_targets() == [(_Autotuner, True)]
    monkeypatch.delitem(sys.modules, "torch._inductor.runtime.triton_heuristics")
    assert launch_targets() == []
    assert "torch._inductor.runtime.triton_heuristics" not in sys.modules, "looking imported nothing"


def test_the_guard_takes_from_the_recording_only_what_triton_kernels_write() -> None:
    """An ATen operator's outputs are listed with its writes and may be views of what it only
    read, so the guard keeps its own mode's schema writes for operators and takes from the
    recording only the Triton kernels' (a KV cache a compiled decode step appends to:
    tests/test_poison.py shows what poisoning it would do)."""
    pytest.importorskip("torch", reason="the recording is a torch dispatch mode")
    from graphlint.runtime_sanitizer.capture.plain_capture import CaptureOrdering
    from graphlint.runtime_sanitizer.capture.two_captures import _OpRecorder

    recorder = _OpRecorder()
    recorder.note_launch("triton triton_poi_fused_index_put_0", (1, 0), (1, 1), [(0x1000, 8)], [(0x2000, 64)])
    recorder.note_launch("aten.mm.default", (1, 1), (1, 2), [(0x1000, 8)], [(0x3000, 8)])
    recorder.note_launch("triton triton_per_fused_sum_1", (1, 2), (1, 2), [], [(0x4000, 8)])  # added no node
    ordering = CaptureOrdering()
    ordering._recorder = recorder
    assert ordering.triton_writes() == [(0x2000, 64)]
    assert CaptureOrdering().triton_writes() == []  # nothing recorded: nothing known
