"""The dispatch modes the guard runs torch under: during a capture, one that records what the
graph reads, writes and makes; outside captures, one that hands every operator's tensors to the
guard (reads of stale handles, new aliases of graph outputs)."""

from __future__ import annotations

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
    """During a capture: what the graph reads, and what it makes."""

    def __init__(self) -> None:
        super().__init__()
        self.read: list[Any] = []
        self.made: list[Any] = []
        self.written: set[int] = set()  # storages an operator writes in place (schema alias info)
        self._seen: set[int] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        passed = [*zip(func._schema.arguments, args, strict=False)]
        passed += [(a, kwargs[a.name]) for a in func._schema.arguments if a.name in kwargs]
        for argument, value in passed:
            if argument.alias_info is not None and argument.alias_info.is_write:
                self.written.update(t.untyped_storage().data_ptr() for t in tensors_in(value) if t.is_cuda)
        out = func(*args, **kwargs)
        inputs = tensors_in(args) + tensors_in(kwargs)
        input_storages = set()
        for tensor in inputs:
            if tensor.is_cuda:
                input_storages.add(tensor.untyped_storage().data_ptr())
                if id(tensor) not in self._seen:
                    self._seen.add(id(tensor))
                    self.read.append(tensor)
        for tensor in tensors_in(out):
            # A view (weight.t(), x[0]) shares its input's memory: it is not graph output memory.
            if tensor.is_cuda and tensor.untyped_storage().data_ptr() not in input_storages:
                self._seen.add(id(tensor))
                self.made.append(tensor)
        return out


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
            self.guard._note_new(tensor)
        self.guard._after_op(func, inputs, results)
        return out
