"""Capture a callable twice, on inputs at different addresses, and snapshot both graphs.

Needs CUDA. The second capture's inputs are copies placed at an offset no intermediate can
share (inside a fresh, larger block, keeping each input's alignment modulo 512 so the
kernels chosen stay the same), while the first capture's graph and pool stay alive, so
private-pool intermediates of the two captures cannot coincide with input addresses.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from graphlint.runtime_sanitizer.analysis.graph_bodies import bodies_of, flatten
from graphlint.runtime_sanitizer.analysis.snapshot import GraphSnapshot, Region
from graphlint.runtime_sanitizer.capture.introspection import provenance, snapshot_graph

_OFFSET_BASE = 1 << 20


@dataclass
class Capture:
    graph: Any  # torch.cuda.CUDAGraph, kept alive with its pool
    inputs: list[Any]
    outputs: list[Any]
    snapshot: GraphSnapshot
    pool_bytes: int = 0  # bytes of the segments in the graph's private pool
    output_bytes: int = 0


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
    fn: Callable,
    inputs: Sequence[Any],
    fixed: Sequence[Any] = (),
    warmup: int = 2,
    seed: int = 0,
    attribute: bool = False,
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
    recorder = _OpRecorder() if attribute else None
    with torch.cuda.graph(graph, capture_error_mode="relaxed" if attribute else "global"):
        if recorder is not None:
            with recorder:
                outputs = tensors_in(fn(*inputs))
        else:
            outputs = tensors_in(fn(*inputs))
    torch.cuda.synchronize()
    snapshot = snapshot_graph(graph.raw_cuda_graph(), _regions(inputs, outputs, fixed), provenance())
    if recorder is not None:
        recorder.attribute(snapshot)
        recorder.mark_births(outputs, snapshot)
    pool_bytes = sum(size for _, size in pool_segments(graph))
    output_bytes = sum(_extent(t) for t in outputs)
    return Capture(graph, list(inputs), outputs, snapshot, pool_bytes, output_bytes)


def pool_segments(graph: Any) -> list[tuple[int, int]]:
    """(address, bytes) of each allocator segment in the graph's private memory pool."""
    import torch

    try:
        pool = tuple(graph.pool())
    except Exception:
        return []
    return [
        (segment["address"], segment["total_size"])
        for segment in torch.cuda.memory_snapshot()
        if tuple(segment.get("segment_pool_id", ())) == pool
    ]


def capturing_graph(stream: int) -> Any | None:
    """The graph the CUDA stream (a raw handle) is capturing into, or None. The driver permits
    reading that graph while the capture goes on."""
    from graphlint.runtime_sanitizer import driver

    drv = driver.bindings()
    info = drv.cuStreamGetCaptureInfo(drv.CUstream(stream))
    if info[0] != drv.CUresult.CUDA_SUCCESS:
        return None
    return next((item for item in info[1:] if isinstance(item, drv.CUgraph)), None)


def _capture_graph_node_count() -> int | None:
    """Nodes in the graph the current stream is capturing into (None if not readable)."""
    position = _capture_position()
    return None if position is None else position[1]


def _capture_position() -> tuple[int, int] | None:
    """The graph the current stream is capturing into (its handle) and how many nodes it has
    (None if not readable). Inside a conditional node's body PyTorch captures on another stream
    into the body graph, so the handle tells a body's nodes from the top level's."""
    import torch

    from graphlint.runtime_sanitizer import driver

    drv = driver.bindings()
    graph = capturing_graph(torch.cuda.current_stream().cuda_stream)
    if graph is None:
        return None
    result = drv.cuGraphGetNodes(graph, 0)
    return (int(graph), int(result[-1])) if result[0] == drv.CUresult.CUDA_SUCCESS else None


def _tensor_ranges(value: Any) -> list[tuple[int, int]]:
    return [(t.data_ptr(), _extent(t)) for t in tensors_in(value) if t.is_cuda and t.numel()]


