"""Device-side kernel-node updates: re-point every patched node with one kernel launch (needs CUDA).

A host-side update (`cuGraphExecKernelNodeSetParams`) costs about a microsecond of CPU per node
on the H200, so a graph with 80 patched nodes spends more time updating than a copy-in/clone-out
replay spends in total. CUDA 12.4+ lets a kernel node opt in to device-side updates (the
`DEVICE_UPDATABLE_KERNEL_NODE` attribute, set before the graph is instantiated); then a small
kernel, enqueued on the replay's stream just before the replay, writes the new addresses into
the nodes' parameters with `cudaGraphKernelNodeSetParam`. The host passes only the caller's
tensor addresses (one per input and output), so a call costs one launch whatever the number of
nodes; the kernel adds each slot's byte offset itself.

The updater is compiled once per process with the CUDA toolkit's nvcc and linked with its
device runtime (libcudadevrt). Without them, or when the driver refuses the attribute, the
launcher keeps its host-side updates: `DeviceUpdater.build` returns None and says why.
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

MAX_TENSORS = 64  # inputs + outputs the updater's by-value argument holds
_THREADS = 128

_SOURCE = r"""
struct Slot { unsigned long long node; unsigned long long offset; long long delta; unsigned int key; unsigned int width; };
struct Bases { unsigned long long b[%(max)d]; };
extern "C" __global__ void graphlint_repoint(const Slot* slots, const int* firsts, int nodes, Bases bases) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= nodes) return;
  for (int k = firsts[i]; k < firsts[i + 1]; ++k) {  // one thread per node: its slots in order
    Slot s = slots[k];
    unsigned long long value = bases.b[s.key] + (unsigned long long)s.delta;
    cudaGraphKernelNodeSetParam((cudaGraphDeviceNode_t)s.node, s.offset, &value, s.width);
  }
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
            handle.write(_SOURCE % {"max": MAX_TENSORS})
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
    try:
        return _compile(torch.cuda.get_device_capability())
    except UpdaterUnavailable:
        raise
    except Exception as error:  # a driver or toolkit error: host-side updates still work
        raise UpdaterUnavailable(f"the updater could not be built: {type(error).__name__}: {error}") from None


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


class _Bases(ctypes.Structure):
    _fields_ = [("b", ctypes.c_uint64 * MAX_TENSORS)]


class DeviceUpdater:
    """The updater for one launcher: the slot table on the device and a prepared launch."""

    def __init__(self, function: Any, slots: Any, firsts: Any, nodes: int) -> None:
        self._keep = (slots, firsts)  # device tensors the kernel reads
        self.bases = _Bases()
        self._slots_ptr = ctypes.c_uint64(slots.data_ptr())
        self._firsts_ptr = ctypes.c_uint64(firsts.data_ptr())
        self._nodes = ctypes.c_int(nodes)
        self._args = (ctypes.c_void_p * 4)(
            ctypes.addressof(self._slots_ptr),
            ctypes.addressof(self._firsts_ptr),
            ctypes.addressof(self._nodes),
            ctypes.addressof(self.bases),
        )
        self._function = int(function)
        self._grid = (nodes + _THREADS - 1) // _THREADS
        self._launch = _direct_launch()

    @classmethod
    def build(
        cls, function: Any, device_nodes: Sequence[int | None], slots: Sequence[DeviceSlot], tensors: int
    ) -> DeviceUpdater:
        """The updater for ``slots`` (nodes indexed into ``device_nodes``, the device handles)."""
        import torch

        rows, firsts = pack_slots(device_nodes, slots)
        table = torch.tensor(rows or [[0, 0, 0, 0]], dtype=torch.int64).cuda()
        return cls(function, table, torch.tensor(firsts, dtype=torch.int32).cuda(), len(firsts) - 1)

    def launch(self, stream: int) -> None:
        """Enqueue the updater on ``stream``, with the addresses already in ``self.bases``."""
        status = self._launch(self._function, self._grid, 1, 1, _THREADS, 1, 1, 0, stream, self._args, None)
        if status != 0:
            raise UpdaterUnavailable(f"the updater's launch failed (CUresult {status})")


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


def _direct_launch() -> Any:
    """`cuLaunchKernel` straight from libcuda: a binding call costs several microseconds."""
    function = ctypes.CDLL("libcuda.so.1").cuLaunchKernel
    function.argtypes = [ctypes.c_void_p, *[ctypes.c_uint] * 7, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    function.restype = ctypes.c_int
    return function
