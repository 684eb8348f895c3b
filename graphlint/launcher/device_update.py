"""Device-side kernel-node updates: re-point every patched node with one kernel launch (needs CUDA).

A host-side update (`cuGraphExecKernelNodeSetParams`) costs about a microsecond of CPU per node
on the H200, so a graph whose input feeds 80 kernels costs 80 driver calls a call. CUDA 12.4+
lets a kernel node opt in to device-side updates (the `DEVICE_UPDATABLE_KERNEL_NODE`
attribute, set before the graph is instantiated); a kernel then rewrites its parameters with
`cudaGraphKernelNodeSetParam`.

Measured on the H200 (`scripts/probe_device_updates.py`,
`benchmarks/results/probe_device_updates-*.json`):
- an updater kernel launched on the replay's stream just before the replay reaches every
  opted-in node of that replay, from the second launch of the executable graph on: the first
  launch uploads the graph and overwrites earlier device-side updates. So the executable
  graph is uploaded (`cuGraphUpload`) once, before any update;
- an updater *node inside* the graph is not reliable: with a 32-kernel chain the replay hung,
  and with the updater as the graph's root the first replay missed the updates.

So the updater is an ordinary kernel launch, stream-ordered before each replay. The call's
tensor addresses travel in its by-value argument (`Bases`), copied at launch: no host buffer
to keep alive, no launch counter, and replays on other streams cannot race it. The host never
changes the executable graph per call; one launch replaces one driver call per node.

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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

MAX_TENSORS = 64  # inputs + outputs one updater launch takes (its by-value argument)
# The updater's launch shape: (blocks, threads per block); one thread per node either way.
# "blocks" spreads the nodes over one block each, "warps" over blocks of 32, "one" is one block.
SHAPES = {
    "blocks": lambda nodes: (nodes, 1),
    "warps": lambda nodes: (-(-nodes // 32), 32),
    "one": lambda nodes: (1, 128),
}
SHAPE = "one"

_SOURCE = r"""
struct Slot { unsigned long long node; unsigned long long offset; long long delta; unsigned int key; unsigned int width; };
struct Bases { unsigned long long at[%d]; };
extern "C" __global__ void graphlint_repoint(const Slot* slots, const int* firsts, int nodes, Bases bases) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < nodes; i += gridDim.x * blockDim.x) {
    for (int k = firsts[i]; k < firsts[i + 1]; ++k) {  // one thread per node: its slots in order
      Slot s = slots[k];
      unsigned long long value = bases.at[s.key] + (unsigned long long)s.delta;
      cudaGraphKernelNodeSetParam((cudaGraphDeviceNode_t)s.node, s.offset, &value, s.width);
    }
  }
}
"""

_FUNCTION: dict[tuple[tuple[int, int], str], Any] = {}  # (capability, kernel) -> (module, function), per process


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


def _compile(capability: tuple[int, int], source_text: str = "", name: str = "graphlint_repoint") -> Any:
    """A kernel of ``source_text`` (the updater's by default) for this device, compiled and
    linked with the device runtime."""
    from graphlint.runtime_sanitizer import driver

    key = (capability, name)
    if key in _FUNCTION:
        return _FUNCTION[key][1]
    drv = driver.bindings()
    nvcc, devrt = _toolkit()
    arch = f"{capability[0]}{capability[1]}"
    with tempfile.TemporaryDirectory() as folder:
        source = os.path.join(folder, "repoint.cu")
        with open(source, "w") as handle:
            handle.write(source_text or _SOURCE % MAX_TENSORS)
        ptx = os.path.join(folder, "repoint.ptx")
        command = [nvcc, f"-arch=compute_{arch}", "-rdc=true", "-ptx", source, "-o", ptx]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise UpdaterUnavailable(f"nvcc failed: {done.stderr.strip()[:300]}")
        with open(ptx, "rb") as handle:
            code = handle.read() + b"\0"
    state = driver.ok(drv.cuLinkCreate(0, [], []))
    try:
        driver.ok(drv.cuLinkAddData(state, drv.CUjitInputType.CU_JIT_INPUT_PTX, code, len(code), b"repoint", 0, [], []))
        driver.ok(drv.cuLinkAddFile(state, drv.CUjitInputType.CU_JIT_INPUT_LIBRARY, devrt.encode(), 0, [], []))
        cubin, size = driver.ok(drv.cuLinkComplete(state))
        image = ctypes.string_at(int(cubin), int(size))
    finally:
        drv.cuLinkDestroy(state)
    module = driver.ok(drv.cuModuleLoadData(image))
    function = driver.ok(drv.cuModuleGetFunction(module, name.encode()))
    _FUNCTION[key] = (module, function)
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
    """Opt a throwaway graph's node in, upload it, re-point its input twice and replay: only if
    that gives the right bits may a program's graph opt in (which is final)."""
    import torch

    from graphlint.runtime_sanitizer import driver
    from graphlint.runtime_sanitizer.capture.introspection import snapshot_graph

    drv = driver.bindings()
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
    handles = driver.ok(drv.cuGraphGetNodes(raw, 1))[0]
    device_nodes = make_device_updatable(handles[:1])
    if device_nodes[0] is None:
        return "the driver refused the device-updatable attribute"
    updater = DeviceUpdater(function, device_nodes, [DeviceSlot(0, where[0], 0, 0, 8)], 1)
    graph.instantiate()
    upload(graph)
    for source in (moved, x):
        updater.launch([source.data_ptr()])
        graph.replay()
        torch.cuda.synchronize()
        if not torch.equal(out, source * 2):
            return "a device-side update launched before the replay did not reach it"
    return ""


def upload(graph: Any) -> None:
    """Upload a torch graph's executable graph on the current stream and wait: its first launch
    would otherwise upload it then, overwriting the device-side updates made before."""
    import torch

    from graphlint.runtime_sanitizer import driver

    drv = driver.bindings()
    stream = drv.CUstream(torch.cuda.current_stream().cuda_stream)
    driver.ok(drv.cuGraphUpload(drv.CUgraphExec(graph.raw_cuda_graph_exec()), stream))
    torch.cuda.current_stream().synchronize()


def make_device_updatable(handles: Sequence[Any]) -> list[int | None]:
    """Opt each kernel node of a not yet instantiated graph in to device-side updates; its device
    handle, or None where the driver refused (that node keeps host-side updates). Irreversible:
    a node that opted in stays device-updatable."""
    from graphlint.runtime_sanitizer import driver

    drv = driver.bindings()
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


def _direct_launch() -> Any:
    """`cuLaunchKernel` straight from libcuda: a binding-level call costs several microseconds."""
    library = ctypes.CDLL("libcuda.so.1")
    function = library.cuLaunchKernel
    function.argtypes = [ctypes.c_void_p, *[ctypes.c_uint] * 7, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    function.restype = ctypes.c_int
    return function


def _current_stream() -> Callable[[], int]:
    """The raw handle of torch's current CUDA stream, the cheapest way torch offers."""
    import torch

    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        device = torch.cuda.current_device()
        return lambda: raw(device)
    return lambda: torch.cuda.current_stream().cuda_stream


class DeviceUpdater:
    """The updater of one graph: its slot table on the device and the launch that applies it.

    `launch(addresses)` enqueues the updater on torch's current stream, which must be the stream
    of the replay that follows (the launcher launches and replays back to back)."""

    def __init__(
        self,
        function: Any,
        device_nodes: Sequence[int | None],
        slots: Sequence[DeviceSlot],
        width: int,
        shape: str | None = None,
    ):
        import torch

        from graphlint.runtime_sanitizer import driver

        rows, firsts = pack_slots(device_nodes, slots)
        self._table = torch.tensor(rows or [[0, 0, 0, 0]], dtype=torch.int64).cuda()
        self._firsts = torch.tensor(firsts, dtype=torch.int32).cuda()
        self.width = max(width, 1)
        self._bases = (ctypes.c_uint64 * MAX_TENSORS)()
        self._values = [
            ctypes.c_uint64(self._table.data_ptr()),
            ctypes.c_uint64(self._firsts.data_ptr()),
            ctypes.c_int(len(firsts) - 1),
        ]
        self._args = (ctypes.c_void_p * 4)(*[ctypes.addressof(v) for v in self._values], ctypes.addressof(self._bases))
        self._function = driver.address(function)
        self._launch = _direct_launch()
        self._stream = _current_stream()
        self._blocks, self._threads = SHAPES[shape or SHAPE](max(len(firsts) - 1, 1))

    def launch(self, addresses: Sequence[int]) -> None:
        """Re-point the nodes at this call's addresses (one per input and output, 0 for unused
        ones) before the next replay on the current stream."""
        bases = self._bases
        for index, address in enumerate(addresses):
            bases[index] = address
        error = self._launch(
            self._function, self._blocks, 1, 1, self._threads, 1, 1, 0, self._stream(), self._args, None
        )
        if error != 0:
            raise UpdaterUnavailable(f"the updater launch failed (CUresult {error})")


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