class _OpRecorder:
    """Which ATen operator created which graph nodes, and what it read and wrote (from its
    schema's alias information, as PyTorch's CUDA sanitizer learns it)."""

    def __init__(self) -> None:
        from torch.utils._python_dispatch import TorchDispatchMode

        recorder = self

        class Mode(TorchDispatchMode):
            @classmethod
            def ignore_compile_internals(cls) -> bool:
                return True  # never make Dynamo skip a frame: the program must run as it would

            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                kwargs = kwargs or {}
                before = _capture_position()
                out = func(*args, **kwargs)
                after = _capture_position()
                writes, reads = [], []
                for argument, value in zip(func._schema.arguments, args, strict=False):
                    target = writes if argument.alias_info is not None and argument.alias_info.is_write else reads
                    target.extend(_tensor_ranges(value))
                for name, value in kwargs.items():
                    schema_arg = next((a for a in func._schema.arguments if a.name == name), None)
                    is_write = (
                        schema_arg is not None and schema_arg.alias_info is not None and schema_arg.alias_info.is_write
                    )
                    (writes if is_write else reads).extend(_tensor_ranges(value))
                writes.extend(_tensor_ranges(out))
                if before is not None:
                    recorder.note_outputs(out, before)
                recorder.note_launch(str(func), before, after, reads, writes)
                return out

        self.mode = Mode()
        # (operator, graph handle, node count before, after, reads, writes)
        self.ops: list[tuple[str, int, int, int, list, list]] = []
        self.unreadable = 0  # operators run while the capture graph could not be read
        self.launches: Any = None  # the Triton launch wrappers, while recording (`triton_launches`)
        # storage (StorageImpl address) -> the capture position when an operator first returned it
        self.first_seen: dict[int, tuple[int, int]] = {}
        self._refs: list[Any] = []  # weak references: a recorded StorageImpl is never recycled

    def note_outputs(self, out: Any, position: tuple[int, int]) -> None:
        """Remember when each storage an operator returns first appeared. A weak reference keeps
        the StorageImpl's address from being reused by a later storage, so the address names one
        storage for the whole capture."""
        from torch.multiprocessing.reductions import StorageWeakRef

        for tensor in tensors_in(out):
            if not tensor.is_cuda:
                continue
            ref = StorageWeakRef(tensor.untyped_storage())
            if ref.cdata not in self.first_seen:
                self.first_seen[ref.cdata] = position
                self._refs.append(ref)

    def mark_births(self, outputs: Sequence[Any], snapshot: GraphSnapshot) -> None:
        """Set each output region's `born`: nodes created before its storage existed touched its
        addresses as other (since freed) tensors, and must not be re-pointed with it."""
        by_name = {region.name: region for region in snapshot.regions}
        top = self._top_level(snapshot)
        for index, tensor in enumerate(outputs):
            region = by_name.get(f"output{index}")
            if region is not None and tensor.is_cuda:
                graph, count = self.first_seen.get(tensor.untyped_storage()._cdata, (top, 0))
                region.born = count if graph == top else 0  # born in a body: unknown

    def note_launch(
        self, name: str, before: tuple[int, int] | None, after: tuple[int, int] | None, reads: list, writes: list
    ) -> None:
        """What an operator, or a kernel launched outside ATen (a Triton kernel,
        `triton_launches`), added to the graph being captured, with its accesses."""
        if before is None or after is None:
            self.unreadable += 1
        elif before[0] == after[0] and after[1] > before[1]:
            self.ops.append((name, before[0], before[1], after[1], reads, writes))

    def __enter__(self):
        from graphlint.runtime_sanitizer.capture.triton_launches import TritonLaunches

        self.mode.__enter__()
        self.launches = TritonLaunches(self.note_launch, _capture_position, _tensor_ranges).__enter__()
        return self

    def __exit__(self, *exc):
        self.launches.__exit__(*exc)
        return self.mode.__exit__(*exc)

    def attribute(self, snapshot: GraphSnapshot) -> None:
        """Give each node the accesses of what launched it. A Triton launch is noted after the
        operators it runs inside it (a `zero_()` of an output it accumulates into): the
        innermost noted first keeps its nodes."""
        graphs = _graphs_by_handle(snapshot)
        top = self._top_level(snapshot)
        for call, (name, graph, start, end, reads, writes) in enumerate(self.ops):
            target = snapshot if graph == top else graphs.get(graph)
            if target is None:
                continue  # a graph the snapshot does not hold: left unattributed, so the check refuses
            for index in range(start, min(end, len(target.nodes))):
                node = target.nodes[index]
                if not node.op:
                    node.op, node.reads, node.writes, node.call = name, list(reads), list(writes), call

    def _top_level(self, snapshot: GraphSnapshot) -> int:
        """The handle the top-level operators were counted in: the snapshot's own, or, if no
        operator names it (a driver that hands out another handle for the captured graph),
        the first operator's, as before bodies were told apart."""
        handles = [op[1] for op in self.ops]
        return snapshot.handle if snapshot.handle in handles or not handles else handles[0]


