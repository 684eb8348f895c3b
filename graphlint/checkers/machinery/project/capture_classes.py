"""Classes whose instances are capture contexts: `__enter__` leaves a capture open.

The "breakable" CUDA graphs of vLLM and SGLang capture with `capture_begin()` in one method
and `capture_end()` in another of the same object, and drive the two from `__enter__` and
`__exit__`: `with BreakableCUDAGraphCapture(pool=pool): output = model(x)` captures the model
between two segment boundaries. No `with torch.cuda.graph(...)` is written anywhere, so the
binder sees only a `with` of a project class; this module says, project-wide, whether that
class's `__enter__` begins a capture it does not end.

Each function has a net effect on capture, from its summary and its callees':
  OPENS   it calls `capture_begin()` and returns with the capture open (`opens_capture`), or
          calls something that opens and nothing that closes;
  CLOSES  the reverse (`closes_capture`: a `capture_end()` on a capture begun elsewhere);
  NONE    neither, or both (a function that ends one segment and begins the next leaves a
          capture open only if that is its net effect, which the order of calls would
          tell and a summary does not keep: not counted, never guessed).
"""

from __future__ import annotations

from collections.abc import Callable

from graphlint.checkers.machinery.core.call_targets import CallTarget
from graphlint.checkers.machinery.core.model import FunctionSummary

OPENS, CLOSES, NONE = 1, -1, 0
_MAX_DEPTH = 6  # calls followed from __enter__: the helpers that begin a segment are one or two deep


class CaptureClasses:
    """Which classes' `__enter__` opens a capture, memoised per project."""

    def __init__(
        self,
        functions: dict[str, tuple[str, FunctionSummary]],
        resolve_target: Callable[[CallTarget], list[str]],
        method: Callable[[str, str], str | None],
    ) -> None:
        self._functions = functions
        self._resolve_target = resolve_target
        self._method = method
        self._effects: dict[str, int] = {}
        self._classes: dict[str, bool] = {}

    def enters_capture(self, class_qualname: str) -> bool:
        """Whether `with <an instance of the class>:` runs its body inside a capture."""
        found = self._classes.get(class_qualname)
        if found is None:
            enter = self._method(class_qualname, "__enter__")
            found = self._classes[class_qualname] = enter is not None and self.effect(enter) == OPENS
        return found

    def effect(self, qualname: str, depth: int = 0) -> int:
        """The net effect of calling ``qualname`` on capture (OPENS, CLOSES or NONE)."""
        if qualname in self._effects:
            return self._effects[qualname]
        entry = self._functions.get(qualname)
        if entry is None or depth > _MAX_DEPTH:
            return NONE
        function = entry[1]
        self._effects[qualname] = NONE  # a recursive call in progress adds nothing
        if function.opens_capture or function.closes_capture:
            result = NONE if function.opens_capture and function.closes_capture else _direct(function)
        else:
            callees = {c for call in function.calls for c in self._resolve_target(call.target)}
            effects = {self.effect(callee, depth + 1) for callee in sorted(callees)}
            result = NONE if OPENS in effects and CLOSES in effects else (max(effects, key=abs) if effects else NONE)
        self._effects[qualname] = result
        return result


def _direct(function: FunctionSummary) -> int:
    return OPENS if function.opens_capture else CLOSES
