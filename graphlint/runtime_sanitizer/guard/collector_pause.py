"""Python's cyclic garbage collector held off while a stream captures, and run once it ends.

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

Why pause rather than collect before the capture begins (what the guard did first): a program
may measure between its last line before `capture_begin` and the capture, and a collection
there is work the program never asked for. PyTorch's
`test_graph_memory_stats_and_use_result_after_destroy_graph` reads the allocator's statistics
just before `capture_begin` and failed under the sanitizer in the whole `-k graph` suite (an
earlier test's graph, freed by that collection, moved a segment count). After the capture the
collection stands where that test, and most programs, collect anyway; it keeps the heap as
small at the first replay as before, so a replay's host work is not lengthened by a collection
the capture's garbage would have caused (PyTorch's `test_graph_concurrent_replay` races its
two replays against a 1 ms spin and needs them launched close together).
"""

from __future__ import annotations

import gc


class CollectorPause:
    """Counts nested captures: the outermost begin pauses, the outermost end resumes."""

    def __init__(self) -> None:
        self._depth = 0
        self._was_enabled = False

    def begin(self) -> None:
        """A capture is about to begin: no collection until it ends."""
        if self._depth == 0:
            self._was_enabled = gc.isenabled()
            gc.disable()
        self._depth += 1

    def end(self) -> None:
        """A capture ended (or failed to begin): the collector as the program had it, and the
        garbage the capture left collected, since no graph is being captured any more."""
        if self._depth == 0:
            return
        self._depth -= 1
        if self._depth == 0 and self._was_enabled:
            gc.enable()
            gc.collect()

    def release(self) -> None:
        """The guard is leaving with a capture never ended: the collector as the program had it."""
        if self._depth and self._was_enabled:
            gc.enable()
        self._depth = 0
