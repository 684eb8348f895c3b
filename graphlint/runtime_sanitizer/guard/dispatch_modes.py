"""The dispatch modes the guard runs torch under: during a capture, one that records what the
graph reads, writes and makes; outside captures, one that hands every operator's tensors to the
guard (reads of stale handles, new aliases of graph outputs)."""

from __future__ import annotations

import weakref
from typing import Any, Protocol

from graphlint.runtime_sanitizer.capture.two_captures import tensors_in


class HandleChecks(Protocol):
    """What `HandleWatch` calls on the guard for each operator outside captures."""

    def _check_read(self, tensor: Any) -> None: ...

    def _note_new(self, tensor: Any) -> None: ...

    def _before_op(self, func: Any, tensors: list[Any]) -> None: ...

    def _after_op(self, func: Any, tensors: list[Any], results: list[Any]) -> None: ...


def guard_mode_base():
    from torch.utils._python_dispatch import TorchDispatchMode

    class _GuardMode(TorchDispatchMode):
        @classmethod
        def ignore_compile_internals(cls) -> bool:
            """Stay out of torch.compile: Dynamo skips (runs eagerly) every frame while a mode
            that does not say this is active, and the sanitizer must not change what runs."""
            return True

    return _GuardMode


class CaptureRecorder(guard_mode_base()):  # type: ignore[misc]  # torch is imported only when a guard is
    """During a capture: what the graph reads, and what it makes. It holds them weakly: a
    temporary the program drops mid-capture must free its block as it would unwatched, or the
    capture reuses less memory, lays out its pool differently and its neighbours' addresses
    move (PyTorch's own pool-sharing and memory-statistics tests saw the difference). What the
    graph read and made is also remembered as address ranges, taken while each tensor lived:
    a graph still reads the memory of an input the program deleted during the capture."""

    def __init__(self) -> None:
        super().__init__()
        self._read: list[weakref.ref] = []
        self._made: list[weakref.ref] = []
        self.made_ranges: list[tuple[int, int]] = []  # storages of all it made, the dead included
        self.read_ranges: list[tuple[int, int]] = []  # storages of all it read, the dead included
        self.written: set[int] = set()  # storages an operator writes in place (schema alias info)
        self._seen: dict[int, weakref.ref] = {}  # id -> the tensor it names (ids are recycled)
        self.draws_random = False  # a seeded random operator ran: each replay draws anew

    @property
    def read(self) -> list[Any]:
        """The tensors the capture read that are still alive."""
        return _alive(self._read)

    @property
    def made(self) -> list[Any]:
        """The tensors the capture made that are still alive: its static outputs, once it ended."""
        return _alive(self._made)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        passed = [*zip(func._schema.arguments, args, strict=False)]
        passed += [(a, kwargs[a.name]) for a in func._schema.arguments if a.name in kwargs]
        for argument, value in passed:
            if argument.alias_info is not None and argument.alias_info.is_write:
                self.written.update(t.untyped_storage().data_ptr() for t in tensors_in(value) if t.is_cuda)
        out = func(*args, **kwargs)
        self.draws_random = self.draws_random or _seeded(func)
        inputs = tensors_in(args) + tensors_in(kwargs)
        input_storages = set()
        for tensor in inputs:
            if tensor.is_cuda:
                storage = tensor.untyped_storage()
                input_storages.add(storage.data_ptr())
                if self._first_time(tensor):
                    self._read.append(weakref.ref(tensor))
                    self.read_ranges.append((storage.data_ptr(), storage.nbytes()))
        for tensor in tensors_in(out):
            if not tensor.is_cuda:
                continue
            storage = tensor.untyped_storage()
            # A view (weight.t(), x[0]) shares its input's memory: it is not graph output memory.
            if storage.data_ptr() not in input_storages:
                self._first_time(tensor)  # seen: a later read of it is not an input
                self._made.append(weakref.ref(tensor))
                self.made_ranges.append((storage.data_ptr(), storage.nbytes()))
        return out

    def _first_time(self, tensor: Any) -> bool:
        seen = self._seen.get(id(tensor))
        if seen is not None and seen() is tensor:
            return False
        self._seen[id(tensor)] = weakref.ref(tensor)
        return True


def _seeded(func: Any) -> bool:
    """A random operator (`rand`, `dropout`, `bernoulli_`): the graph advances the generator's
    offset at every replay, so it computes something new on unchanged inputs."""
    import torch

    return torch.Tag.nondeterministic_seeded in getattr(func, "tags", ())


def _alive(refs: list[weakref.ref]) -> list[Any]:
    found = (ref() for ref in refs)
    return [tensor for tensor in found if tensor is not None]


class HandleWatch(guard_mode_base()):  # type: ignore[misc]  # (as above)
    """Outside captures: reads of stale handles, new aliases of graph outputs, and (`--poison`)
    reads of poisoned memory."""

    def __init__(self, guard: HandleChecks) -> None:
        super().__init__()
        self.guard = guard

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        inputs = tensors_in(args) + tensors_in(kwargs)
        for tensor in inputs:
            self.guard._check_read(tensor)
        self.guard._before_op(func, inputs)
        out = func(*args, **kwargs)
        results = tensors_in(out)
        for tensor in results:
            # An in-place or out= operator returns a tensor it was given (`t1.copy_(x)` refilling
            # a static input the graph writes): an existing handle, not a new alias of a replay.
            if not any(tensor is given for given in inputs):
                self.guard._note_new(tensor)
        self.guard._after_op(func, inputs, results)
        return out
