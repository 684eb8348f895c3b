"""The names a program gives its tensors, read from the frame that captured a graph: a finding
that says `static_ids` or `self.positions` points at the line to fix; "an int64 tensor of shape
(8,)" sends the user searching."""

from __future__ import annotations

from types import FrameType
from typing import Any

_MAX_ATTRIBUTES = 200  # an object with more attributes than this is not searched (a whole model)


def frame_names(frame: FrameType | None) -> dict[int, str]:
    """id(tensor) -> the shortest spelling that reaches it from the frame's locals: `x`,
    `self.x`, `bufs[2]`, `state['ids']` (one level into objects, lists and dicts)."""
    import torch

    names: dict[int, str] = {}
    if frame is None:
        return names

    def note(value: Any, name: str) -> None:
        if isinstance(value, torch.Tensor) and id(value) not in names:
            names[id(value)] = name

    local_items = list(frame.f_locals.items())
    for name, value in local_items:
        note(value, name)
    for name, value in local_items:
        for key, item in _members(value):
            note(item, f"{name}{key}")
    return names


def _members(value: Any) -> list[tuple[str, Any]]:
    """(spelling, member) of an object's attributes, a list's items, a dict's string-keyed values."""
    import torch

    if isinstance(value, torch.Tensor):
        return []
    if isinstance(value, (list, tuple)):
        return [(f"[{i}]", item) for i, item in enumerate(value[:_MAX_ATTRIBUTES])]
    if isinstance(value, dict):
        return [(f"[{key!r}]", item) for key, item in list(value.items())[:_MAX_ATTRIBUTES] if isinstance(key, str)]
    attributes = getattr(value, "__dict__", None)
    if not isinstance(attributes, dict) or len(attributes) > _MAX_ATTRIBUTES:
        return []
    members = [(f".{key}", item) for key, item in attributes.items()]
    buffers = attributes.get("_buffers")  # an nn.Module keeps its registered buffers here
    if isinstance(buffers, dict):
        members += [(f".{key}", item) for key, item in buffers.items()]
    return members


def describe(tensor: Any, names: dict[int, str]) -> str:
    """`name` (dtype, shape) when the program named it, else what it is."""
    shape = tuple(tensor.shape)
    dtype = str(tensor.dtype).removeprefix("torch.")
    name = names.get(id(tensor))
    return f"`{name}` ({dtype}, shape {shape})" if name else f"a {dtype} tensor of shape {shape}"
