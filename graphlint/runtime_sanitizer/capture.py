"""Capture a callable twice, on inputs at different addresses, and snapshot both graphs.

Needs CUDA. The second capture's inputs are copies placed at an offset no intermediate can
share (inside a fresh, larger block, keeping each input's alignment modulo 512 so the
kernels chosen stay the same), while the first capture's graph and pool stay alive, so
private-pool intermediates of the two captures cannot coincide with input addresses.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from graphlint.runtime_sanitizer.introspection import provenance, snapshot_graph
from graphlint.runtime_sanitizer.snapshot import GraphSnapshot, Region

_OFFSET_BASE = 1 << 20


@dataclass
class Capture:
    graph: Any  # torch.cuda.CUDAGraph, kept alive with its pool
    inputs: list[Any]
    outputs: list[Any]
    snapshot: GraphSnapshot


def tensors_in(value: Any) -> list[Any]:
    """Every tensor in a (nested) tuple, list or dict, in order."""
    import torch

    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in tensors_in(item)]
    if isinstance(value, dict):
        return [t for key in sorted(value, key=str) for t in tensors_in(value[key])]
    return []


def placed_copy(tensor: Any, extra_offset: int, alignment_shift: int = 0) -> Any:
    """A copy of ``tensor`` (same shape, strides and storage offset) at a new address with the
    same alignment modulo 512, or ``alignment_shift`` bytes past it to test lower alignment."""
    import torch

    nbytes = tensor.untyped_storage().nbytes()
    offset_bytes = tensor.storage_offset() * tensor.element_size()
    size = (nbytes + extra_offset + 1024 + 15) // 16 * 16
    blob = torch.empty(size, dtype=torch.uint8, device=tensor.device)
    wanted = (tensor.data_ptr() + alignment_shift) % 512
    start = extra_offset + (wanted - blob.data_ptr() - offset_bytes - extra_offset) % 512
    element = tensor.element_size()
    typed = blob.view(tensor.dtype)
    copy = typed.as_strided(tensor.shape, tensor.stride(), (start + offset_bytes) // element)
    copy.copy_(tensor)
    return copy


def _extent(tensor: Any) -> int:
    """Bytes from a tensor's first element to one past its last (its view, not its storage)."""
    if tensor.numel() == 0:
        return 0
    last = sum((size - 1) * stride for size, stride in zip(tensor.shape, tensor.stride(), strict=True))
    return (last + 1) * tensor.element_size()


def _regions(inputs: Sequence[Any], outputs: Sequence[Any], fixed: Sequence[Any]) -> list[Region]:
    import torch

    regions = []
    for role, tensors in (("input", inputs), ("output", outputs), ("parameter", fixed)):
        for i, tensor in enumerate(tensors):
            if isinstance(tensor, torch.Tensor):
                regions.append(Region(f"{role}{i}", role, tensor.data_ptr(), _extent(tensor)))
    for segment in torch.cuda.memory_snapshot():
        regions.append(Region(f"segment@{segment['address']:#x}", "pool", segment["address"], segment["total_size"]))
    return regions


def _seed_host(seed: int) -> None:
    """Seed the host RNGs a program might draw from while it is captured."""
    import random

    import torch

    random.seed(seed)
    torch.manual_seed(seed)
    try:
        import numpy

        numpy.random.seed(seed)
    except ImportError:  # pragma: no cover
        pass


def capture_once(
    fn: Callable, inputs: Sequence[Any], fixed: Sequence[Any] = (), warmup: int = 2, seed: int = 0
) -> Capture:
    import torch

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(warmup):
            fn(*inputs)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph(keep_graph=True)
    _seed_host(seed)
    with torch.cuda.graph(graph):
        outputs = tensors_in(fn(*inputs))
    torch.cuda.synchronize()
    snapshot = snapshot_graph(graph.raw_cuda_graph(), _regions(inputs, outputs, fixed), provenance())
    return Capture(graph, list(inputs), outputs, snapshot)


def capture_three(
    fn: Callable, inputs: Sequence[Any], fixed: Sequence[Any] = (), warmup: int = 2
) -> tuple[Capture, Capture, Capture]:
    """The captures of the analysis: on the caller's inputs; on moved copies with other host
    RNG seeds (what changes is an input pointer or a host value); on the caller's inputs again
    with the first seeds (what changes is padding noise)."""
    first = capture_once(fn, inputs, fixed, warmup, seed=1234)
    moved = [placed_copy(t, _OFFSET_BASE + 4096 * (i + 1)) if _is_tensor(t) else t for i, t in enumerate(inputs)]
    second = capture_once(fn, moved, fixed, warmup, seed=4321)
    repeat = capture_once(fn, inputs, fixed, warmup, seed=1234)
    return first, second, repeat


def module_tensors(module: Any) -> list[Any]:
    """Parameters and buffers of an nn.Module: fixed addresses the graph may keep."""
    if module is None or not hasattr(module, "parameters"):
        return []
    return [*module.parameters(), *module.buffers()]


def _is_tensor(value: Any) -> bool:
    import torch

    return isinstance(value, torch.Tensor)
