"""A parameterized launcher: re-point a captured graph at the caller's tensors (needs CUDA).

Instead of copying new data into static inputs and cloning results out of static outputs,
each call writes the caller's input addresses and freshly allocated output addresses into
the captured kernels' pointer arguments, launches, and returns the new outputs: no copy in,
no clone out, and no output of one call is overwritten by the next.

Everything per slot is computed once at build time (which node, which argument, which byte,
which tensor and offset); a call only packs the words that move into argument buffers that
live as long as the launcher, and issues one update per patched node. A call that cannot be
served safely (another shape, dtype, stride or device; a less aligned input than the kernels
were chosen for; an input inside memory the graph itself writes) falls back to copy-in /
replay / clone-out and says why once. Words that must stay fixed (parameters, pool memory,
anything not an input or output slot) are never touched, and an input or output that a
communication kernel uses, or that only a memcpy/memset node touches, is *pinned*: copied
through its static buffer while everything else is re-pointed (GL507 says which and why).

A training step works too: pass the optimizer, and everything the build runs (warm-ups,
captures, the self-check) is undone afterwards, so building changes no parameter, buffer,
optimizer state or RNG state of the program.
"""

from __future__ import annotations

import ctypes
import dataclasses
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from graphlint.launcher import update_cost
from graphlint.registry import Rule
from graphlint.runtime_sanitizer import driver
from graphlint.runtime_sanitizer.analysis import address_ranges
from graphlint.runtime_sanitizer.analysis import two_capture as analysis
from graphlint.runtime_sanitizer.analysis.graph_bodies import flatten, unread
from graphlint.runtime_sanitizer.analysis.report import SanitizerReport, analyze_pair, rule_finding
from graphlint.runtime_sanitizer.analysis.snapshot import GraphSnapshot
from graphlint.runtime_sanitizer.capture.introspection import kernel_params_with_arguments
from graphlint.runtime_sanitizer.capture.two_captures import (
    _extent,
    load_state,
    pool_segments,
    save_state,
    tensors_in,
)
from graphlint.runtime_sanitizer.guard.installed import publish, sanitizer_internal
from graphlint.runtime_sanitizer.guard.sites import user_site
from graphlint.runtime_sanitizer.rules import ALIGNMENT_HAZARD, FIXED_ADDRESS_REPOINTED


class LauncherRefused(RuntimeError):
    """The graph cannot be re-pointed safely; the message says why."""


@dataclass
class _Slot:
    param: int
    offset: int
    tensor: int  # index into inputs (role "input") or outputs (role "output")
    delta: int
    role: str
    width: int = 8  # 4: the field holds the pointer's low half


@dataclass
class _PatchedNode:
    handle: Any
    params: Any  # CUDA_KERNEL_NODE_PARAMS, pointing at the buffers below
    buffers: list[Any]  # ctypes buffers, one per argument, kept alive
    array: Any  # void*[] of the buffers
    slots: list[_Slot]
    raw: Any = None  # the same parameters as a C struct, for the direct driver call
    handle_int: int = 0
    writes: list[tuple[Any, tuple[str, int], int]] = dataclasses.field(
        default_factory=list
    )  # (ctypes field, tensor key, delta)
    extra: bool = False  # arguments passed as one packed `extra` buffer (buffers[0])
    index: int = -1  # the node's index in the capture's snapshot
    on_device: bool = False  # re-pointed by the device-side updater, not by a driver call


class _KernelNodeParams(ctypes.Structure):
    """CUDA_KERNEL_NODE_PARAMS_v2 of the driver API (cuda.h), laid out for a direct call."""

    _fields_ = [
        ("func", ctypes.c_void_p),
        ("gridDimX", ctypes.c_uint),
        ("gridDimY", ctypes.c_uint),
        ("gridDimZ", ctypes.c_uint),
        ("blockDimX", ctypes.c_uint),
        ("blockDimY", ctypes.c_uint),
        ("blockDimZ", ctypes.c_uint),
        ("sharedMemBytes", ctypes.c_uint),
        ("kernelParams", ctypes.c_void_p),
        ("extra", ctypes.c_void_p),
        ("kern", ctypes.c_void_p),
        ("ctx", ctypes.c_void_p),
    ]


# With updates="auto", from this many patched nodes on one updater launch re-points them: a
# launch costs about what four direct driver calls do (benchmarks/launcher_speed.py, H200).
DEVICE_THRESHOLD = 4

