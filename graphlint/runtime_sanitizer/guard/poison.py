"""`--poison` (GL511): memory a replay reads that nothing wrote since the previous replay is
filled with a loud value, and the program's first read that the loud value reached is named.

A stale slot (a padded batch refilled only up to its live rows, a position buffer refilled in
prefill but not in decode) gives plausible numbers, never an error: the graph reads what the
previous step left. Poison makes the staleness visible, element by element:

- After each replay, queued behind it on the current stream, every *refilled* static input is
  saved and filled: NaN for floating point, the type's minimum for int32/int64. Refilled means
  the program wrote it between two replays (its version counter moved after the first replay;
  writes between the capture and the first replay are set-up). Parameters, constant tables and
  the graph's own state (inputs it writes itself, through an ATen operator or a Triton kernel's
  output argument: a KV cache a compiled decode step appends to) are never touched, and the poison's own
  writes leave version counters alone (GL506 still sees only the program's writes).
- The program's refills overwrite the poison where they write; what is left at the next replay
  is exactly what nothing wrote (`static[:n].copy_(x)` leaves `static[n:]`).
- Eager code that reads a poisoned input before writing it (`pos.add_(1)`, `print(static)`) gets
  the saved values back first: only graphs see the poison, so a clean program computes what it
  always did.
- Integer elements still poisoned at a replay are restored before it runs, and counted: a
  poisoned index asserts on the device and kills the CUDA context, which would end the run the
  sanitizer reports on, and a padded batch leaves integer padding stale by design.
- Floating elements still poisoned stay NaN for that replay and its outputs are marked (so are
  those of a graph that reads a marked output). Copies, casts, concatenations and gathers of a
  marked tensor carry the mark; the first other eager read that finds NaN in the part it reads
  (or a copy to the host that does) is GL511, at the reading line: padding rows the program
  slices off are never a finding.

The tensor work is plain torch (it runs on CPU tensors too, which is how CI tests it); the
guard calls it with its own dispatch mode out of the way.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from graphlint.runtime_sanitizer.guard.tensor_names import describe

_MAX_INPUT_BYTES = 64 << 20  # a refilled input larger than this is not poisoned (its copy would be)
_FLOATS = ("float16", "bfloat16", "float32", "float64")
_INTEGERS = ("int32", "int64")  # narrower integers hold real data (pixels, audio) at any pattern
# Operators whose first argument is written without being read: a refill, not a read.
_OVERWRITES = frozenset(
    ("copy_", "fill_", "zero_", "index_copy_", "index_fill_", "masked_fill_", "masked_scatter_", "index_put_")
)
# Operators that move or select values without computing on them (`where` and `masked_fill` are
# how a program neutralizes padding): their result carries the mark instead, where it holds NaN.
_MOVES = frozenset(
    (
        *("clone", "_to_copy", "copy_", "cat", "stack", "contiguous"),
        *("index", "index_select", "gather", "masked_select", "where", "masked_fill"),
    )
)


@dataclass
class _Input:
    """A static input the graph's replays may poison (its own: the program refills it)."""

    ref: Any  # weak reference to the static input, as the graph read it
    version: int  # its version counter when the watch last looked
    replays: int = 0  # replays of its graph it has been through
    refilled: bool = False  # the program wrote it between two replays


@dataclass
class _Poison:
    """One poisoned storage: the tensor filled, its values before, and the version counter each
    graph reading the storage had when it was filled."""

    ref: Any
    saved: Any
    versions: dict[int, int]  # graph id -> version of that graph's tensor on this storage, at the fill


@dataclass
class _Taint:
    """A replay that read poisoned floating-point elements: its outputs may carry NaN."""

    label: str  # "graph captured at path:line"
    replay: int
    replay_site: tuple[str, int]
    stale: list[str]  # "4 of 8 elements of `static_x` (float32, shape (8,))"
    graph_id: int


@dataclass
class _Mark:
    taint: _Taint
    ref: Any  # weak reference to the marked tensor (its storage may be reused once it dies)
    description: str


