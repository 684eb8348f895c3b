"""Python's cyclic garbage collector held off while a stream captures; its youngest generation
collected once it ends.

A collection destroys any CUDA graph left in a reference cycle (each graph that
`make_graphed_callables` builds is one: its autograd Function class holds it; so is one kept by
an object that refers to itself, like tensordict's `CudaGraphModule` through its bound
`_call_func`), and destroying a graph while a stream captures invalidates the capture
(`cudaErrorStreamCaptureInvalidated`, after torch's warning "operation not permitted when stream
is capturing (function reset)"). Without the guard a capture allocates few Python objects, so a
collection seldom falls inside it; under the guard every operation passes through its dispatch
modes, which allocate, so one does: on an H100 (torch 2.11), tensordict's
`TestCudaGraphs::test_tdmodule`, which drops two graphed modules before capturing a third,
failed that way under the sanitizer only. `torch.cuda.graph` no longer collects on entry unless
`torch.compiler.config.force_cudagraph_gc` is set, so its captures need this as much as raw ones.

Why pause rather than collect before each capture begins (what the guard did first): a program
may measure between its last line before `capture_begin` and the capture, and a collection
there is work it never asked for. PyTorch's
`test_graph_memory_stats_and_use_result_after_destroy_graph` reads the allocator's statistics
just before `capture_begin`, and failed under the sanitizer in the whole `-k graph` suite (an
earlier test's graph, freed by that collection, moved a segment count). A full collection per
capture is also slow: 0.3 s with two million objects alive, 1 s with six (CPU, Python 3.11),
and a vLLM server captures thousands of piecewise graphs. `torch.cuda.graph` stopped collecting
on entry because it is "REALLY expensive, especially for doing multiple cudagraph captures in a
row" (torch/cuda/graphs.py), and vLLM 0.33 disables the collector around its bulk capture
because "a gc cycle during stream capture can invalidate the captured graph"
(vllm/utils/gc_utils.py): the guard does what they do.

Why the youngest generation is collected at the end: paused, every object the capture made stays
young, and the first collections after it would sweep them all at some later allocation, perhaps
between two replays the program launches close together (PyTorch's
`test_graph_concurrent_replay` races its two replays against a million-cycle spin kernel, about
half a millisecond, and lost the race once in the whole suite with the collector paused and
nothing collected after). Generation 0 is what the capture allocated. Generation 1 is not: it
also holds what the program left before the capture, an earlier test's graph among it, and
freeing that as the capture ends is again work between two of the program's own measurements.
With generations 0 and 1 collected, `test_graph_memory_stats_and_use_result_after_destroy_graph`
still failed in the whole `-k graph` suite, its segment count one too high after the capture.
With generation 0 alone, every outcome equals the plain run's (H100, torch 2.11, 2026-12-06,
`benchmarks/results/pytorch_test_cuda_graph-2026-12-06b-h100.md`).
"""

from __future__ import annotations

import gc

YOUNG = 0  # the youngest generation: what the capture allocated, not what earlier code left


class CollectorPause:
    """Counts nested captures: the outermost begin pauses, the outermost end resumes."""

    def __init__(self) -> None:
        self._depth = 0
        self._was_enabled = False
        self._streams: set[int] = set()  # streams a hooked capture paused for (`begin_on`)

    def begin(self) -> None:
        """A capture is about to begin: no collection until it ends."""
        if self._depth == 0:
            self._was_enabled = gc.isenabled()
            gc.disable()
        self._depth += 1

    def end(self) -> None:
        """A capture ended (or failed to begin): the collector as the program had it, and the
        young garbage the capture left collected, since no graph is being captured any more."""
        if self._depth == 0:
            return
        self._depth -= 1
        if self._depth == 0 and self._was_enabled:
            gc.enable()
            gc.collect(YOUNG)

    def begin_on(self, stream: int) -> None:
        """A capture seen by its start only (torch's lifecycle hook) began on ``stream``. A
        stream whose last capture never ended (its block raised: no end hook) paused already:
        one pause per stream, given back by that stream's next end."""
        if stream not in self._streams:
            self._streams.add(stream)
            self.begin()

    def end_on(self, stream: int) -> None:
        """A capture on ``stream`` ended (torch's end hook)."""
        if stream in self._streams:
            self._streams.discard(stream)
            self.end()

    def release(self) -> None:
        """The guard is leaving with a capture never ended: the collector as the program had it."""
        if self._depth and self._was_enabled:
            gc.enable()
        self._depth = 0
        self._streams.clear()
