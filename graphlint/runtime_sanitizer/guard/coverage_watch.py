"""The guard's coverage watch: how much GPU work ran from graphs (needs torch; the figures are
worked out by `analysis/coverage.py`, which does not).

It runs torch's profiler with CUDA activity only (no operator records, no stacks: kernels and
the host calls that launched them) from the guard's install to its uninstall, and listens to
torch.compile's "skipping cudagraphs" messages. It changes no result; it stands aside rather
than fail the program:

- a profiler already running when the guard installs: coverage is not measured, and the
  report says why;
- the program starting its own profiler: ours stops first (kineto runs one at a time), the
  report keeps what was measured until then and names the line.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import tempfile
import time
from collections.abc import Iterator
from typing import Any

from graphlint.runtime_sanitizer.analysis.coverage import Coverage, compile_fallback, from_trace_events
from graphlint.runtime_sanitizer.guard.sites import user_site


class _SkipMessages(logging.Handler):
    """torch.compile's perf hints: its "skipping cudagraphs due to ..." are fallbacks."""

    def __init__(self, found: list[str]) -> None:
        super().__init__(level=logging.DEBUG)
        self.found = found

    def emit(self, record: logging.LogRecord) -> None:
        with contextlib.suppress(Exception):  # a message that does not format is not ours to raise
            message = record.getMessage()
            if "skipping cudagraphs" in message:
                self.found.append(message)


class CoverageWatch:
    def __init__(self) -> None:
        self._profiler: Any = None
        self._events: list[dict[str, Any]] = []
        self._skips: list[str] = []
        self._handler = _SkipMessages(self._skips)
        self._hint_log: Any = None
        self._saved_prepare: Any = None
        self._measured = False  # the profiler ran and its records were read
        self._base_ns = 0  # the trace's time base: its events' `ts` are microseconds after it
        self._own_work: list[tuple[int, int]] = []  # host-time windows of the sanitizer's own tensor work
        self.limits: list[str] = []

    # -- install / uninstall -------------------------------------------------------------
    def install(self, torch: Any) -> None:
        self._listen_for_skips()
        try:
            from torch.profiler import ProfilerActivity, profile

            if torch.autograd.profiler._is_profiler_enabled:
                self.limits.append("a profiler was already running when the sanitizer started: not measured")
                return
            self._profiler = profile(activities=[ProfilerActivity.CUDA])
            self._stand_aside_for_others(torch)
            self._profiler.start()
        except Exception as error:  # coverage is a report, never a reason to stop the program
            self._profiler = None
            self.limits.append(f"the profiler could not start ({type(error).__name__}: {error}): not measured")

    def finish(self, torch: Any) -> Coverage:
        """Stop measuring and say what was measured."""
        self._stop(torch)
        self._restore_prepare(torch)
        if self._hint_log is not None:
            self._hint_log.removeHandler(self._handler)
            self._hint_log = None
        coverage = from_trace_events(self._events, self._own_work, self._base_ns) if self._measured else Coverage()
        coverage.fallbacks.extend(compile_fallback(message) for message in self._skips)
        coverage.limits.extend(self.limits)
        return coverage

    def _stop(self, torch: Any) -> None:
        """Stop our profiler (if running) and keep its events."""
        profiler, self._profiler = self._profiler, None
        if profiler is None:
            return
        try:
            torch.cuda.synchronize()  # kernels still queued are recorded when they finish
            profiler.stop()
            events, self._base_ns = _trace_events(profiler)
            self._events.extend(events)
            self._measured = True
        except Exception as error:
            self.limits.append(f"the profiler's records could not be read ({type(error).__name__}: {error})")

    @contextlib.contextmanager
    def own_work(self) -> Iterator[None]:
        """The sanitizer's own tensor work (copies, comparisons, poison): the kernels it launches
        are not the program's, so they count in neither share."""
        start = time.time_ns()  # the profiler's host clock is the system clock
        try:
            yield
        finally:
            self._own_work.append((start, time.time_ns()))

    # -- the program's own profiler ------------------------------------------------------
    def _stand_aside_for_others(self, torch: Any) -> None:
        """Kineto runs one profiler at a time: when the program starts its own, ours stops."""
        cls = torch.autograd.profiler.profile
        original = cls._prepare_trace
        self._saved_prepare = original
        watch = self

        @functools.wraps(original)
        def prepare_trace(profiler: Any, *args: Any, **kwargs: Any) -> Any:
            ours = watch._profiler is not None and getattr(watch._profiler, "profiler", None) is profiler
            if watch._profiler is not None and not ours:
                path, line = user_site()
                watch._stop(torch)
                watch.limits.append(f"measured until the program started its own profiler at {path}:{line}")
            return original(profiler, *args, **kwargs)

        cls._prepare_trace = prepare_trace

    def _restore_prepare(self, torch: Any) -> None:
        if self._saved_prepare is not None:
            torch.autograd.profiler.profile._prepare_trace = self._saved_prepare
            self._saved_prepare = None

    def _listen_for_skips(self) -> None:
        """Hear torch.compile's cudagraph messages through their own logger (named
        `cudagraphs_log` in torch 2.13, `perf_hint_log` before). Its level is left alone: a
        program that silenced it would otherwise start printing them, so then the report says
        fallbacks were not heard."""
        with contextlib.suppress(Exception):  # no inductor (or another layout): no messages to hear
            from torch._inductor import cudagraph_utils

            log = getattr(cudagraph_utils, "cudagraphs_log", None) or getattr(cudagraph_utils, "perf_hint_log", None)
            if log is None:
                return
            if log.getEffectiveLevel() > logging.WARNING:
                self.limits.append("torch.compile's cudagraph messages are silenced: its fallbacks were not heard")
                return
            self._hint_log = log
            log.addHandler(self._handler)


def _trace_events(profiler: Any) -> tuple[list[dict[str, Any]], int]:
    """The profiler's records in Chrome trace form (kernels and launch calls with their
    correlation ids; torch writes them to a file only), and the trace's time base in ns."""
    handle, path = tempfile.mkstemp(prefix="graphlint-coverage-", suffix=".json")
    os.close(handle)
    try:
        profiler.export_chrome_trace(path)
        with open(path, encoding="utf-8") as trace:
            data = json.load(trace)
    finally:
        with contextlib.suppress(OSError):
            os.remove(path)
    events = data.get("traceEvents", []) if isinstance(data, dict) else data
    base_ns = int(data.get("baseTimeNanoseconds", 0)) if isinstance(data, dict) else 0
    return [event for event in events if isinstance(event, dict)], base_ns
