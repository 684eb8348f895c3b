"""Device-side kernel-node updates: re-point every patched node from inside the graph (needs CUDA).

A host-side update (`cuGraphExecKernelNodeSetParams`) costs about a microsecond of CPU per node
on the H200, and a launch after any host-side change to the executable graph costs more than
an unchanged one. CUDA 12.4+ lets a kernel node opt in to device-side updates (the
`DEVICE_UPDATABLE_KERNEL_NODE` attribute, set before the graph is instantiated). Measured on the
H200: an update from a kernel enqueued *before* the graph's launch does not reach the replay; an
update from a kernel node *inside* the graph reaches the nodes after it. So the launcher adds
one updater node to the captured graph, with an edge to every patched node; it writes each
slot with `cudaGraphKernelNodeSetParam` (the caller's tensor address plus the slot's offset).

The host never changes the executable graph per call: it writes the call's tensor addresses
(one word per input and output) into a ring of rows in pinned host memory, and the updater
reads the row of its launch (a device-side launch counter; launches of one executable graph
are ordered). Every replay of the graph consumes one row, so every replay must be preceded by
`DeviceUpdater.write`. An event every `_EVERY` launches keeps the host from overwriting a row
that a launch still in flight has not read.

The updater is compiled once per process with the CUDA toolkit's nvcc and linked with its
device runtime (libcudadevrt), then tried on a throwaway graph. Without them, or when the trial
does not give the right bits, the launcher keeps host-side updates and says why.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

MAX_TENSORS = 64  # inputs + outputs a ring row holds
_THREADS = 128
_RING = 256  # rows: launches the host may run ahead of the device
_EVERY = 64  # launches between the events that keep the ring safe

_SOURCE = r"""
struct Slot { unsigned long long node; unsigned long long offset; long long delta; unsigned int key; unsigned int width; };
extern "C" __global__ void graphlint_repoint(const Slot* slots, const int* firsts, int nodes,
    const volatile unsigned long long* ring, int rows, int width, unsigned long long* counter) {
  __shared__ unsigned long long launch;
  if (threadIdx.x == 0) launch = *counter;
  __syncthreads();
  const volatile unsigned long long* bases = ring + (launch %% rows) * width;
  for (int i = threadIdx.x; i < nodes; i += blockDim.x) {
    for (int k = firsts[i]; k < firsts[i + 1]; ++k) {  // one thread per node: its slots in order
      Slot s = slots[k];
      unsigned long long value = bases[s.key] + (unsigned long long)s.delta;
      cudaGraphKernelNodeSetParam((cudaGraphDeviceNode_t)s.node, s.offset, &value, s.width);
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) *counter = launch + 1;
}
"""

_FUNCTION: dict[tuple[int, int], Any] = {}  # compute capability -> (module, function), per process


class UpdaterUnavailable(RuntimeError):
    """Device-side updates cannot be used here; the message says why."""


@dataclass(frozen=True)
class DeviceSlot:
    """One word the updater rewrites: in which node, at which byte of its parameter buffer, with
    which tensor's address (an index into the call's addresses) plus which offset."""

    node: int  # index into the nodes given to `DeviceUpdater.build`
    offset: int  # byte offset in the kernel's parameter buffer
    key: int
    delta: int
    width: int


def _toolkit() -> tuple[str, str]:
    """nvcc and libcudadevrt.a of the CUDA toolkit (CUDA_HOME, then PATH, then /usr/local/cuda)."""
    roots = [os.environ.get("CUDA_HOME", ""), os.environ.get("CUDA_PATH", "")]
    nvcc = shutil.which("nvcc")
    if nvcc:
        roots.append(os.path.dirname(os.path.dirname(nvcc)))
    roots.append("/usr/local/cuda")
    for root in filter(None, roots):
        compiler = os.path.join(root, "bin", "nvcc")
        for lib in ("lib64", "lib", os.path.join("targets", "x86_64-linux", "lib")):
            devrt = os.path.join(root, lib, "libcudadevrt.a")
            if os.path.exists(compiler) and os.path.exists(devrt):
                return compiler, devrt
    raise UpdaterUnavailable("no CUDA toolkit (nvcc and libcudadevrt.a) to build the device-side updater")


def _compile(capability: tuple[int, int]) -> Any:
    """The updater kernel for this device, compiled and linked with the device runtime."""
    from graphlint.runtime_sanitizer.introspection import _driver, _ok

    if capability in _FUNCTION:
        return _FUNCTION[capability][1]
    drv = _driver()
    nvcc, devrt = _toolkit()
    arch = f"{capability[0]}{capability[1]}"
    with tempfile.TemporaryDirectory() as folder:
        source = os.path.join(folder, "repoint.cu")
        with open(source, "w") as handle:
            handle.write(_SOURCE.replace("%%", "%"))
        ptx = os.path.join(folder, "repoint.ptx")
        command = [nvcc, f"-arch=compute_{arch}", "-rdc=true", "-ptx", source, "-o", ptx]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise UpdaterUnavailable(f"nvcc failed: {done.stderr.strip()[:300]}")
        with open(ptx, "rb") as handle:
            code = handle.read() + b"\0"
    state = _ok(drv.cuLinkCreate(0, [], []))
    try:
        _ok(drv.cuLinkAddData(state, drv.CUjitInputType.CU_JIT_INPUT_PTX, code, len(code), b"repoint", 0, [], []))
        _ok(drv.cuLinkAddFile(state, drv.CUjitInputType.CU_JIT_INPUT_LIBRARY, devrt.encode(), 0, [], []))
        cubin, size = _ok(drv.cuLinkComplete(state))
        image = ctypes.string_at(int(cubin), int(size))
    finally:
        drv.cuLinkDestroy(state)
    module = _ok(drv.cuModuleLoadData(image))
    function = _ok(drv.cuModuleGetFunction(module, b"graphlint_repoint"))
    _FUNCTION[capability] = (module, function)
    return function


def updater_function(tensors: int = 0) -> Any:
    """The compiled updater for the current device; raises `UpdaterUnavailable`."""
    import torch

    if tensors > MAX_TENSORS:
        raise UpdaterUnavailable(f"{tensors} inputs and outputs; the updater takes at most {MAX_TENSORS}")
    capability = torch.cuda.get_device_capability()
    try:
        function = _compile(capability)
        if capability not in _VERIFIED:
            _VERIFIED[capability] = _trial(function)
    except UpdaterUnavailable:
        raise
    except Exception as error:  # a driver or toolkit error: host-side updates still work
        raise UpdaterUnavailable(f"the updater could not be built: {type(error).__name__}: {error}") from None
    if _VERIFIED[capability]:
        raise UpdaterUnavailable(_VERIFIED[capability])
    return function


_VERIFIED: dict[tuple[int, int], str] = {}  # capability -> "" when the trial passed, else why not


def _trial(function: Any) -> str:
    """Opt a throwaway graph's node in, add the updater, re-point its input twice and replay:
    only if that gives the right bits may a program's graph opt in (which is final)."""
    import torch

    from graphlint.runtime_sanitizer.introspection import _driver, _ok, snapshot_graph

    drv = _driver()
    x, moved = torch.arange(1024.0, device="cuda"), torch.arange(1024.0, device="cuda") + 1
    graph = torch.cuda.CUDAGraph(keep_graph=True)
    with torch.cuda.graph(graph):
        out = x * 2
    node = snapshot_graph(graph.raw_cuda_graph()).nodes[0]
    where = [
        (param.offset + i)
        for param in node.params
        for i in range(0, param.size - 7, 8)
        if int.from_bytes(param.data[i : i + 8], "little") == x.data_ptr()
    ]
    if len(where) != 1:
        return f"the trial kernel's input pointer was not found once (found {len(where)})"
    raw = drv.CUgraph(graph.raw_cuda_graph())
    handles = _ok(drv.cuGraphGetNodes(raw, 1))[0]
    device_nodes = make_device_updatable(handles[:1])
    if device_nodes[0] is None:
        return "the driver refused the device-updatable attribute"
    updater = DeviceUpdater(function, device_nodes, [DeviceSlot(0, where[0], 0, 0, 8)], 1)
    updater.add_to(raw, handles[:1])
    graph.instantiate()
    for source in (moved, x):
        updater.write([source.data_ptr()])
        graph.replay()
        updater.launched()
        torch.cuda.synchronize()
        if not torch.equal(out, source * 2):
            return "a device-side update from the updater node did not reach the node after it"
    return ""


