"""What the guard knows of each graph it saw captured (its static inputs and outputs, its
replays, what was reported), and the tensor measures it takes to know it (needs torch)."""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Any

from graphlint.runtime_sanitizer.analysis import address_ranges
from graphlint.runtime_sanitizer.analysis.kept_outputs import KeptWatch


@dataclass
class GraphState:
    label: str
    inputs: list[tuple[Any, int]] = field(default_factory=list)  # (weakref to tensor, version at last replay)
    output_ranges: list[tuple[int, int]] = field(default_factory=list)
    replays: int = 0
    unchanged_reported: bool = False
    site: tuple[str, int] = ("<unknown>", 1)  # the user line that captured it
    params: list[tuple[str, Any]] = field(default_factory=list)  # make_graphed_callables: (name, weakref)
    grad_aliased: set[str] = field(default_factory=set)  # parameters reported as GL509
    new_each_replay: bool = False  # it writes its own inputs (an optimizer step) or draws random numbers
    baseline: list[tuple[Any, Any]] | None = None  # (input, copy) taken when versions first stood still
    outputs: list[tuple[Any, KeptWatch]] = field(default_factory=list)  # (weakref, watch) per static output
    kept_reported: set[int] = field(default_factory=set)  # ids of containers reported as keeping an output


def static_inputs(recorder: Any, made_ranges: list[tuple[int, int]]) -> list[tuple[Any, int]]:
    """(weakref, version) of each tensor the capture read that it did not make: its static inputs."""
    made = {id(t) for t in recorder.made}
    inputs = []
    for tensor in recorder.read:
        if id(tensor) in made:
            continue
        ptr = tensor.untyped_storage().data_ptr()
        if in_ranges(ptr, made_ranges):
            continue
        inputs.append((weakref.ref(tensor), tensor._version))
    return inputs


def in_ranges(address: int, ranges: list[tuple[int, int]]) -> bool:
    """Whether ``address`` lies in one of ``ranges`` ((start, bytes))."""
    return any(start <= address < start + size for start, size in ranges)


def outside(ranges: list[tuple[int, int]], made: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The ranges that start in none of ``made``: what a capture read that it did not make."""
    return [(ptr, size) for ptr, size in ranges if not in_ranges(ptr, made)]


def written_storages(tensors: list[Any], writes: list[tuple[int, int]]) -> set[int]:
    """The storages (by address) of ``tensors`` that one of ``writes`` ((start, bytes)) lands
    in: what a capture wrote through a launch the dispatch mode does not see (a Triton kernel's
    output argument). Told by address: the kernel was handed the tensor, a view of it or a
    reinterpretation, never the program's own object."""
    spans = address_ranges.merged([(start, start + size) for start, size in writes])
    found = set()
    for tensor in tensors:
        if tensor is not None:
            storage = tensor.untyped_storage()
            if address_ranges.overlaps(spans, storage.data_ptr(), storage.data_ptr() + storage.nbytes()):
                found.add(storage.data_ptr())
    return found


def named_parameters(callables: Any) -> list[tuple[str, Any]]:
    """(attribute name, parameter) of each module among the callables, prefixed with the
    module's class when several callables are graphed together."""
    modules = [
        c for c in (callables if isinstance(callables, tuple) else (callables,)) if hasattr(c, "named_parameters")
    ]
    found: list[tuple[str, Any]] = []
    for index, module in enumerate(modules):
        prefix = f"{type(module).__name__}[{index}]." if len(modules) > 1 else ""
        found.extend((prefix + name, p) for name, p in module.named_parameters())
    return found


_BASELINE_BYTES = 256 << 20  # copy at most this much to confirm a standstill (smallest inputs first)


def content_baseline(tensors: list[Any]) -> list[tuple[Any, Any]]:
    """Copies of the inputs, smallest first, up to a byte budget: the data inputs a program
    refills are small next to the weights, and one changed input is enough to clear GL506."""
    copies: list[tuple[Any, Any]] = []
    used = 0
    for tensor in sorted(tensors, key=lambda t: t.numel() * t.element_size()):
        size = tensor.numel() * tensor.element_size()
        if copies and used + size > _BASELINE_BYTES:
            break
        copies.append((tensor, tensor.detach().clone()))
        used += size
    return copies


def torch_equal(a: Any, b: Any) -> bool:
    import torch

    return a.shape == b.shape and bool(torch.equal(a, b))


def storage_address(tensor: Any) -> int | None:
    return None if tensor is None else tensor.untyped_storage().data_ptr()
