"""Triton kernels launched while a capture is recorded, with what each reads and writes.

The dispatch mode that attributes graph nodes to ATen operators never sees Inductor's Triton
kernels: `CachingAutotuner.run` launches them from Python. A graph from `torch.compile` (its
CUDA graph trees' graphs, or a compiled function called inside `torch.cuda.graph`) therefore
had nodes with unknown accesses, and the ordering check refused it. While a capture is
recorded, the two Python entry points of a Triton launch are wrapped (Inductor's autotuner, and
`JITFunction.run` for kernels written by hand): the nodes a launch adds get the kernel's name
and the memory of the tensors it was given, read or written by its signature
(`analysis.kernel_signatures`). The wrappers call the original with the same arguments and
change nothing it does; they are removed when the recording stops.
"""

from __future__ import annotations

import functools
import sys
import threading
from collections.abc import Callable
from typing import Any

from graphlint.runtime_sanitizer.analysis.kernel_signatures import READ, WRITE, argument_roles

# (kernel name, capture position before, after, reads, writes): what a recorder notes. A position
# is (graph handle, node count), None when the graph could not be read.
Position = tuple[int, int]
Note = Callable[[str, "Position | None", "Position | None", list, list], None]
Ranges = Callable[[Any], list]  # the (address, bytes) ranges of the tensors in a value
PREFIX = "triton "  # what a noted launch's name starts with: a kernel launched outside ATen


def launch_targets() -> list[tuple[Any, bool]]:
    """The launch entry points already loaded: (class, whether it is Inductor's). Only modules
    the program has imported are looked at: a kernel cannot launch through a module nobody
    loaded, and importing Inductor or Triton here, at a capture's start, would be slow and could
    touch the device while the stream captures."""
    targets = []
    for module_name, class_name, inductor in _ENTRY_POINTS:
        cls = getattr(sys.modules.get(module_name), class_name, None)
        if isinstance(cls, type):
            targets.append((cls, inductor))
    return targets


_ENTRY_POINTS = (
    ("torch._inductor.runtime.triton_heuristics", "CachingAutotuner", True),
    ("triton.runtime.jit", "JITFunction", False),
)


class TritonLaunches:
    """Wraps each target's `run` from ``__enter__`` to ``__exit__`` and notes every launch."""

    def __init__(self, note: Note, count: Callable[[], Position | None], ranges: Ranges, targets=None) -> None:
        """``count`` reads the capture position (the graph being captured, how many nodes it
        has); ``ranges`` the memory of
        the tensors in an argument; ``targets`` are `launch_targets()` unless given (tests)."""
        self._note, self._count, self._ranges = note, count, ranges
        self._targets = launch_targets() if targets is None else targets
        self._saved: list[tuple[Any, Any]] = []
        self._inside = threading.local()  # a subclass's run calling the base's: noted once

    def __enter__(self) -> TritonLaunches:
        for cls, inductor in self._targets:
            original = cls.__dict__.get("run")
            if original is not None:
                self._saved.append((cls, original))
                cls.run = self._wrapped(original, inductor)
        return self

    def __exit__(self, *exc: object) -> None:
        for cls, original in reversed(self._saved):
            cls.run = original
        self._saved.clear()

    def _wrapped(self, original: Any, inductor: bool) -> Any:
        launches = self

        @functools.wraps(original)
        def run(kernel: Any, *args: Any, **kwargs: Any) -> Any:
            if getattr(launches._inside, "active", False):
                return original(kernel, *args, **kwargs)
            launches._inside.active = True
            try:
                before = launches._safe_count()
                result = original(kernel, *args, **kwargs)
                after = launches._safe_count()
            finally:
                launches._inside.active = False
            try:
                launches._noted(kernel, inductor, args, kwargs, before, after)
            except Exception:  # never break the launch: unreadable, so the graph is refused, not misjudged
                launches._note(f"{PREFIX}kernel", None, None, [], [])
            return result

        return run

    def _safe_count(self) -> Position | None:
        try:
            return self._count()
        except Exception:
            return None

    def _noted(self, kernel: Any, inductor: bool, args: tuple, kwargs: dict, before: Any, after: Any) -> None:
        names, mutated = _signature(kernel, inductor)
        named = dict(zip(names, args, strict=False))
        named.update((key, value) for key, value in kwargs.items() if key in names)
        roles = dict(zip(names, argument_roles(names, mutated, inductor), strict=True))
        reads, writes = [], []
        for name, value in named.items():
            ranges = self._ranges(value)
            if roles[name] & READ:
                reads.extend(ranges)
            if roles[name] & WRITE:
                writes.extend(ranges)
        self._note(f"{PREFIX}{_kernel_name(kernel)}", before, after, reads, writes)


def _signature(kernel: Any, inductor: bool) -> tuple[list[str], tuple[str, ...]]:
    """The argument names in call order, and those the kernel is known to change in place."""
    if inductor:
        names = list(getattr(kernel, "triton_meta", {}).get("signature", {}))
        return names, tuple(getattr(kernel, "mutated_arg_names", ()) or ())
    return list(getattr(kernel, "arg_names", ())), ()


def _kernel_name(kernel: Any) -> str:
    fn = getattr(kernel, "fn", kernel)
    return str(getattr(fn, "__name__", None) or getattr(kernel, "__name__", "kernel"))
