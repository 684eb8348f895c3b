"""Walk a torch-captured CUDA graph into a `GraphSnapshot` (needs CUDA and cuda-bindings).

Uses the driver API (`cuda.bindings.driver`): the runtime's cudaGraphKernelNodeGetParams
fails on kernels from other shared libraries. Every node type is handled explicitly; a
node that cannot be represented is kept with a note, never dropped.
"""

from __future__ import annotations

import ctypes
import datetime
import platform
from collections.abc import Callable, Sequence
from typing import Any

from graphlint.runtime_sanitizer import driver
from graphlint.runtime_sanitizer.analysis.graph_bodies import UNREAD_BODY
from graphlint.runtime_sanitizer.analysis.snapshot import GraphSnapshot, Node, Param, Region


def _node_type_name(node_type: Any) -> str:
    name = getattr(node_type, "name", None) or str(node_type).rsplit(".", 1)[-1].split(":")[0].strip("<> ")
    return {
        "CU_GRAPH_NODE_TYPE_KERNEL": "kernel",
        "CU_GRAPH_NODE_TYPE_MEMCPY": "memcpy",
        "CU_GRAPH_NODE_TYPE_MEMSET": "memset",
        "CU_GRAPH_NODE_TYPE_EVENT_RECORD": "event_record",
        "CU_GRAPH_NODE_TYPE_WAIT_EVENT": "event_wait",
        "CU_GRAPH_NODE_TYPE_GRAPH": "graph",
        "CU_GRAPH_NODE_TYPE_EMPTY": "empty",
        "CU_GRAPH_NODE_TYPE_HOST": "host",
        "CU_GRAPH_NODE_TYPE_MEM_ALLOC": "mem_alloc",
        "CU_GRAPH_NODE_TYPE_MEM_FREE": "mem_free",
        "CU_GRAPH_NODE_TYPE_CONDITIONAL": "conditional",
    }.get(name, name.lower())


def _kernel(drv: Any, handle: Any, node: Node) -> None:
    params = driver.ok(drv.cuGraphKernelNodeGetParams(handle))
    func = params.func
    name = driver.ok(drv.cuFuncGetName(func))
    node.name = name.decode(errors="replace") if isinstance(name, bytes) else str(name)
    node.grid = (int(params.gridDimX), int(params.gridDimY), int(params.gridDimZ))
    node.block = (int(params.blockDimX), int(params.blockDimY), int(params.blockDimZ))
    node.shared_bytes = int(params.sharedMemBytes)
    kernel_params = int(params.kernelParams) if params.kernelParams is not None else 0
    if not kernel_params:
        data = _extra_buffer(driver.address(params.extra))
        if data is None:
            node.note = "launched with `extra` (no kernelParams): arguments not visible"
            return
        node.extra = True  # one packed argument buffer (cuBLAS's nvjet kernels on the H200)
        node.params.append(Param(0, len(data), data))
        return
    pointers = ctypes.cast(kernel_params, ctypes.POINTER(ctypes.c_void_p))
    index = 0
    while True:
        info = drv.cuFuncGetParamInfo(func, index)
        if info[0] != drv.CUresult.CUDA_SUCCESS:
            break
        offset, size = int(info[1]), int(info[2])
        node.params.append(Param(offset, size, ctypes.string_at(pointers[index], size)))
        index += 1


# cuda.h: the keys of a kernel's `extra` array.
_EXTRA_END, _EXTRA_BUFFER, _EXTRA_SIZE = 0, 1, 2


def _extra_buffer(extra: int) -> bytes | None:
    """The packed argument bytes of a kernel launched with `extra` (CU_LAUNCH_PARAM_BUFFER_POINTER
    and _SIZE), or None when the array holds anything else: then the arguments stay unknown."""
    if not extra:
        return None
    entries = ctypes.cast(extra, ctypes.POINTER(ctypes.c_void_p))
    buffer, size = 0, None
    for index in range(0, 16, 2):
        key = entries[index] or 0
        if key == _EXTRA_END:
            break
        value = entries[index + 1] or 0
        if key == _EXTRA_BUFFER:
            buffer = value
        elif key == _EXTRA_SIZE and value:
            size = ctypes.c_size_t.from_address(value).value
        else:
            return None
    if not buffer or size is None:
        return None
    return ctypes.string_at(buffer, size)


def packed_extra(buffer: Any) -> tuple[Any, Any]:
    """An `extra` array pointing at ``buffer`` (a ctypes buffer), and the size it points at: both
    must outlive every use of the array."""
    size = ctypes.c_size_t(ctypes.sizeof(buffer))
    array = (ctypes.c_void_p * 5)(
        _EXTRA_BUFFER, ctypes.addressof(buffer), _EXTRA_SIZE, ctypes.addressof(size), _EXTRA_END
    )
    return array, size


def _memcpy(drv: Any, handle: Any, node: Node) -> None:
    params = driver.ok(drv.cuGraphMemcpyNodeGetParams(handle))
    node.pointers = {"src": int(params.srcDevice), "dst": int(params.dstDevice)}
    node.extent = int(params.WidthInBytes) * max(1, int(params.Height)) * max(1, int(params.Depth))


def _memset(drv: Any, handle: Any, node: Node) -> None:
    params = driver.ok(drv.cuGraphMemsetNodeGetParams(handle))
    node.pointers = {"dst": int(params.dst)}
    node.extent = int(params.width) * int(params.elementSize) * max(1, int(params.height))