# The argument field a slot rewrites, by width: ctypes truncates to the field on assignment,
# so a 4-byte field receives the address's low half.
_FIELD = {8: ctypes.c_uint64, 4: ctypes.c_uint32}


def _direct_setter() -> Any:
    """`cuGraphExecKernelNodeSetParams_v2` straight from libcuda: a Python-level binding call
    costs several microseconds a node, a direct call well under one. None if unavailable."""
    try:
        library = ctypes.CDLL("libcuda.so.1")
        function = library.cuGraphExecKernelNodeSetParams_v2
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(_KernelNodeParams)]
    function.restype = ctypes.c_int
    return function


class ParameterizedLauncher:
    """``ParameterizedLauncher(fn, sample_inputs, module=None, optimizer=None)``; then
    ``launcher(*inputs)`` returns fresh output tensors. ``module`` (or ``fn`` itself when it is
    an ``nn.Module``) and ``optimizer`` name the memory the graph keeps at fixed addresses."""

    def __init__(
        self,
        fn: Callable,
        sample_inputs: Sequence[Any],
        module: Any = None,
        optimizer: Any = None,
        warmup: int = 2,
        updates: str = "auto",
        copy_when_cheaper: bool = True,
    ) -> None:
        """``updates``: "host" writes each patched node with one driver call; "device" re-points
        them with one updater kernel launched before each replay (`device_update`: needs the
        CUDA toolkit's nvcc and libcudadevrt at run time); "auto" (the default) takes device-side
        updates from `DEVICE_THRESHOLD` patched nodes on, where one launch is cheaper than the
        driver calls, and host-side updates below it or when the updater is not available or
        fails the self-check (`update_note` says which and why). ``copy_when_cheaper``: copy an
        input in (or clone an output out) when that costs less than re-pointing every kernel
        that uses it (`update_cost`: a small tensor many kernels read); `copied` says which and
        why. False re-points everything that can be."""
        import torch

        from graphlint.runtime_sanitizer.capture.two_captures import module_tensors, optimizer_tensors

        if optimizer is not None and not optimizer.state:
            raise LauncherRefused(
                "the optimizer has no state yet: run one eager step first (its state is created lazily, "
                "and a captured step needs it at fixed addresses)"
            )
        if updates not in ("host", "device", "auto"):
            raise ValueError(f"updates must be 'host', 'device' or 'auto', not {updates!r}")
        self._updates = updates
        self._copy_when_cheaper = copy_when_cheaper
        self._device_threshold = DEVICE_THRESHOLD
        self._last: tuple[int, ...] | None = None  # the addresses the host-updated nodes hold now
        self._torch = torch
        self._fixed = module_tensors(module if module is not None else fn) + optimizer_tensors(optimizer)
        saved = save_state(self._fixed)
        try:
            with sanitizer_internal():  # its captures and self-check are not the program's graphs
                self._build(fn, sample_inputs, warmup)
        finally:
            load_state(self._fixed, saved)  # the build ran the step several times: undo it

    def _build(self, fn: Callable, sample_inputs: Sequence[Any], warmup: int) -> None:
        torch = self._torch
        from graphlint.runtime_sanitizer.capture.two_captures import capture_attributed, capture_set, capture_shifted

        self._drv, self._ok = driver.bindings(), driver.ok
        self._fn = fn  # the self-check's eager reference
        fixed = self._fixed
        # The launcher owns its capture buffers: the caller's tensors are never written.
        owned = [t.clone() if isinstance(t, torch.Tensor) else t for t in sample_inputs]
        first, second, repeat, moved_repeat = capture_set(fn, owned, fixed, warmup)
        self.report: SanitizerReport = analyze_pair(
            first.snapshot, second.snapshot, ("<launcher>", 1), "fn", repeat.snapshot, None, moved_repeat.snapshot
        )
        if any(f.code == "GL501" for f in self.report.findings):
            raise LauncherRefused("two captures differ (GL501): there is no single graph to re-point")
        self._capture = first
        self._keep: tuple[object, ...] = (
            second,
            repeat,
            moved_repeat,
        )  # alive while analysing: no later capture may reuse their addresses
        self._ordering = _flat(capture_attributed(fn, owned, first.snapshot, fixed, warmup))
        self.inputs = first.inputs
        self.outputs = first.outputs
        self._meta = [(t.shape, t.stride(), t.dtype, t.get_device()) for t in self.inputs]
        self._extents = [max(_extent(t), 1) for t in self.inputs]
        self._out_meta = [(t.shape, t.stride(), t.dtype, t.device) for t in self.outputs]
        self.fallback_reason: str | None = None
        self._warned: set[str] = set()
        self._poison = False
        self._nodes = self._prepare(first)
        self._required = {}
        for index, tensor in enumerate(self.inputs):
            if index in self._pinned_inputs:
                continue  # copied into its static buffer: its alignment never changes
            shifted = capture_shifted(fn, owned, index, fixed, warmup)
            self._required[index] = analysis.required_alignment(
                first.snapshot, shifted.snapshot, analysis.alignment_of(tensor.data_ptr()), tensor.element_size()
            )
        self._written = address_ranges.merged(self._written_ranges(first))
        self._prepare_direct()
        self.update_note = "host-side updates requested"
        self._updater = self._prepare_updater(first) if self._updates != "host" else None
        if not _has_exec(first.graph):
            first.graph.instantiate()
        self._exec = self._drv.CUgraphExec(first.graph.raw_cuda_graph_exec())
        self._exec_handle = int(first.graph.raw_cuda_graph_exec())
        if self._updater is not None:
            from graphlint.launcher.device_update import upload

            upload(first.graph)  # its first launch would undo the device-side updates made before
        self._host_nodes = [node for node in self._nodes if not node.on_device]
        if self.fallback_reason is None:
            self._self_check()
        if self._updater is not None and self.fallback_reason is not None:
            self._device_failed()
        self._keep = ()  # analysis done: give their private pools back
        self.freed_input_bytes = self._release_static_inputs()

    def _release_static_inputs(self) -> int:
        """Free the static buffer of every input the calls re-point, and say how many bytes that
        gives back: the memory the launcher saves against copy-in/replay/clone-out, which keeps
        a static copy of every input for as long as the graph lives. No kernel reads those
        buffers any more (the self-check passed on fresh inputs at other addresses); a call
        that must copy (`_fallback`) allocates them again. Nothing is freed when the build fell
        back, and a pinned or copied input keeps its buffer: its kernels still read it."""
        if self.fallback_reason is not None:
            return 0
        freed = 0
        for index, tensor in enumerate(self.inputs):
            if index not in self._pinned_inputs and tensor is not None:
                freed += self._extents[index]
                self.inputs[index] = None
        return freed

    def _static_inputs(self) -> list[Any]:
        """The static input buffers, allocated again where the build freed them (`_restore`
        re-points their kernels at the new ones)."""
        for index, tensor in enumerate(self.inputs):
            if tensor is None:
                shape, stride, dtype, device = self._meta[index]
                self.inputs[index] = self._torch.empty_strided(
                    shape, stride, dtype=dtype, device=self._torch.device("cuda", device)
                )
        return self.inputs

    def _prepare_direct(self) -> None:
        """Each patched node's parameters as a C struct for the direct driver call, and the
        argument fields each slot rewrites."""
        self._direct = _direct_setter()
        for node in self._nodes:
            node.handle_int = int(node.handle)
            p = node.params
            node.raw = _KernelNodeParams(
                int(p.func),
                p.gridDimX,
                p.gridDimY,
                p.gridDimZ,
                p.blockDimX,
                p.blockDimY,
                p.blockDimZ,
                p.sharedMemBytes,
                0 if node.extra else ctypes.addressof(node.array),
                ctypes.addressof(node.array) if node.extra else 0,
                0,
                0,
            )
            node.writes = [
                (
                    _FIELD[slot.width].from_address(ctypes.addressof(node.buffers[slot.param]) + slot.offset),
                    (slot.role, slot.tensor),
                    slot.delta,
                )
                for slot in node.slots
            ]

    def _device_failed(self) -> None:
        """The self-check failed with device-side updates. Asked for them explicitly: refuse (the
        fallback's own re-pointing goes through the same updater). Under "auto": host-side
        updates, which override device-side ones on opted-in nodes, judged by a new self-check."""
        if self._updates == "device":
            raise LauncherRefused(f"device-side updates: {self.fallback_reason}")
        self.update_note = f"host-side updates: device-side ones failed the self-check ({self.update_note})"
        self._updater = None
        for node in self._nodes:
            node.on_device = False
        self._host_nodes = list(self._nodes)
        self._last = None
        self.fallback_reason = None
        self._self_check()

    def _prepare_updater(self, capture) -> Any:
        """Device-side updates for the patched nodes that accept them (`device_update`): one
        launch a call instead of one driver call per node. Before instantiation: the nodes must
        opt in first. All nodes or none; None if too few nodes move, the driver refuses a node
        or the updater cannot be built here (the reason is kept in `update_note`)."""
        from graphlint.launcher import device_update

        self.update_note = ""
        if self._updates == "auto" and len(self._nodes) < self._device_threshold:
            self.update_note = f"{len(self._nodes)} patched nodes: host-side updates are cheaper"
            return None
        keys = [("input", i) for i in range(len(self.inputs))] + [("output", i) for i in range(len(self.outputs))]
        index = {key: k for k, key in enumerate(keys)}
        try:
            function = device_update.updater_function(len(keys))
            handles = device_update.make_device_updatable([node.handle for node in self._nodes])
        except device_update.UpdaterUnavailable as error:
            self.update_note = str(error)
            return None
        if any(handle is None for handle in handles):
            # All or none: a host-side update may make the next launch upload the graph again,
            # which would undo the device-side updates launched before it.
            self.update_note = f"the driver refused device-side updates for {handles.count(None)} patched nodes"
            return None
        slots = []
        for position, node in enumerate(self._nodes):
            node.on_device = True
            base = capture.snapshot.nodes[node.index].params
            for slot in node.slots:
                slots.append(
                    device_update.DeviceSlot(
                        position,
                        base[slot.param].offset + slot.offset,
                        index[(slot.role, slot.tensor)],
                        slot.delta,
                        slot.width,
                    )
                )
        self._keys = keys
        try:
            updater = device_update.DeviceUpdater(function, handles, slots, len(keys))
        except Exception as error:  # host-side updates remain; the self-check judges them
            for node in self._nodes:
                node.on_device = False
            self.update_note = f"the updater could not be set up: {type(error).__name__}: {error}"
            return None
        self.update_note = f"device-side: {len(slots)} slots in {sum(n.on_device for n in self._nodes)} nodes"
        return updater

    # -- build ---------------------------------------------------------------------------
    def _prepare(self, capture) -> list[_PatchedNode]:
        drv, ok = self._drv, self._ok
        words = [w for w in self.report.words if w.role in (analysis.INPUT, analysis.OUTPUT)]
        words = [w for w in words if w.role == analysis.INPUT or self._really_output(w)]
        self._pin(words, capture)
        aliased = [w for w in words if w.role == analysis.INPUT and capture.snapshot.region_of(w.first, ("output",))]
        if aliased:
            self.fallback_reason = "an output aliases an input"
        blind = unread(capture.snapshot)
        if blind and self.fallback_reason is None:
            self.fallback_reason = (
                f"node {blind[0].index} is a conditional node whose body could not be read: a kernel in it may use "
                "an input or output that re-pointing would not reach"
            )
        words = [w for w in words if not self._is_pinned(w)]
        graph = drv.CUgraph(capture.graph.raw_cuda_graph())
        handles = ok(drv.cuGraphGetNodes(graph, len(capture.snapshot.nodes)))[0]
        by_node: dict[int, list[_Slot]] = {}
        for w in words:
            assert w.delta is not None, w  # an input or output word has its offset in the region (tensor_index)
            by_node.setdefault(w.node, []).append(
                _Slot(w.param, w.offset, analysis.tensor_index(w), w.delta, w.role, w.width)
            )
        nodes = []
        for node_index, slots in sorted(by_node.items()):
            node = capture.snapshot.nodes[node_index]
            handle = handles[node_index]
            params, buffers, array = kernel_params_with_arguments(handle, [p.data for p in node.params], node.extra)
            nodes.append(_PatchedNode(handle, params, buffers, array, slots, extra=node.extra, index=node_index))
        return nodes

    def _pin(self, words: list[analysis.Word], capture) -> None:
        """Inputs and outputs copied through their static buffers instead of re-pointed
        (`analysis.pins`); GL507 for those a communication kernel uses."""
        views = [index for index, output in enumerate(capture.outputs) if _is_view(output)]
        found = analysis.pins(words, capture.snapshot, len(capture.outputs), views, ordering=self._ordering)
        # "input 0" / "output 1" -> why it is copied, not re-pointed
        self.pinned: dict[str, str] = {f"{role} {index}": pin.reason for (role, index), pin in found.items()}
        for pin in found.values():
            if pin.fixed_address:
                self._report(FIXED_ADDRESS_REPOINTED, pin.reason)
        copied = self._cheaper_copies(words, capture, set(found)) if self._copy_when_cheaper else {}
        # "input 0" -> why copying it is cheaper than re-pointing it (not a pin: nothing forbids it)
        self.copied: dict[str, str] = {f"{role} {index}": why for (role, index), why in copied.items()}
        kept = set(found) | set(copied)
        self._pinned_inputs = {index for role, index in kept if role == analysis.INPUT}
        self._pinned_outputs = {index for role, index in kept if role == analysis.OUTPUT}

    def _cheaper_copies(self, words: list[analysis.Word], capture, pinned: set) -> dict[tuple[str, int], str]:
        """Inputs and outputs (not pinned already) that one copy brings in more cheaply than
        re-pointing every node that uses them (`update_cost`)."""
        keys = [((w.role, analysis.tensor_index(w)), w.node) for w in words]
        nodes = update_cost.nodes_per_tensor((key, node) for key, node in keys if key not in pinned)
        tensors = {analysis.INPUT: capture.inputs, analysis.OUTPUT: capture.outputs}
        sizes = {(role, i): tensors[role][i].numel() * tensors[role][i].element_size() for role, i in nodes}
        return update_cost.cheaper_to_copy(nodes, sizes)

    def _is_pinned(self, word: analysis.Word) -> bool:
        pinned = self._pinned_inputs if word.role == analysis.INPUT else self._pinned_outputs
        return analysis.tensor_index(word) in pinned

    def _written_ranges(self, capture) -> list[tuple[int, int]]:
        """Memory the replayed graph writes at fixed addresses: its private pool, and the
        parameters, buffers and optimizer state it updates (all of them when the writes could
        not be attributed). A kernel re-pointed into it would read values that change under it."""
        ranges = [(start, start + size) for start, size in pool_segments(capture.graph)]
        writes = None if self._ordering is None else [w for node in self._ordering.nodes for w in node.writes]
        for tensor in self._fixed:
            start = tensor.data_ptr()
            end = start + tensor.untyped_storage().nbytes()
            if writes is None or any(s < end and start < s + n for s, n in writes):
                ranges.append((start, end))
        return ranges

    def _report(self, rule: Rule, message: str) -> None:
        """A finding at the user's call site, in `self.report` and for the pytest plugin."""
        finding = rule_finding(rule, message, user_site())
        self.report.findings.append(finding)
        publish(finding)

    def _really_output(self, word: analysis.Word) -> bool:
        """See `analysis.really_output`: kept when nothing was attributed."""
        return self._ordering is None or analysis.really_output(word, self._ordering)

    def _self_check(self) -> None:
        """Two calls on fresh inputs: each must equal copy-in/replay/clone-out bit for bit (the
        same kernels run), and the second must leave the first's output untouched. Anything
        else means pointers the analysis cannot see: fall back, loudly. Equal to its own graph
        is not enough: a graph that gives NaN where eager computes numbers gives the same NaN
        both ways, so the second call is also held against an eager run from the same state, and
        a non-finite value eager does not have fails it. Equal outputs are not enough either: a
        re-pointed kernel that writes past the caller's output can land in a weight, after which
        copy-in/replay and eager read the same broken weight (timm's levit in bfloat16 did, with
        outputs that could not be attributed: `analysis.UNATTRIBUTED_OUTPUT`), so the state the
        call leaves must equal, bit for bit, the state copy-in/replay leaves."""
        torch = self._torch
        fresh = [_like(t) for t in self.inputs]
        second = [_like(t) for t in self.inputs]
        self._poison = True  # an output element no kernel writes stays NaN, and NaN equals nothing
        try:
            first_out = self(*fresh)
            kept = [t.clone() for t in first_out]
            state = save_state(self._fixed)  # a training step moves on: compare from the same state
            second_out = self(*second)
            launched_state = state_fingerprint(self._fixed)
        finally:
            self._poison = False
        load_state(self._fixed, state)
        expected = self._fallback(second, None)
        ok = all(torch.equal(a, b) for a, b in zip(second_out, expected, strict=True)) and all(
            torch.equal(a, b) for a, b in zip(first_out, kept, strict=True)
        )
        if not ok:
            self.fallback_reason = "self-check failed: re-pointed results differ (pointers the analysis cannot see)"
            return
        if not torch.equal(launched_state, state_fingerprint(self._fixed)):
            self.fallback_reason = (
                "self-check failed: the re-pointed call left the parameters, buffers or optimizer state other than "
                "copy-in/replay did (a kernel re-pointed into memory the call does not own)"
            )
            return
        load_state(self._fixed, state)
        diverged = nonfinite_divergence(second_out, tensors_in(self._fn(*second)))
        if diverged:
            self.fallback_reason = f"self-check failed: {diverged}"

    # -- calls ---------------------------------------------------------------------------
    def _why_not(self, inputs: Sequence[Any]) -> tuple[str, Rule | None] | None:
        """Why this call cannot be served by re-pointing, and the rule it would break (if any)."""
        if self.fallback_reason:
            return self.fallback_reason, None
        if len(inputs) != len(self.inputs):
            return f"expected {len(self.inputs)} inputs, got {len(inputs)}", None
        tensor_type, pinned, written = self._torch.Tensor, self._pinned_inputs, self._written
        for index, (tensor, (shape, stride, dtype, device)) in enumerate(zip(inputs, self._meta, strict=True)):
            if not isinstance(tensor, tensor_type):
                return f"input {index} is not a tensor", None
            # get_device() is an int; comparing torch.device objects costs a microsecond an input
            if tensor.shape != shape or tensor.stride() != stride or tensor.dtype != dtype:
                return f"input {index} has another shape, stride or dtype than at capture", None
            if tensor.get_device() != device:
                return f"input {index} is on another device than at capture", None
            if index in pinned:
                continue
            address = tensor.data_ptr()
            if address_ranges.overlaps(written, address, address + self._extents[index]):  # same shape: same extent
                return (
                    f"input {index} lies in memory the graph itself writes (its private pool, or a parameter it "
                    "updates): re-pointing a kernel there would read values that change during the replay (GL507)",
                    FIXED_ADDRESS_REPOINTED,
                )
            if address & (self._required[index] - 1):  # required alignments are powers of two
                return (
                    f"input {index} is {analysis.alignment_of(address)}-byte aligned; its kernels need "
                    f"{self._required[index]} (GL502)",
                    ALIGNMENT_HAZARD,
                )
        return None

    def __call__(self, *inputs: Any) -> list[Any]:
        refusal = self._why_not(inputs)
        if refusal is not None:
            return self._fallback(inputs, *refusal)
        torch = self._torch
        pinned_out = self._pinned_outputs
        outputs = [
            None if index in pinned_out else torch.empty_strided(shape, stride, dtype=dtype, device=device)
            for index, (shape, stride, dtype, device) in enumerate(self._out_meta)
        ]
        if self._poison:
            for tensor in outputs:  # the self-check: an element no kernel writes stays visibly wrong
                if tensor is not None:
                    tensor.fill_(float("nan") if tensor.is_floating_point() else -1)
        for index in self._pinned_inputs:
            self.inputs[index].copy_(inputs[index])
        addresses = {("input", i): t.data_ptr() for i, t in enumerate(inputs)}
        addresses.update({("output", i): t.data_ptr() for i, t in enumerate(outputs) if t is not None})
        self._repoint(addresses)
        self._replay()
        for index in pinned_out:
            outputs[index] = self.outputs[index].clone()
        return outputs

    def _fallback(self, inputs: Sequence[Any], reason: str | None, rule: Rule | None = None) -> list[Any]:
        if reason is not None and reason not in self._warned:
            self._warned.add(reason)
            warnings.warn(f"graphlint launcher: copy-in/replay/clone-out because {reason}", stacklevel=3)
            if rule is not None:
                self._report(rule, reason)
        if len(inputs) != len(self.inputs) or any(
            getattr(t, "shape", None) != meta[0] for t, meta in zip(inputs, self._meta, strict=False)
        ):
            raise LauncherRefused(f"cannot serve this call even by copying: {reason}")
        self._restore()
        for static, new in zip(self._static_inputs(), inputs, strict=True):
            static.copy_(new)
        self._replay()
        return [t.clone() for t in self.outputs]

    def _restore(self) -> None:
        """Point the patched nodes back at the launcher's own static buffers."""
        addresses = {("input", i): t.data_ptr() for i, t in enumerate(self._static_inputs())}
        addresses.update({("output", i): t.data_ptr() for i, t in enumerate(self.outputs)})
        self._repoint(addresses)

    def _repoint(self, addresses: dict[tuple[str, int], int]) -> None:
        """Launch the updater with the addresses (device-side updates) or write them into each
        patched node (host-side); skipped when the nodes already hold them (a caller that
        reuses its buffers, an output block the allocator hands back)."""
        current = tuple(addresses.values())
        if current == self._last:
            return  # device-side updates persist across replays, like host-side ones
        if self._updater is not None:
            self._updater.launch([addresses.get(key, 0) for key in self._keys])
        direct = self._direct
        if direct is not None:
            exec_handle = self._exec_handle
            for node in self._host_nodes:
                for field, key, delta in node.writes:  # inlined _pack: this loop is the per-call cost
                    field.value = addresses[key] + delta
                if direct(exec_handle, node.handle_int, node.raw) != 0:
                    raise LauncherRefused("the driver refused a kernel node update")
        else:
            for node in self._host_nodes:
                _pack(node, addresses)
                self._ok(self._drv.cuGraphExecKernelNodeSetParams(self._exec, node.handle, node.params))
        self._last = current

    def _replay(self) -> None:
        """On the current stream, right after `_repoint`'s updater launch (if any)."""
        self._capture.graph.replay()  # same stream as the allocations: ordered for the allocator


