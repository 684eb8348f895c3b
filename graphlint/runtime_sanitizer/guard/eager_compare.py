"""GL512 (`--compare-eager`): each captured `with torch.cuda.graph(g):` block is run again,
eagerly, before each replay of its graph, and the replay's outputs are compared with it.

The block's own source runs again (`analysis/eager_region.py`), in a copy of its frame's
namespace, so it reads what the program holds at that replay; the graph replays what it
froze at the capture. Where they differ, the first differing kernel is found by bisection
(`analysis/divergence.py`): prefixes of the graph (its first k nodes, cloned and
instantiated apart) are launched, and the output of the operator that created node k is read
in place and compared with that operator's output in a second eager run.

The program must compute what it always did. So every run of the sanitizer's own is undone:
- the eager runs go under a dispatch mode that backs up each tensor that existed before
  them as it is first written in place, and puts them all back after (and the CPU and CUDA
  random states); they run under `no_grad`, so a block that trains fails instead of stepping
  twice, and is refused;
- before a replay, the memory the block writes in place is kept, and the prefix launches of a
  bisection start from it; after the bisection, that memory and the graph's outputs get the
  replay's values back.
A block is refused (GL500, once, with the reason) when it cannot be run again like that: one
that draws random numbers (its replay and eager run draw differently), one whose graph holds
kernels no PyTorch operator launched (their writes could not be undone), and whatever
`eager_region` refuses. Comparing stops for a graph at its first divergence.
"""

from __future__ import annotations

import contextlib
import linecache
import types
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

from graphlint.runtime_sanitizer.analysis.divergence import (
    CapturedOp,
    Divergence,
    Seen,
    changed_reads,
    divergence_message,
    first_divergent,
)
from graphlint.runtime_sanitizer.analysis.eager_region import STORE, NotComparable, RegionProgram, region_program
from graphlint.runtime_sanitizer.capture.two_captures import _capture_graph_node_count, tensors_in
from graphlint.runtime_sanitizer.guard.dispatch_modes import guard_mode_base
from graphlint.runtime_sanitizer.guard.sites import user_site

# Tolerances for "differs", by dtype class: the same kernels give equal bits, but a library may
# pick another algorithm under capture than eagerly (cuBLAS workspaces).
_TOLERANCE = {"float32": (1e-4, 1e-5), "float64": (1e-7, 1e-9)}
_LOW_PRECISION = (1e-2, 1e-2)


@dataclass
class _Output:
    """One tensor the graph leaves where the program reads it, or the eager run's value of it."""

    text: str  # how the block names it (`y`, `self.out[2]`, `y[0]`)
    tensor: Any  # the eager run's value (a copy)
    live: Any = None  # memory the block writes in place: the program's tensor, read after the replay


@dataclass
class _Region:
    """One captured block, as GL512 follows it from its capture to its first divergence."""

    label: str
    site: tuple[str, int]
    program: RegionProgram | None = None
    refused: str | None = None
    frame: FrameType | None = None
    pinned: dict[str, Any] = field(default_factory=dict)
    autocast: tuple[bool, Any] = (False, None)
    ops: list[CapturedOp] = field(default_factory=list)
    op_outputs: list[list[tuple[int, tuple, tuple, Any]]] = field(default_factory=list)  # (ptr, shape, stride, dtype)
    unattributed: int = 0  # graph nodes no operator created (Triton, extensions)
    # The static inputs, held: a program that rebinds one frees the memory its graph still reads,
    # and the eager runs' allocations must not be what reuses it (the results would change).
    held: dict[int, Any] = field(default_factory=dict)
    seen: dict[str, Seen] = field(default_factory=dict)  # what the names the block reads held at the capture
    outputs: list[tuple[str, Any]] = field(default_factory=list)  # (text, weakref) on the graph's side
    eager: list[_Output] | None = None  # this replay's eager outputs
    kept: dict[int, tuple[Any, Any]] | None = None  # storage -> (its tensor, its bytes before the replay)
    done: bool = False


