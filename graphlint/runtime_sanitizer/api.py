"""The Python API: run the two-capture analysis on a callable and sample inputs (needs CUDA)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from graphlint.runtime_sanitizer.analysis.report import SanitizerReport, analyze_pair, memory_finding


def _where(fn: Callable) -> tuple[str, int]:
    """The callable's own source when it is the user's; otherwise (a torch module, no source)
    the user's line that asked for the analysis."""
    from graphlint.runtime_sanitizer.guard.sites import is_library, user_site

    target = getattr(fn, "forward", fn)
    try:
        path = inspect.getsourcefile(target)
        if path and not is_library(path):
            return path, inspect.getsourcelines(target)[1]
    except (OSError, TypeError):
        pass
    return user_site()


def sanitize_callable(
    fn: Callable, *inputs: Any, module: Any = None, warmup: int = 2, graph_dir: str | None = None
) -> SanitizerReport:
    """Capture ``fn(*inputs)`` (a second time on moved inputs, a third time to measure
    argument padding noise) and analyse the graphs.

    ``module`` (or ``fn`` itself, when it is an ``nn.Module``) names the parameters and buffers
    that legitimately stay at fixed addresses. The program's own tensors are not modified:
    the second capture runs on copies, and the parameters, buffers and CUDA RNG state that the
    runs of ``fn`` move on are restored afterwards. With ``graph_dir``, the analysed graph is
    also drawn there (`report.write_pictures`), hazards in colour.
    """
    from graphlint.runtime_sanitizer.capture.two_captures import load_state, module_tensors, save_state

    fixed = module_tensors(module if module is not None else fn)
    saved = save_state(fixed)
    try:
        report = _analyse(fn, inputs, fixed, warmup)
    finally:
        load_state(fixed, saved)
    if graph_dir is not None:
        report.write_pictures(graph_dir)
    return report


def _analyse(fn: Callable, inputs: tuple[Any, ...], fixed: list[Any], warmup: int) -> SanitizerReport:
    from graphlint.runtime_sanitizer.analysis import two_capture as analysis
    from graphlint.runtime_sanitizer.capture.two_captures import capture_attributed, capture_set, capture_shifted

    first, second, repeat, moved_repeat = capture_set(fn, inputs, fixed, warmup)
    label = getattr(fn, "__qualname__", type(fn).__name__)
    where = _where(fn)
    ordering = capture_attributed(fn, inputs, first.snapshot, fixed, warmup)
    report = analyze_pair(
        first.snapshot, second.snapshot, where, label, repeat.snapshot, ordering, moved_repeat.snapshot
    )
    if any(f.code == "GL501" for f in report.findings):
        return report  # an unstable graph has no alignment or memory profile worth stating
    for index, tensor in enumerate(inputs):
        if hasattr(tensor, "data_ptr") and tensor.is_cuda:
            shifted = capture_shifted(fn, inputs, index, fixed, warmup)
            captured = analysis.alignment_of(tensor.data_ptr())
            report.alignment[index] = analysis.required_alignment(
                first.snapshot, shifted.snapshot, captured, tensor.element_size()
            )
    report.findings.append(memory_finding(first.pool_bytes, first.output_bytes, where, label))
    return report