@dataclass
class PoisonWatch:
    report: Callable[[str], None] = print  # takes each GL511 message (the guard reports it at the user's line)
    poisoned_replays: int = 0  # replays after which at least one refilled input was poisoned
    stale_integers: list[str] = field(default_factory=list)  # once per graph and input
    _inputs: dict[int, list[_Input]] = field(default_factory=dict)  # graph id -> inputs it may poison
    _reads: dict[int, list[tuple[Any, str]]] = field(default_factory=dict)  # graph id -> (weakref, description)
    _readers: dict[int, list[tuple[int, Any]]] = field(default_factory=dict)  # address -> (graph id, weakref)
    _last: dict[int, dict[int, int]] = field(default_factory=dict)  # graph id -> address -> version at its replay
    _outputs: dict[int, list[tuple[Any, str]]] = field(default_factory=dict)  # graph id -> (weakref, description)
    _poisoned: dict[int, _Poison] = field(default_factory=dict)  # storage address -> its poison
    _marked: dict[int, _Mark] = field(default_factory=dict)  # storage address -> its mark
    _graph_marks: dict[int, list[int]] = field(default_factory=dict)  # graph id -> addresses its last replay marked
    _integer_seen: set[tuple[int, int]] = field(default_factory=set)
    _reported: set[int] = field(default_factory=set)  # graphs whose stale read was reported: one finding each
    _saved_repr: Any = None  # torch.Tensor.__repr__ while install()ed

    def captured(self, graph_id: int, inputs: list[Any], outputs: list[Any], written: set[int], names: dict) -> None:
        """What the graph reads of a poisonable type; those of its inputs poison may fill (not
        parameters, not what the graph writes itself, not too large); its floating outputs."""
        import torch

        live = [t for t in inputs if t is not None and _kind(t) is not None and _real(t)]
        self._inputs[graph_id] = [
            _Input(weakref.ref(t), t._version)
            for t in live
            if not isinstance(t, torch.nn.Parameter)
            and not t.requires_grad
            and _storage(t) not in written
            and t.numel() * t.element_size() <= _MAX_INPUT_BYTES
        ]
        self._reads[graph_id] = [(weakref.ref(t), describe(t, names)) for t in live]
        for ref, _ in self._reads[graph_id]:
            self._readers.setdefault(_storage(ref()), []).append((graph_id, ref))
        self._last[graph_id] = {}
        self._outputs[graph_id] = [(weakref.ref(t), describe(t, names)) for t in outputs if _kind(t) == "float"]

    def before_replay(self, graph_id: int) -> list[str]:
        """At a replay, before it runs: what it will read stale (floating elements left poisoned
        since its previous replay, which stay NaN for it). Stale integers are restored and counted;
        poison filled after the program wrote the memory since this graph's last replay (another
        graph's, on an input both read) is not stale for this one, and is restored too."""
        self._clear_marks(graph_id)  # this replay rewrites the outputs the last one marked
        last = self._last.setdefault(graph_id, {})
        stale: list[str] = []
        for ref, description in self._reads.get(graph_id, []):
            tensor = _alive(ref)
            if tensor is None:
                continue
            address = _storage(tensor)
            poison = self._poisoned.get(address)
            if poison is not None and poison.versions.get(graph_id, -1) != last.get(address):
                self._unpoison(address)
            elif poison is not None:
                left = int(_poisoned_mask(tensor).sum())
                if left and _kind(tensor) == "float":
                    stale.append(f"{left} of {tensor.numel()} elements of {description}")
                elif left:
                    self._note_integer(graph_id, address, f"{left} of {tensor.numel()} elements of {description}")
                    self._unpoison(address)
            last[address] = tensor._version
        for entry in self._inputs.get(graph_id, []):
            tensor = _alive(entry.ref)
            if tensor is not None:
                entry.refilled |= tensor._version != entry.version and entry.replays > 0
                entry.version = tensor._version
        return stale

    def after_replay(self, graph_id: int, label: str, replay: int, site: tuple[str, int], stale: list[str]) -> None:
        """Behind the replay on its stream: mark its outputs if it read poison (its own stale
        inputs, or another replay's marked output), then poison every refilled input."""
        stale = stale + self._inherited(graph_id)
        if stale:
            self._mark_outputs(graph_id, _Taint(label, replay, site, stale, graph_id))
        poisoned = False
        for entry in self._inputs.get(graph_id, []):
            tensor = _alive(entry.ref)
            if tensor is None:
                continue
            entry.replays += 1
            if entry.refilled:
                self._poison(tensor)
                poisoned = True
        self.poisoned_replays += poisoned

    def before_op(self, func: Any, tensors: list[Any]) -> None:
        """Before an eager operator: a poisoned input it reads gets its values back; a marked
        tensor it computes on with NaN in the part it reads is GL511, once per graph (every later
        stale replay of it is the same bug)."""
        if (self._poisoned or self._marked) and not getattr(func, "is_view", False):  # a view reads nothing
            self._read(getattr(func, "_opname", ""), tensors)

    def after_op(self, func: Any, tensors: list[Any], results: list[Any]) -> None:
        """After a move (copy, cast, cat, gather) of a marked tensor: its results carry the mark
        where they hold NaN; a move to the host with NaN in it is GL511."""
        if not self._marked or getattr(func, "_opname", "") not in _MOVES:
            return
        marks = [self._live_mark(address) for address in map(_address, tensors) if address is not None]
        mark = next((m for m in marks if m is not None), None)
        if mark is None:
            return
        for result in results:
            if not _real(result) or _kind(result) != "float" or not _has_nan(result):
                continue
            marked = _alive(mark.ref)
            if result.device.type == "cpu" and marked is not None and marked.device.type != "cpu":
                if mark.taint.graph_id not in self._reported:
                    self._reached(mark, "copied to the host")
                continue
            copy = mark.description if mark.description.startswith("a copy of ") else f"a copy of {mark.description}"
            self._marked[_storage(result)] = _Mark(mark.taint, weakref.ref(result), copy)

    def install(self, torch: Any) -> None:
        """Printing a tensor formats it with dispatch modes off, so no operator is seen: the
        repr of a poisoned input would show the poison. Wrap it to restore (or judge) first."""
        original = torch.Tensor.__repr__
        self._saved_repr = original
        watch = self

        @functools.wraps(original)
        def repr_(tensor: Any, *args: Any, **kwargs: Any) -> str:
            if watch._poisoned or watch._marked:
                with torch.utils._python_dispatch._disable_current_modes():
                    watch._read("repr", [tensor])
            return original(tensor, *args, **kwargs)

        torch.Tensor.__repr__ = repr_

    def uninstall(self, torch: Any) -> None:
        if self._saved_repr is not None:
            torch.Tensor.__repr__ = self._saved_repr
            self._saved_repr = None

    def give_back(self) -> None:
        """Every poisoned input gets its values back, and no output stays marked: poison stops."""
        for address in list(self._poisoned):
            self._unpoison(address)
        self._marked.clear()
        self._graph_marks.clear()

    # -- internals ------------------------------------------------------------------------
    def _read(self, name: str, tensors: list[Any]) -> None:
        targets = tensors[:1] if name in _OVERWRITES else []
        for tensor in tensors:
            address = None if any(tensor is target for target in targets) else _address(tensor)
            if address is None:
                continue
            if address in self._poisoned:
                self._unpoison(address)
            if name not in _MOVES and address in self._marked:
                self._read_of_mark(address, tensor)

    def _poison(self, tensor: Any) -> None:
        """Save and fill one input, noting the version each graph reading its storage has now."""
        import torch

        address = _storage(tensor)
        self._unpoison(address)  # another graph's poison on it first gives its values back
        with torch.no_grad(), torch.autograd._unsafe_preserve_version_counter(tensor):
            saved = tensor.clone()
            tensor.fill_(_poison_value(tensor))
        readers = [(graph, _alive(ref)) for graph, ref in self._readers.get(address, [])]
        versions = {graph: reader._version for graph, reader in readers if reader is not None}
        self._poisoned[address] = _Poison(weakref.ref(tensor), saved, versions)

    def _inherited(self, graph_id: int) -> list[str]:
        """The marks on what this graph reads: another replay's poisoned output feeding it."""
        found = []
        for ref, _ in self._reads.get(graph_id, []):
            tensor = _alive(ref)
            mark = None if tensor is None or _kind(tensor) != "float" else self._live_mark(_storage(tensor))
            if mark is not None and _has_nan(tensor):
                found.append(
                    f"{mark.description}, which replay {mark.taint.replay} of the {mark.taint.label} left NaN in"
                )
        return found

    def _mark_outputs(self, graph_id: int, taint: _Taint) -> None:
        addresses = []
        for ref, description in self._outputs.get(graph_id, []):
            tensor = _alive(ref)
            if tensor is not None:
                self._marked[_storage(tensor)] = _Mark(taint, ref, description)
                addresses.append(_storage(tensor))
        self._graph_marks[graph_id] = addresses

    def _live_mark(self, address: int) -> _Mark | None:
        mark = self._marked.get(address)
        if mark is not None and _alive(mark.ref) is None:  # the marked tensor died: its memory is someone else's
            del self._marked[address]
            return None
        return mark

    def _read_of_mark(self, address: int, tensor: Any) -> None:
        mark = self._live_mark(address)
        if mark is not None and mark.taint.graph_id not in self._reported and _kind(tensor) == "float":
            if _has_nan(tensor):
                self._reached(mark, "read here")

    def _reached(self, mark: _Mark, how: str) -> None:
        taint = mark.taint
        self._reported.add(taint.graph_id)
        path, line = taint.replay_site
        self.report(
            f"{mark.description}, an output of replay {taint.replay} of the {taint.label} (replayed at {path}:{line}), "
            f"is {how} with NaN in the part read: that replay read {'; '.join(taint.stale)}, memory nothing had "
            f"written since replay {taint.replay - 1}, which --poison filled with NaN. Without --poison the replay "
            "reads whatever the previous step left there"
        )

    def _note_integer(self, graph_id: int, address: int, what: str) -> None:
        if (graph_id, address) not in self._integer_seen:
            self._integer_seen.add((graph_id, address))
            self.stale_integers.append(what)

    def _unpoison(self, address: int) -> None:
        poison = self._poisoned.pop(address, None)
        tensor = None if poison is None else _alive(poison.ref)
        if poison is not None and tensor is not None:
            _restore(tensor, poison.saved)

    def _clear_marks(self, graph_id: int) -> None:
        for address in self._graph_marks.pop(graph_id, []):
            mark = self._marked.get(address)
            if mark is not None and any(mark.ref is ref for ref, _ in self._outputs.get(graph_id, [])):
                del self._marked[address]


