"""The cache's file format: plain data with a checksum, so that loading a cache runs no code.

A repository can ship its own `.graphlint_cache/` (by accident, or in a malicious pull
request), so a cache file is untrusted input: it is JSON, and the only objects it can
make are the summary and finding types named in `_CLASSES`, built from their fields.
Each file starts with a header (magic, format, BLAKE2b of the payload); a file whose
header, checksum or contents do not validate raises `CacheFormatError`, which the cache
treats as a miss.

Encoding (compact, and decoded by one hook that the C JSON parser calls per object): a
list is a JSON array; every other container is a one-key object whose key says what it
is: ``{"t": [...]}`` a tuple, ``{"f": [...]}`` a frozenset, ``{"s": [...]}`` a set,
``{"d": [k1, v1, k2, v2, ...]}`` a dict (keys need not be strings), and
``{"<Class>": [field values]}`` one of the allowed classes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable
from typing import Any

from graphlint.checkers.machinery.core import call_targets, model
from graphlint.checkers.machinery.flows.replay import runner_trace
from graphlint.findings import CallSite, Edit, Finding, Fix
from graphlint.fixing.ops import (
    AppendMethodCall,
    InsertStatementAfter,
    RenameAttribute,
    ReplaceAssignWithCopy,
    SetKeyword,
)
from graphlint.suppressions import Suppression

_MAGIC = b"graphlint-cache"
_FORMAT = b"1"

_DATACLASSES: tuple[type, ...] = (
    model.ModuleSummary,
    model.FunctionSummary,
    model.ClassSummary,
    model.Region,
    model.Hazard,
    model.CallRef,
    model.EntryRef,
    model.OpaqueCall,
    runner_trace.Read,
    runner_trace.Call,
    runner_trace.Bind,
    runner_trace.Store,
    runner_trace.Kill,
    runner_trace.Loop,
    Suppression,
    Fix,
    Edit,
    AppendMethodCall,
    ReplaceAssignWithCopy,
    SetKeyword,
    InsertStatementAfter,
    RenameAttribute,
    Finding,
    CallSite,
)
_TARGETS: tuple[type, ...] = call_targets.ALL_TARGETS
_FIELDS: dict[type, tuple[str, ...]] = {cls: tuple(f.name for f in dataclasses.fields(cls)) for cls in _DATACLASSES}


class CacheFormatError(ValueError):
    """The bytes are not a cache file this graphlint wrote: treat as a miss."""


def dumps(value: object) -> bytes:
    """The file's bytes: header line, then the encoded payload."""
    payload = json.dumps(_encode(value), ensure_ascii=True, separators=(",", ":")).encode("ascii")
    return b"%s %s %s\n%s" % (_MAGIC, _FORMAT, _checksum(payload).encode(), payload)


def loads(data: bytes) -> Any:
    """The value ``dumps`` encoded; `CacheFormatError` for anything else (no code runs)."""
    header, newline, payload = data.partition(b"\n")
    parts = header.split(b" ")
    if not newline or len(parts) != 3 or parts[0] != _MAGIC or parts[1] != _FORMAT:
        raise CacheFormatError("not a graphlint cache file of this format")
    if parts[2] != _checksum(payload).encode():
        raise CacheFormatError("checksum mismatch (truncated or corrupted)")
    try:
        return json.loads(payload, object_hook=_decode_object)
    except (ValueError, TypeError, KeyError, RecursionError) as error:
        raise CacheFormatError(f"invalid contents: {type(error).__name__}") from None


def _checksum(payload: bytes) -> str:
    return hashlib.blake2b(payload, digest_size=16).hexdigest()


def _encode(value: object) -> object:
    """``value`` as JSON-able data (see the module docstring); TypeError for anything else."""
    kind = type(value)
    if kind in (str, int, bool, float) or value is None:
        return value
    if kind is list:
        return [_encode(item) for item in value]  # type: ignore[attr-defined]
    if kind is tuple:
        return {"t": [_encode(item) for item in value]}  # type: ignore[attr-defined]
    if kind in _TARGET_NAMES:
        return {_TARGET_NAMES[kind]: [_encode(item) for item in value[1:]]}  # type: ignore[index]
    if kind is dict:
        return {"d": [_encode(item) for pair in value.items() for item in pair]}  # type: ignore[attr-defined]
    if kind is frozenset:
        return {"f": [_encode(item) for item in value]}  # type: ignore[attr-defined]
    if kind is set:
        return {"s": [_encode(item) for item in value]}  # type: ignore[attr-defined]
    names = _FIELDS.get(kind)
    if names is None:
        raise TypeError(f"the cache cannot hold a {kind.__name__}")
    return {kind.__name__: [_encode(getattr(value, name)) for name in names]}


def _pairs(flat: list) -> dict:
    if len(flat) % 2:
        raise ValueError("a dict needs key, value pairs")
    return dict(zip(flat[::2], flat[1::2], strict=True))


def _construct(cls: type) -> Callable[[list], object]:
    arity = len(_FIELDS[cls])

    def build(values: list) -> object:
        if type(values) is not list or len(values) != arity:
            raise ValueError(f"{cls.__name__} needs {arity} fields")
        return cls(*values)

    return build


def _target(cls: type) -> Callable[[list], object]:
    def build(values: list) -> object:
        if type(values) is not list or not all(type(v) in (str, int) for v in values):
            raise ValueError(f"{cls.__name__} takes names and positions")
        return cls(*values)

    return build


def _sequence(kind: Callable[[list], object]) -> Callable[[list], object]:
    def build(values: list) -> object:
        if type(values) is not list:
            raise ValueError("a container holds a list")
        return kind(values)

    return build


_TARGET_NAMES: dict[type, str] = {cls: cls.__name__ for cls in _TARGETS}
_DECODERS: dict[str, Callable[[list], object]] = {
    "t": _sequence(tuple),
    "f": _sequence(frozenset),
    "s": _sequence(set),
    "d": _sequence(_pairs),
    **{cls.__name__: _construct(cls) for cls in _DATACLASSES},
    **{cls.__name__: _target(cls) for cls in _TARGETS},
}


def _decode_object(obj: dict) -> object:
    if len(obj) != 1:
        raise ValueError("an encoded value has one tag")
    ((tag, values),) = obj.items()
    return _DECODERS[tag](values)
