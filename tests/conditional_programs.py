"""Captured programs with a conditional node, built as NeMo's while-loop RNN-T decoders build
theirs: through the CUDA driver API during a PyTorch capture (a conditional handle, an if-node
added to the capturing graph, its body captured on a side stream with
`cuStreamBeginCaptureToGraph`). torch 2.11 has no conditional-node capture of its own; later
releases do the same steps for `torch.cond`. Shared by tests/test_conditional_cuda.py and
scripts/record_snapshots.py.

The condition here is the handle's default, assigned at every launch (no kernel sets it), so
the body runs on every replay when ``taken`` and never otherwise. The body only writes in place:
the caching allocator does not know the side stream's capture.

- ``gated_update``: ``out = x * 2``, then ``out += x * weight`` in the body. The body reads the
  input ``x``: re-pointing only the top-level kernels would leave it reading the captured one.
- ``gated_host_scale``: ``out *= random.random()`` in the body, a host value frozen into the
  body's kernel (GL505).
"""

from __future__ import annotations

import random
from collections.abc import Callable

import torch


def conditional_nodes_supported() -> bool:
    """cuda-bindings present and a driver that adds conditional nodes (CUDA 12.4+)."""
    try:
        from cuda.bindings import driver
    except ImportError:
        return False
    result = driver.cuDriverGetVersion()
    return result[0] == driver.CUresult.CUDA_SUCCESS and int(result[1]) >= 12040


def driver_reads_bodies() -> bool:
    """Whether this driver hands out a conditional node's bodies (`cuGraphNodeGetParams`; a
    CUDA 13.0 driver does not have it)."""
    from cuda.bindings import driver

    try:
        driver.cuGraphNodeGetParams(driver.CUgraphNode())
    except RuntimeError:
        return False
    return True


def run_if(taken: bool, body: Callable[[], None]) -> None:
    """``body()`` when ``taken``: an if-node while capturing, a host test in eager."""
    if torch.cuda.is_current_stream_capturing():
        _capture_if(taken, body)
    elif taken:
        body()


def _capture_if(taken: bool, body: Callable[[], None]) -> None:
    from cuda.bindings import driver

    from graphlint.runtime_sanitizer.driver import ok as _ok

    stream = driver.CUstream(torch.cuda.current_stream().cuda_stream)
    _status, _id, graph, dependencies, _edges, count = _ok(driver.cuStreamGetCaptureInfo(stream))
    context = _ok(driver.cuCtxGetCurrent())
    handle = _ok(driver.cuGraphConditionalHandleCreate(graph, context, int(taken), driver.CU_GRAPH_COND_ASSIGN_DEFAULT))
    params = driver.CUgraphNodeParams()
    params.type = driver.CUgraphNodeType.CU_GRAPH_NODE_TYPE_CONDITIONAL
    params.conditional.handle = handle
    params.conditional.type = driver.CUgraphConditionalNodeType.CU_GRAPH_COND_TYPE_IF
    params.conditional.size = 1
    params.conditional.ctx = context
    node = _ok(driver.cuGraphAddNode(graph, list(dependencies)[:count], None, count, params))
    body_graph = params.conditional.phGraph_out[0]
    flags = driver.CUstreamUpdateCaptureDependencies_flags.CU_STREAM_SET_CAPTURE_DEPENDENCIES
    _ok(driver.cuStreamUpdateCaptureDependencies(stream, [node], None, 1, flags))
    side = torch.cuda.Stream()
    side_handle = driver.CUstream(side.cuda_stream)
    mode = driver.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
    _ok(driver.cuStreamBeginCaptureToGraph(side_handle, body_graph, None, None, 0, mode))
    try:
        with torch.cuda.stream(side):
            body()
    finally:
        _ok(driver.cuStreamEndCapture(side_handle))


def gated_update(weight: torch.Tensor, taken: bool = True) -> Callable[[torch.Tensor], torch.Tensor]:
    def step(x: torch.Tensor) -> torch.Tensor:
        out = x * 2
        run_if(taken, lambda: out.addcmul_(x, weight))
        return out

    return step


def gated_host_scale() -> Callable[[torch.Tensor], torch.Tensor]:
    def step(x: torch.Tensor) -> torch.Tensor:
        out = x * 2
        run_if(True, lambda: out.mul_(random.random()))  # the bug: a host value baked into the body
        return out

    return step