def _graphs_by_handle(snapshot: GraphSnapshot) -> dict[int, GraphSnapshot]:
    """Every body graph the snapshot holds, at any depth, by its driver handle."""
    found: dict[int, GraphSnapshot] = {}
    for node in snapshot.nodes:
        for body in bodies_of(node):
            found[body.handle] = body
            found.update(_graphs_by_handle(body))
    return found


class CaptureSet(NamedTuple):
    first: Capture  # on the caller's inputs
    second: Capture  # on moved copies, other host RNG seeds: input pointers and host values change
    repeat: Capture  # on the caller's inputs, the first seeds: what changes is padding noise
    moved_repeat: Capture  # on the moved copies, the first seeds: noise that follows the addresses


def capture_set(fn: Callable, inputs: Sequence[Any], fixed: Sequence[Any] = (), warmup: int = 2) -> CaptureSet:
    """The captures of the analysis (see `CaptureSet`). A host value frozen into the graph (a
    random draw, a Python scalar) follows the host seeds, so it is the same in the first and
    the moved repeat; uninitialised bytes of a by-value argument struct follow what the host
    stack held, which follows the input addresses, so they differ there (PyTorch's own graph
    tests gave 20 such false GL505s when only the plain repeat measured the noise)."""
    first = capture_once(fn, inputs, fixed, warmup, seed=1234)
    moved = [placed_copy(t, _OFFSET_BASE + 4096 * (i + 1)) if _is_tensor(t) else t for i, t in enumerate(inputs)]
    second = capture_once(fn, moved, fixed, warmup, seed=4321)
    repeat = capture_once(fn, inputs, fixed, warmup, seed=1234)
    moved_repeat = capture_once(fn, moved, fixed, warmup, seed=1234)
    return CaptureSet(first, second, repeat, moved_repeat)


def module_tensors(module: Any) -> list[Any]:
    """Parameters and buffers of an nn.Module: fixed addresses the graph may keep."""
    if module is None or not hasattr(module, "parameters"):
        return []
    return [*module.parameters(), *module.buffers()]


def optimizer_tensors(optimizer: Any) -> list[Any]:
    """An optimizer's state tensors (moments, step counters) and tensor hyperparameters: memory a
    captured training step updates in place at fixed addresses."""
    if optimizer is None:
        return []
    found = [value for state in optimizer.state.values() for value in state.values() if _is_tensor(value)]
    for group in optimizer.param_groups:
        found.extend(value for key, value in group.items() if key != "params" and _is_tensor(value))
    return found


def save_state(tensors: Sequence[Any]) -> tuple[list[Any], Any]:
    """Copies of the tensors a step may update (parameters, buffers, optimizer state) and the
    CUDA RNG state: the sanitizer runs a program's step several times and must undo that."""
    import torch

    return [t.detach().clone() for t in tensors], torch.cuda.get_rng_state()


def load_state(tensors: Sequence[Any], saved: tuple[list[Any], Any]) -> None:
    import torch

    copies, rng = saved
    with torch.no_grad():
        for tensor, copy in zip(tensors, copies, strict=True):
            tensor.copy_(copy)
    torch.cuda.set_rng_state(rng)


def _is_tensor(value: Any) -> bool:
    import torch

    return isinstance(value, torch.Tensor)


def capture_shifted(
    fn: Callable, inputs: Sequence[Any], index: int, fixed: Sequence[Any] = (), warmup: int = 2
) -> Capture:
    """A capture with input ``index`` moved to an address one element past its alignment."""
    tensor = inputs[index]
    moved = list(inputs)
    moved[index] = placed_copy(tensor, _OFFSET_BASE * 3, alignment_shift=tensor.element_size())
    return capture_once(fn, moved, fixed, warmup, seed=1234)


def capture_attributed(
    fn: Callable, inputs: Sequence[Any], reference: GraphSnapshot, fixed: Sequence[Any] = (), warmup: int = 2
) -> GraphSnapshot | None:
    """One more capture under a dispatch mode that records each operator's reads and writes
    (for GL504). The mode can change what runs (torch.compile falls back to eager under it):
    when the graph differs from ``reference``, None, so ordering is never judged on a graph
    that is not the program's."""
    from graphlint.runtime_sanitizer.analysis.two_capture import compare_structure

    attributed = capture_once(fn, inputs, fixed, warmup, seed=1234, attribute=True)
    return None if compare_structure(flatten(reference), flatten(attributed.snapshot)) else attributed.snapshot