def _flat(ordering: GraphSnapshot | None) -> GraphSnapshot | None:
    """The attributed capture with its bodies inlined: node indices as in `report.words`."""
    return flatten(ordering) if ordering is not None else None


def _is_view(tensor: Any) -> bool:
    """Whether the tensor is a view into a larger buffer (a reduction's scalar in its workspace)."""
    storage = tensor.untyped_storage()
    return storage.data_ptr() != tensor.data_ptr() or storage.nbytes() != tensor.numel() * tensor.element_size()


def _pack(node: _PatchedNode, addresses: dict[tuple[str, int], int]) -> None:
    """Write each slot's address (or its low half) into the node's argument buffers."""
    for field, key, delta in node.writes:
        field.value = addresses[key] + delta


def state_fingerprint(tensors: Sequence[Any]) -> Any:
    """One int64 per tensor: the sum of its bits read as integers (NaN included, which
    `torch.equal` says differs from itself). Enough to see a stray write into a weight without
    a third copy of a model's whole state during the build."""
    import torch

    ints = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
    sums = [
        t.detach().contiguous().view(ints[t.element_size()]).sum(dtype=torch.int64)
        if t.element_size() in ints
        else t.detach().abs().sum().to(torch.int64)
        for t in tensors
    ]
    device = next((t.device for t in sums if t.is_cuda), "cpu")  # CPU step counters beside CUDA weights
    return torch.stack([t.to(device) for t in sums]) if sums else torch.zeros(0, dtype=torch.int64)