def keeping_raw_graphs(cls: Any) -> tuple[Any, Any]:
    """A `__new__` and an `__init__` for the graph class ``cls`` with which every new graph keeps
    its raw graph (`keep_graph=True`) whatever its caller asked. Depending on the release,
    `keep_graph` is taken by `__new__` or by `__init__`: both are given."""
    new, init = cls.__new__, cls.__init__

    def keeping_new(klass: Any, keep_graph: bool = False, *args: Any, **kwargs: Any) -> Any:
        return new(klass, True, *args, **kwargs)

    def keeping_init(graph: Any, keep_graph: bool = False, *args: Any, **kwargs: Any) -> None:
        try:
            init(graph, True, *args, **kwargs)
        except TypeError:  # an __init__ that takes no keep_graph
            init(graph, *args, **kwargs)

    return staticmethod(keeping_new), keeping_init


class EagerCompare:
    """The GL512 watch of one guard. `report(message, site)` makes a finding; `refuse(label,
    reason, site)` says a graph is not compared (GL500)."""

    def __init__(self, report: Callable[[str, tuple[str, int]], None], refuse: Callable[[str, str, tuple], None]):
        self._report = report
        self._refuse = refuse
        self._regions: dict[int, _Region] = {}
        self._tracing: list[tuple[_Region, Any]] = []
        self._saved_new: tuple[Any, Any] | None = None
        self.compared_replays = 0

    # -- install: graphs keep their raw graph, so prefixes can be cut from it ---------------
    def install(self, torch: Any) -> None:
        """Graphs made from now on keep their raw graph (`keeping_raw_graphs`), which a bisection
        cuts prefixes from; such a graph is instantiated by its first replay, with the same
        results."""
        cls = torch.cuda.CUDAGraph
        self._saved_new = (cls.__dict__.get("__new__"), cls.__dict__.get("__init__"))
        cls.__new__, cls.__init__ = keeping_raw_graphs(cls)  # type: ignore[assignment,method-assign]

    def uninstall(self, torch: Any) -> None:
        if self._saved_new is None:
            return
        cls = torch.cuda.CUDAGraph
        for name, original in zip(("__new__", "__init__"), self._saved_new, strict=True):
            if original is not None:
                setattr(cls, name, original)
            else:
                delattr(cls, name)
        self._saved_new = None

    # -- capture ----------------------------------------------------------------------------
    def capture_begun(self, graph: Any, label: str, site: tuple[str, int], frame: FrameType | None) -> None:
        import torch

        region = _Region(label, site, frame=frame)
        self._track(graph, region)
        try:
            source = "".join(linecache.getlines(site[0]))
            region.program = region_program(source, site[0], site[1])
        except NotComparable as why:
            region.refused = str(why)
            return
        try:
            if frame is not None:
                names = region.program.pinned
                region.pinned = {n: frame.f_locals[n] for n in names if n in frame.f_locals}
                region.seen = _seen_reads(region.program.reads, _scope(frame))
            region.autocast = (torch.is_autocast_enabled("cuda"), torch.get_autocast_dtype("cuda"))
            trace = _CaptureTrace(region)
            trace.__enter__()
        except Exception as error:  # never break the program: this graph is not compared, and says why
            region.refused = f"{type(error).__name__}: {error}"
            return
        self._tracing.append((region, trace))

    def capture_refused(self, graph: Any, label: str, site: tuple[str, int], what: str) -> None:
        """A capture GL512 does not compare: said at its first replay (GL500)."""
        self._track(graph, _Region(label, site, refused=f"{what} are not compared"))

    def _track(self, graph: Any, region: _Region) -> None:
        """Follow a graph until it is freed: its frame and pinned values go with it."""
        self._regions[id(graph)] = region
        with contextlib.suppress(TypeError):
            weakref.finalize(graph, self._regions.pop, id(graph), None)

    def capture_ended(self, graph: Any, failed: bool) -> None:
        region = self._regions.get(id(graph))
        if region is None or not self._tracing or self._tracing[-1][0] is not region:
            return
        self._tracing.pop()[1].__exit__(None, None, None)
        if failed:
            self._regions.pop(id(graph), None)
            return
        if region.unattributed:
            region.refused = (
                f"its graph holds {region.unattributed} kernel(s) that no PyTorch operator launched (Triton, an "
                "extension): an eager run's writes through them could not be undone"
            )
            return
        frame, program = region.frame, region.program
        if frame is None or program is None:
            return
        scope = _scope(frame)
        for text in program.outputs:
            with contextlib.suppress(Exception):
                for index, tensor in enumerate(_cuda_tensors(eval(text, scope))):
                    region.outputs.append((_spelled(text, index), weakref.ref(tensor)))

    # -- replay -----------------------------------------------------------------------------
    def before_replay(self, graph: Any) -> None:
        region = self._regions.get(id(graph))
        if region is None or region.done:
            return
        if region.refused is not None:
            region.done = True
            self._refuse(region.label, region.refused, region.site)
            return
        try:
            region.eager, region.kept, _ = self._eager(region)
        except Exception as why:  # a _Refusal, or the sanitizer's own failure: never the program's
            region.done = True
            self._refuse(region.label, str(why), region.site)

    def after_replay(self, graph: Any, replay: int) -> None:
        region = self._regions.get(id(graph))
        if region is None or region.eager is None:
            return
        eager, kept, region.eager, region.kept = region.eager, region.kept or {}, None, None
        self.compared_replays += 1
        try:
            differences = _differences(region, eager)
        except Exception as error:  # never break the program
            region.done = True
            self._refuse(region.label, f"comparing failed: {type(error).__name__}: {error}", region.site)
            return
        if not differences:
            return
        region.done = True
        try:
            first, captured_names, why_not = self._bisect(region, graph, kept)
        except Exception as error:  # the finding stands; only the first kernel stays unnamed
            first, captured_names, why_not = None, [], f"the bisection failed: {type(error).__name__}: {error}"
        changed: list[str] = []
        if region.frame is not None and region.program is not None:
            now = _scope(region.frame, region.pinned)
            changed = changed_reads(region.seen, _seen_reads(region.program.reads, now))
        message = divergence_message(
            region.label, replay, differences, first, region.ops, captured_names, why_not, changed
        )
        site = region.ops[first.index].site if first is not None else region.site
        self._report(message, site)

    # -- the eager run ----------------------------------------------------------------------
    def _eager(self, region: _Region, record: bool = False) -> tuple[list[_Output], dict, list]:
        """The block run eagerly on what the program holds now; its outputs (copies), the
        memory it wrote in place as it was before (restored already), and its operators (with
        copies of their outputs when ``record``)."""
        import torch

        assert region.program is not None
        frame = region.frame
        if frame is None:
            raise _Refusal("the frame that captured it is not known")
        shadow: dict[str, Any] = {}

        def store(text: str, value: Any, container: Any, key: Any) -> None:
            if isinstance(container, torch.Tensor):
                container[key] = value  # device memory, written in place: undone by the mode
            else:
                shadow[text] = value

        scope = {**_scope(frame, region.pinned), STORE: store}
        mode = _UndoWrites(record)
        cpu_rng, cuda_rng = torch.get_rng_state(), torch.cuda.get_rng_state()
        enabled, dtype = region.autocast
        before = allocated_blocks(torch)
        try:
            with torch.no_grad(), torch.autocast("cuda", dtype=dtype, enabled=enabled), mode:
                exec(region.program.code, scope)
            made = allocated_blocks(torch) - before  # allocations no operator reported (Inductor's)
            outputs = []
            for text in region.program.outputs:
                value = shadow[text] if text in shadow else scope.get(text)
                outputs += [_Output(_spelled(text, i), t.detach().clone()) for i, t in enumerate(_cuda_tensors(value))]
            outputs += [
                _Output(f"memory it writes in place ({_describe(t)})", t.clone(), t) for t in mode.written(made)
            ]
        except Exception as error:
            raise _Refusal(f"running the block eagerly raised {type(error).__name__}: {error}") from None
        finally:
            kept = mode.undo()
            torch.set_rng_state(cpu_rng)
            torch.cuda.set_rng_state(cuda_rng)
        if mode.random:
            raise _Refusal(f"it draws random numbers (`{mode.random}`): its replay and an eager run draw differently")
        return outputs, kept, mode.ops

    # -- bisection --------------------------------------------------------------------------
    def _bisect(
        self, region: _Region, graph: Any, kept: dict[int, tuple[Any, Any]]
    ) -> tuple[Divergence | None, list[str], str | None]:
        """The first differing operator, from prefixes of the graph launched on the memory as it
        was before the replay; the replay's results are put back afterwards."""
        import torch

        after = {key: (t, _storage_bytes(t).clone()) for key, (t, _) in kept.items()}
        outputs = [(ref(), None) for _, ref in region.outputs]
        outputs = [(t, t.detach().clone()) for t, _ in outputs if t is not None]
        try:
            raw = graph.raw_cuda_graph()
        except Exception as error:
            return None, [], f"the graph's node list is not readable ({type(error).__name__}: {error})"
        try:
            _put_back(kept)
            _, _, eager_ops = self._eager(region, record=True)
            names = [name for name, _ in eager_ops]

            def differs(index: int) -> bool:
                _put_back(kept)
                _launch_prefix(raw, region.ops[index].end_node)
                mine = [_view(*meta) for meta in region.op_outputs[index]]
                theirs = eager_ops[index][1]
                return len(mine) != len(theirs) or any(_differs(a, b) for a, b in zip(mine, theirs, strict=True))

            return first_divergent(region.ops, names, differs), names, None
        except _Refusal as why:
            return None, [], str(why)
        except Exception as error:  # the finding stands; only the first kernel stays unnamed
            return None, [], f"the bisection failed: {type(error).__name__}: {error}"
        finally:
            _put_back(after)
            for tensor, saved in outputs:
                tensor.copy_(saved)
            torch.cuda.synchronize()