def snapshot_graph(raw_graph: int, regions: Sequence[Region] = (), provenance: dict | None = None) -> GraphSnapshot:
    """Snapshot the graph at address ``raw_graph`` (`CUDAGraph.raw_cuda_graph()`)."""
    drv = driver.bindings()
    graph = drv.CUgraph(raw_graph)
    count = driver.ok(drv.cuGraphGetNodes(graph, 0))[1]
    handles, _ = driver.ok(drv.cuGraphGetNodes(graph, count)) if count else ([], 0)
    index_of = {int(h): i for i, h in enumerate(handles)}
    nodes = []
    readers: dict[str, Callable[[Any, Any, Node], None]] = {"kernel": _kernel, "memcpy": _memcpy, "memset": _memset}
    for i, handle in enumerate(handles):
        node = Node(index=i, type=_node_type_name(driver.ok(drv.cuGraphNodeGetType(handle))))
        try:
            if node.type in readers:
                readers[node.type](drv, handle, node)
            elif node.type == "event_record":
                node.event = int(driver.ok(drv.cuGraphEventRecordNodeGetEvent(handle)))
            elif node.type == "event_wait":
                node.event = int(driver.ok(drv.cuGraphEventWaitNodeGetEvent(handle)))
            elif node.type == "graph":
                child = driver.ok(drv.cuGraphChildGraphNodeGetGraph(handle))
                node.child = snapshot_graph(int(child), (), None)
            elif node.type == "conditional":
                _conditional(drv, handle, node)
            elif node.type != "empty":
                node.note = f"node type {node.type!r} is not analysed"
        except driver.IntrospectionError as error:
            node.note = f"could not read this node: {error}"
        nodes.append(node)
    edges = []
    result = drv.cuGraphGetEdges(graph, 0)
    edge_count = int(result[-1])
    if edge_count:
        result = driver.ok(drv.cuGraphGetEdges(graph, edge_count))
        sources, targets = result[0], result[1]
        edges = sorted((index_of[int(a)], index_of[int(b)]) for a, b in zip(sources, targets, strict=False))
    return GraphSnapshot(
        nodes=nodes, edges=edges, regions=list(regions), provenance=provenance or {}, handle=int(raw_graph)
    )


def _conditional(drv: Any, handle: Any, node: Node) -> None:
    """A conditional node's kind and its body graphs. `cuGraphNodeGetParams` is the only call that
    hands out a conditional node's bodies, and a CUDA 13.0 driver does not have it: the node is
    then noted as unread, which the analysis and the launcher refuse (`graph_bodies.unread`)."""
    try:
        params = driver.ok(drv.cuGraphNodeGetParams(handle)).conditional
    except (RuntimeError, driver.IntrospectionError) as error:  # 'Function "cuGraphNodeGetParams" not found'
        node.note = f"{UNREAD_BODY}: this driver cannot read it ({error})"
        return
    node.condition = _CONDITIONS.get(int(params.type), f"type {int(params.type)}")
    graphs = list(params.phGraph_out)[: int(params.size)]
    node.bodies = [snapshot_graph(int(graph), (), None) for graph in graphs]


_CONDITIONS = {0: "if", 1: "while", 2: "switch"}  # CUgraphConditionalNodeType


def kernel_params_with_arguments(
    handle: Any, arguments: Sequence[bytes], extra: bool = False
) -> tuple[Any, list[Any], Any]:
    """The kernel node's launch parameters with its arguments replaced by ``arguments``: the
    driver struct, the ctypes buffers holding each argument and the `void*[]` pointing at them
    (both must outlive every use of the struct). With ``extra``, the single argument is the
    packed buffer of an `extra` launch, and the array is the `extra` array."""
    drv = driver.bindings()
    original = driver.ok(drv.cuGraphKernelNodeGetParams(handle))
    buffers = [ctypes.create_string_buffer(bytes(data), len(data)) for data in arguments]
    if extra:
        array, size = packed_extra(buffers[0])
        buffers.append(size)
    else:
        array = (ctypes.c_void_p * len(buffers))(*[ctypes.addressof(b) for b in buffers])
    params = drv.CUDA_KERNEL_NODE_PARAMS()
    params.func = original.func
    params.gridDimX, params.gridDimY, params.gridDimZ = original.gridDimX, original.gridDimY, original.gridDimZ
    params.blockDimX, params.blockDimY, params.blockDimZ = original.blockDimX, original.blockDimY, original.blockDimZ
    params.sharedMemBytes = original.sharedMemBytes
    params.kernelParams = 0 if extra else ctypes.addressof(array)
    params.extra = ctypes.addressof(array) if extra else 0
    return params, buffers, array


def provenance() -> dict[str, Any]:
    """Device, driver, CUDA, torch and cuda-bindings versions, and the time of recording."""
    import torch

    drv = driver.bindings()
    info: dict[str, Any] = {
        "device": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "recorded": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }
    try:
        import cuda.bindings

        info["cuda_bindings"] = cuda.bindings.__version__
        version = driver.ok(drv.cuDriverGetVersion())
        info["driver_api"] = f"{version // 1000}.{(version % 1000) // 10}"
    except Exception:  # pragma: no cover - informational only
        pass
    try:
        import subprocess

        smi = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
        )
        info["driver"] = smi.stdout.strip().splitlines()[0] if smi.stdout.strip() else "unknown"
    except Exception:  # pragma: no cover
        info["driver"] = "unknown"
    return info