def _kind(tensor: Any) -> str | None:
    dtype = str(tensor.dtype).removeprefix("torch.")
    return "float" if dtype in _FLOATS else "int" if dtype in _INTEGERS else None


def _poison_value(tensor: Any) -> float | int:
    import torch

    return float("nan") if _kind(tensor) == "float" else int(torch.iinfo(tensor.dtype).min)


def _poisoned_mask(tensor: Any) -> Any:
    import torch

    return torch.isnan(tensor) if _kind(tensor) == "float" else tensor == _poison_value(tensor)


def _has_nan(tensor: Any) -> bool:
    import torch

    return tensor.numel() > 0 and bool(torch.isnan(tensor).any())


def _restore(tensor: Any, saved: Any) -> None:
    """Put the saved values back where the poison is still there; what the program wrote stays.
    The version counter is left as it was: this write is the sanitizer's, not the program's."""
    import torch

    with torch.no_grad(), torch.autograd._unsafe_preserve_version_counter(tensor):
        tensor.copy_(torch.where(_poisoned_mask(tensor), saved, tensor))


def _storage(tensor: Any) -> int:
    return int(tensor.untyped_storage().data_ptr())


def _alive(ref: Any) -> Any:
    """The tensor a weak reference holds, if it is alive and its memory readable (torch.compile's
    CUDA graph trees make the outputs of an earlier run raise on access once overwritten)."""
    tensor = ref()
    return tensor if tensor is not None and _real(tensor) else None


def _address(tensor: Any) -> int | None:
    """Its storage's address, if it has memory behind it (not a meta or fake tensor, whose
    storage cannot be read): asked once per tensor of every eager operator."""
    try:
        address = _storage(tensor) if tensor.device.type != "meta" else 0
    except Exception:
        return None
    return address or None


def _real(tensor: Any) -> bool:
    return _address(tensor) is not None