class _Refusal(Exception):
    """A block GL512 does not compare, with the reason."""


class _CaptureTrace(guard_mode_base()):  # type: ignore[misc]  # torch is imported only when a guard is
    """During a compared capture: each operator that made device tensors, its line, the graph
    nodes it created and where its outputs live; and how many nodes no operator created."""

    def __init__(self, region: _Region) -> None:
        super().__init__()
        self.region = region
        self.count = _capture_graph_node_count() or 0
        self._made: set[int] = set()  # storages operators of the capture returned

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        before = _capture_graph_node_count()
        out = func(*args, **(kwargs or {}))
        after = _capture_graph_node_count()
        region = self.region
        if before is None or after is None:
            region.unattributed += 1
            return out
        region.unattributed += max(0, before - self.count)  # launched between operators
        self.count = after
        for tensor in tensors_in(args) + tensors_in(kwargs or {}):
            if tensor.is_cuda and tensor.untyped_storage().data_ptr() not in self._made:
                region.held.setdefault(id(tensor), tensor)
        outputs = [t for t in tensors_in(out) if t.is_cuda]
        self._made.update(t.untyped_storage().data_ptr() for t in outputs)
        if outputs:
            region.ops.append(CapturedOp(str(func), user_site(), before, after))
            region.op_outputs.append([(t.data_ptr(), tuple(t.shape), tuple(t.stride()), t.dtype) for t in outputs])
        return out