def nonfinite_divergence(outputs: Sequence[Any], eager: Sequence[Any]) -> str | None:
    """Where the launched outputs hold NaN or infinity and eager's (from the same inputs and
    state) are finite: a graph that does not compute what the program computes, whatever its
    pointers. None when there is no such element, or the outputs cannot be paired."""
    import torch

    if len(outputs) != len(eager):
        return f"the graph gives {len(outputs)} outputs and eager {len(eager)}"
    for index, (out, reference) in enumerate(zip(outputs, eager, strict=True)):
        if not (out.is_floating_point() and reference.is_floating_point()) or out.shape != reference.shape:
            continue
        wrong = torch.isfinite(reference) & ~torch.isfinite(out)
        count = int(wrong.sum().item())
        if count:
            return (
                f"output {index} has {count} non-finite value{'s' if count != 1 else ''} where eager computes "
                f"finite ones ({reference.numel()} elements): the graph itself diverges from eager"
            )
    return None


def _like(tensor: Any) -> Any:
    """Fresh data of the same kind: random floats, or integers in the sample's range."""
    import torch

    if tensor.is_floating_point():
        return torch.randn_like(tensor)
    high = int(tensor.max().item()) + 1 if tensor.numel() else 1
    return torch.randint_like(tensor, 0, max(high, 1))


def _has_exec(graph: Any) -> bool:
    try:
        return bool(graph.raw_cuda_graph_exec())
    except Exception:
        return False