def make_device_updatable(handles: Sequence[Any]) -> list[int | None]:
    """Opt each kernel node of a not yet instantiated graph in to device-side updates; its device
    handle, or None where the driver refused (that node keeps host-side updates). Irreversible:
    a node that opted in stays device-updatable."""
    from graphlint.runtime_sanitizer.introspection import _driver

    drv = _driver()
    attribute = drv.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE
    found: list[int | None] = []
    for handle in handles:
        value = drv.CUkernelNodeAttrValue()
        value.deviceUpdatableKernelNode.deviceUpdatable = 1
        if drv.cuGraphKernelNodeSetAttribute(handle, attribute, value)[0] != drv.CUresult.CUDA_SUCCESS:
            found.append(None)
            continue
        result = drv.cuGraphKernelNodeGetAttribute(handle, attribute)
        ok = result[0] == drv.CUresult.CUDA_SUCCESS
        found.append(int(result[1].deviceUpdatableKernelNode.devNode) if ok else None)
    return found


class DeviceUpdater:
    """The updater of one graph: its slot table on the device, the ring of address rows in
    pinned host memory, the launch counter, and the node it adds to the graph."""

    def __init__(self, function: Any, device_nodes: Sequence[int | None], slots: Sequence[DeviceSlot], width: int):
        import torch

        rows, firsts = pack_slots(device_nodes, slots)
        self._table = torch.tensor(rows or [[0, 0, 0, 0]], dtype=torch.int64).cuda()
        self._firsts = torch.tensor(firsts, dtype=torch.int32).cuda()
        self._counter = torch.zeros(1, dtype=torch.int64, device="cuda")
        self.width = max(width, 1)
        self._ring = torch.zeros(_RING * self.width, dtype=torch.int64).pin_memory()
        self._rows = [
            (ctypes.c_uint64 * self.width).from_address(self._ring.data_ptr() + 8 * self.width * row)
            for row in range(_RING)
        ]
        values = [
            self._table.data_ptr(), self._firsts.data_ptr(), len(firsts) - 1,
            self._ring.data_ptr(), _RING, self.width, self._counter.data_ptr(),
        ]  # fmt: skip
        types = [ctypes.c_uint64, ctypes.c_uint64, ctypes.c_int, ctypes.c_uint64, ctypes.c_int, ctypes.c_int]
        self._values = [kind(value) for kind, value in zip([*types, ctypes.c_uint64], values, strict=True)]
        self._args = (ctypes.c_void_p * len(values))(*[ctypes.addressof(v) for v in self._values])
        self._function = function
        self._launches = 0
        self._events: dict[int, Any] = {}

    def add_to(self, graph: Any, dependents: Sequence[Any]) -> None:
        """Add the updater node to a not yet instantiated graph, before ``dependents``."""
        from graphlint.runtime_sanitizer.introspection import _driver, _ok

        drv = _driver()
        params = drv.CUDA_KERNEL_NODE_PARAMS()
        params.func = self._function
        params.gridDimX, params.gridDimY, params.gridDimZ = 1, 1, 1
        params.blockDimX, params.blockDimY, params.blockDimZ = _THREADS, 1, 1
        params.sharedMemBytes = 0
        params.kernelParams = ctypes.addressof(self._args)
        params.extra = 0
        node = _ok(drv.cuGraphAddKernelNode(graph, None, 0, params))
        count = len(dependents)
        try:
            _ok(drv.cuGraphAddDependencies(graph, [node] * count, list(dependents), None, count))
        except TypeError:  # cuda-bindings before 13: no edge data
            _ok(drv.cuGraphAddDependencies(graph, [node] * count, list(dependents), count))

    def write(self, addresses: Sequence[int]) -> None:
        """The next launch's addresses (one per input and output, 0 for unused ones)."""
        launch = self._launches
        if launch % _EVERY == 0 and launch - _RING + _EVERY in self._events:
            self._events.pop(launch - _RING + _EVERY).synchronize()  # its row is about to be reused
        row = self._rows[launch % _RING]
        for index, address in enumerate(addresses):
            row[index] = address

    def launched(self) -> None:
        """Called right after each launch of the graph: the updater consumed one row."""
        import torch

        if self._launches % _EVERY == 0:
            event = torch.cuda.Event()
            event.record()
            self._events[self._launches] = event
        self._launches += 1


def pack_slots(device_nodes: Sequence[int | None], slots: Sequence[DeviceSlot]) -> tuple[list[list[int]], list[int]]:
    """The updater's tables: one row of four int64 per slot, in the kernel's `Slot` layout
    (device node handle, parameter byte offset, delta, key | width << 32), grouped by node; and
    where each node's rows start, plus the end (one thread per node applies its rows in order)."""
    ordered = sorted(slots, key=lambda s: s.node)
    rows, firsts = [], []
    for index, slot in enumerate(ordered):
        handle = device_nodes[slot.node]
        if handle is None:
            raise ValueError(f"node {slot.node} is not device-updatable")
        if index == 0 or slot.node != ordered[index - 1].node:
            firsts.append(index)
        rows.append([handle, slot.offset, slot.delta, slot.key | (slot.width << 32)])
    firsts.append(len(ordered))
    return rows, firsts