class _UndoWrites(guard_mode_base()):  # type: ignore[misc]  # (as above)
    """During an eager run: backs up each pre-existing storage before its first in-place write,
    notes a random operator, and (``record``) keeps a copy of each operator's device outputs."""

    def __init__(self, record: bool) -> None:
        super().__init__()
        self.record = record
        self.made: set[int] = set()
        self.backups: dict[int, tuple[Any, Any]] = {}  # storage -> (a tensor on it, its bytes)
        self.targets: dict[int, Any] = {}  # storage -> the tensor written (for comparing)
        self.random = ""
        self.ops: list[tuple[str, list[Any]]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        import torch

        kwargs = kwargs or {}
        if torch.Tag.nondeterministic_seeded in func.tags and not self.random:
            self.random = str(func)
        passed = [*zip(func._schema.arguments, args, strict=False)]
        passed += [(a, kwargs[a.name]) for a in func._schema.arguments if a.name in kwargs]
        for argument, value in passed:
            if argument.alias_info is not None and argument.alias_info.is_write:
                for tensor in tensors_in(value):
                    key = tensor.untyped_storage().data_ptr()
                    if key not in self.made and key not in self.backups:
                        self.backups[key] = (tensor, _storage_bytes(tensor).clone())
                        self.targets[key] = tensor
        out = func(*args, **kwargs)
        for tensor in tensors_in(out):
            key = tensor.untyped_storage().data_ptr()
            if key not in self.backups:
                self.made.add(key)
        results = [t for t in tensors_in(out) if t.is_cuda]
        if results:
            self.ops.append((str(func), [t.detach().clone() for t in results] if self.record else []))
        return out

    def written(self, made: set[int]) -> list[Any]:
        """Each storage written in place, whole, in the dtype of its first write (a write through
        one view and another through a second view of the same memory are both seen). Storages
        in ``made`` were allocated by the run itself without an operator the mode sees (compiled
        code's `empty_strided_cuda`, then written with `out=`): scratch, not the program's."""
        import torch

        whole = []
        for key, tensor in self.targets.items():
            if key in made:
                continue
            storage = tensor.untyped_storage()
            count = storage.nbytes() // tensor.element_size()
            whole.append(torch.empty(0, dtype=tensor.dtype, device=tensor.device).set_(storage, 0, (count,), (1,)))
        return whole

    def undo(self) -> dict[int, tuple[Any, Any]]:
        _put_back(self.backups)
        return self.backups


def allocated_blocks(torch: Any) -> set[int]:
    """The start of every block the CUDA caching allocator has handed out now. A storage the
    eager run allocated starts at one of them, and was not among them before the run."""
    found = set()
    for segment in torch.cuda.memory_snapshot():
        address = segment["address"]
        for block in segment["blocks"]:
            if block["state"] == "active_allocated":
                found.add(address)
            address += block["size"]
    return found


def _storage_bytes(tensor: Any) -> Any:
    """The whole storage under a tensor, as one uint8 tensor on the same memory."""
    import torch

    return torch.empty(0, dtype=torch.uint8, device=tensor.device).set_(tensor.untyped_storage())


def _put_back(saved: dict[int, tuple[Any, Any]]) -> None:
    for tensor, data in saved.values():
        _storage_bytes(tensor).copy_(data)


def _view(ptr: int, shape: tuple, stride: tuple, dtype: Any) -> Any:
    """A tensor on device memory at ``ptr``, as an operator's output was laid out there."""
    import torch

    itemsize = torch.empty(0, dtype=dtype).element_size()
    extent = (sum((s - 1) * st for s, st in zip(shape, stride, strict=True)) + 1) * itemsize if all(shape) else 0

    memory = types.SimpleNamespace(
        __cuda_array_interface__={"shape": (extent,), "typestr": "|u1", "data": (ptr, False), "version": 3}
    )
    raw = torch.as_tensor(memory, device="cuda")
    return raw.view(dtype).as_strided(shape, stride)


def _launch_prefix(raw_graph: Any, nodes: int) -> None:
    """Launch the graph's first ``nodes`` nodes (creation order: every node's dependencies come
    before it), cloned and instantiated apart, on the current stream; wait for them."""
    import torch

    from graphlint.runtime_sanitizer import driver

    drv = driver.bindings()
    graph = drv.CUgraph(int(raw_graph))
    count = driver.ok(drv.cuGraphGetNodes(graph, 0))[-1]
    handles = driver.ok(drv.cuGraphGetNodes(graph, count))[0]
    clone = driver.ok(drv.cuGraphClone(graph))
    try:
        for handle in handles[nodes:]:
            driver.ok(drv.cuGraphDestroyNode(driver.ok(drv.cuGraphNodeFindInClone(handle, clone))))
        executable = driver.ok(drv.cuGraphInstantiate(clone, 0))
        try:
            stream = drv.CUstream(torch.cuda.current_stream().cuda_stream)
            driver.ok(drv.cuGraphLaunch(executable, stream))
            torch.cuda.current_stream().synchronize()
        finally:
            drv.cuGraphExecDestroy(executable)
    finally:
        drv.cuGraphDestroy(clone)


def _differences(region: _Region, eager: list[_Output]) -> list[str]:
    """Each output the replay left unlike the eager run's, with how unlike."""
    found = []
    graph_side = {text: ref() for text, ref in region.outputs}
    for output in eager:
        mine = output.live if output.live is not None else graph_side.get(output.text)
        if mine is None:
            continue
        why = _differs(mine, output.tensor)
        if why:
            found.append(f"`{output.text}` {why}")
    return found


def _differs(replayed: Any, eager: Any) -> str | None:
    """How a replayed tensor differs from the eager one, or None within the dtype's tolerance."""
    import torch

    if replayed.shape != eager.shape or replayed.dtype != eager.dtype:
        return f"has shape {tuple(replayed.shape)} {replayed.dtype}, eager {tuple(eager.shape)} {eager.dtype}"
    if not replayed.is_floating_point():
        unequal = int((replayed != eager).sum())
        return f"differs in {unequal} of {replayed.numel()} elements" if unequal else None
    rtol, atol = _TOLERANCE.get(str(replayed.dtype).removeprefix("torch."), _LOW_PRECISION)
    close = torch.isclose(replayed.float(), eager.float(), rtol=rtol, atol=atol, equal_nan=True)
    unequal = int((~close).sum())
    if not unequal:
        return None
    both = torch.isfinite(replayed) & torch.isfinite(eager)
    worst = float((replayed.float() - eager.float())[both].abs().max()) if bool(both.any()) else float("nan")
    return f"differs in {unequal} of {replayed.numel()} elements (largest difference {worst:.4g})"


def _scope(frame: FrameType, pinned: dict[str, Any] | None = None) -> dict[str, Any]:
    """What the block's names mean: the frame's globals under its locals, under the pinned names."""
    return {**frame.f_globals, **frame.f_locals, **(pinned or {})}


def _seen_reads(texts: tuple[str, ...], scope: dict[str, Any]) -> dict[str, Seen]:
    """What each name or attribute chain holds, where it is a tensor or a Python scalar. Read from
    instance dictionaries only (and a module's parameters, buffers and submodules): a property
    would run the program's code, inside the capture."""
    import torch

    found = {}
    for text in texts:
        value = _plain_lookup(text, scope)
        if isinstance(value, torch.Tensor):
            found[text] = Seen(id(value), tensor=True)
        elif value is None or type(value) in (bool, int, float, str):
            if value is not _MISSING:
                found[text] = Seen(id(value), scalar=repr(value))
    return found


_MISSING: Any = object()


def _plain_lookup(text: str, scope: dict[str, Any]) -> Any:
    first, *attributes = text.split(".")
    value = scope.get(first, _MISSING)
    for name in attributes:
        if value is _MISSING:
            return _MISSING
        held = getattr(value, "__dict__", None)
        if not isinstance(held, dict):
            return _MISSING
        if name in held:
            value = held[name]
            continue
        stores = [held.get(k) for k in ("_parameters", "_buffers", "_modules")]
        value = next((store[name] for store in stores if isinstance(store, dict) and name in store), _MISSING)
    return value


def _cuda_tensors(value: Any) -> list[Any]:
    return [t for t in tensors_in(value) if t.is_cuda]


def _spelled(text: str, index: int) -> str:
    return text if index == 0 else f"{text}[{index}]"


def _describe(tensor: Any) -> str:
    return f"{str(tensor.dtype).removeprefix('torch.')}, shape {tuple(tensor.shape)}"
