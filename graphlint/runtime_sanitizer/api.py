"""The Python API: run the two-capture analysis on a callable and sample inputs (needs CUDA)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from graphlint.runtime_sanitizer.report import SanitizerReport, analyze_pair


def _where(fn: Callable) -> tuple[str, int]:
    target = getattr(fn, "forward", fn)
    try:
        return inspect.getsourcefile(target) or "<unknown>", inspect.getsourcelines(target)[1]
    except (OSError, TypeError):
        return "<unknown>", 1


def sanitize_callable(fn: Callable, *inputs: Any, module: Any = None, warmup: int = 2) -> SanitizerReport:
    """Capture ``fn(*inputs)`` (a second time on moved inputs, a third time to measure
    argument padding noise) and analyse the graphs.

    ``module`` (or ``fn`` itself, when it is an ``nn.Module``) names the parameters and buffers
    that legitimately stay at fixed addresses. The program's own tensors are not modified:
    the second capture runs on copies.
    """
    from graphlint.runtime_sanitizer.capture import capture_three, module_tensors

    fixed = module_tensors(module if module is not None else fn)
    first, second, repeat = capture_three(fn, inputs, fixed, warmup)
    label = getattr(fn, "__qualname__", type(fn).__name__)
    return analyze_pair(first.snapshot, second.snapshot, _where(fn), label, repeat.snapshot)
