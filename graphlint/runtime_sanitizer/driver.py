"""The CUDA driver shim: the one place that imports `cuda.bindings.driver` and turns its
status codes into exceptions. Introspection, capture and the launcher call the driver only
through it, so a machine without cuda-bindings fails in one place with one message, and the
pure analysis (which must not need a GPU) is seen not to import it."""

from __future__ import annotations

from typing import Any


class IntrospectionError(RuntimeError):
    """The graph could not be read; the sanitizer refuses rather than guess."""


def bindings() -> Any:
    """The `cuda.bindings.driver` module; IntrospectionError when cuda-bindings is missing."""
    try:
        from cuda.bindings import driver
    except ImportError as error:  # pragma: no cover - depends on the machine
        raise IntrospectionError(
            "cuda-bindings is not installed: pip install '.[runtime]' from a clone, 'cuda-graphlint[runtime]' from the index"
        ) from error
    return driver


def ok(result: Any) -> Any:
    """The value of a driver call (`(status, value...)`), or IntrospectionError when it failed."""
    drv = bindings()
    if isinstance(result, tuple):
        err, rest = result[0], result[1:]
    else:
        err, rest = result, ()
    if err != drv.CUresult.CUDA_SUCCESS:
        raise IntrospectionError(f"CUDA driver call failed: {err}")
    if not rest:
        return None
    return rest[0] if len(rest) == 1 else rest


def address(value: Any) -> int:
    """A pointer field of a cuda-bindings struct as an int (0 for NULL)."""
    if value is None:
        return 0
    try:
        return int(value)
    except TypeError:
        return int(value.getPtr())
