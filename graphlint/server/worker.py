"""The language server's analyses, run off its event loop in a worker process, one at a time,
newest text first; a stale analysis is cancelled.

Why a process and not a thread: analysis is CPU-bound Python. In a thread it would share the
GIL with the event loop, which then gets the interpreter back only at the switch interval, and
not at all during a long C call (`ast` or libcst parsing a large file), so a hover could still
wait seconds on a cold analysis; and a thread cannot be stopped. A worker process shares no GIL
with the loop, so requests are answered from the latest results whatever the analysis is
doing, and a stale analysis is cancelled by ending the process (the only way to stop
CPU-bound Python at once). The next analysis starts a fresh worker (`spawn`: about the import
of graphlint, a few tenths of a second); the summary cache on disk keeps what the ended one
had written.

A test seam: `GRAPHLINT_SERVER_ANALYSIS_DELAY` (seconds) makes the worker spin on the CPU that
long before each analysis, so a test can hold an analysis running and ask the server things
meanwhile.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import multiprocessing.context
import os
import pickle
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path

from graphlint.config import ConfigError, ConfigResolver, Selection
from graphlint.engine import CheckOptions
from graphlint.findings import Finding
from graphlint.fixing.apply import fix_file
from graphlint.fixing.edits import with_edits
from graphlint.project_context import check_in_project

DELAY_VARIABLE = "GRAPHLINT_SERVER_ANALYSIS_DELAY"
# What the first analysis in a process imports late (the rules, and networkx for the call
# graph): imported once in the forkserver, so a worker started again after a cancellation
# does not pay it (0.4 s on the development machine).
_LOADED_BY_ANALYSIS = ("graphlint.checkers.rules", "graphlint.runtime_sanitizer.rules", "networkx")


@dataclass(frozen=True)
class AnalysisRequest:
    """One document's text as the editor holds it, with the settings to check it under; two
    requests are equal when a result of one stands for the other."""

    uri: str
    path: str
    version: int | None
    text: str = field(repr=False)
    cache_dir: str
    preview: bool | None = None  # None: each file's configuration decides
    follow_values: bool | None = None


@dataclass
class AnalysisResult:
    request: AnalysisRequest
    findings: list[Finding]
    # The text with the safe fixes applied (one pass of `graphlint check --fix`: a fix that
    # overlaps another waits for the next); None when there is no safe fix to apply.
    fixed_text: str | None = None
    error: str | None = None  # the configuration is wrong: say so, publish nothing


def analyse(request: AnalysisRequest) -> AnalysisResult:
    """The findings of one document (its unsaved text), checked with its project; in the worker."""
    path = Path(request.path)
    options = CheckOptions(
        selection=Selection(preview=request.preview),
        jobs=1,
        cache_dir=Path(request.cache_dir),
        follow_values=request.follow_values,
    )
    try:
        result = check_in_project(
            [request.path], ConfigResolver(), options, {path.resolve(): request.text.encode("utf-8")}
        )
    except ConfigError as error:
        return AnalysisResult(request, [], error=f"graphlint: {error}")
    findings = with_edits(result.findings, result.sources)
    return AnalysisResult(request, findings, _safely_fixed(request, findings))


def _safely_fixed(request: AnalysisRequest, findings: list[Finding]) -> str | None:
    outcome = fix_file(request.path, request.text, [f for f in findings if f.path == request.path], unsafe=False)
    return outcome.fixed if outcome.applied and outcome.error is None else None


def _spin(seconds: float) -> None:
    """Hold the CPU as an analysis does (the test seam), not sleep."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


def _serve(connection: Connection) -> None:
    """The worker process: analyse each request it is sent until the server goes away."""
    delay = float(os.environ.get(DELAY_VARIABLE) or 0)
    while True:
        try:
            request = connection.recv()
        except (EOFError, OSError):
            return
        _spin(delay)
        try:
            result = analyse(request)
        except Exception as error:  # the engine reports a file's failure as GL002; this is worse
            result = AnalysisResult(request, [], error=f"graphlint: the analysis failed: {error!r}")
        connection.send(result)


def _context() -> multiprocessing.context.ForkServerContext | multiprocessing.context.SpawnContext:
    """Workers are forked from a server process that has imported the analysis once
    (`forkserver`), so starting one again after a cancellation costs milliseconds, not the
    second of imports a fresh interpreter (`spawn`, where there is no forkserver) needs; the
    language server's own process, which has threads, is never forked."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.context.SpawnContext()
    context = multiprocessing.context.ForkServerContext()
    context.set_forkserver_preload(["__main__", __name__, *_LOADED_BY_ANALYSIS])
    return context


class AnalysisWorker:
    """The worker process, started when first needed and again after a cancellation."""

    def __init__(self) -> None:
        self._process: BaseProcess | None = None
        self._connection: Connection | None = None
        self._starting = threading.Lock()
        self._cancelled: threading.Event | None = None  # set: the running analysis is cancelled

    def _started(self) -> Connection:
        """The running worker's end of the pipe, starting one if needed; called off the loop
        (starting waits for the forkserver)."""
        with self._starting:
            if self._connection is None or self._process is None or not self._process.is_alive():
                if self._connection is not None:
                    self._connection.close()  # the ended worker's: nothing reads it any more
                context = _context()
                ours, theirs = context.Pipe()
                process = context.Process(target=_serve, args=(theirs,), name="graphlint-analysis", daemon=True)
                process.start()
                theirs.close()  # so the worker's end closing (it ended) reads as end of file here
                self._process, self._connection = process, ours
            return self._connection

    async def warm(self) -> None:
        """Start the worker ahead of the first analysis."""
        await asyncio.get_running_loop().run_in_executor(None, self._started)

    async def analyse(self, request: AnalysisRequest) -> AnalysisResult | None:
        """The result, or None when the analysis was cancelled or the worker died."""
        cancelled = self._cancelled = threading.Event()

        def exchange() -> AnalysisResult:
            connection = self._started()
            if cancelled.is_set():  # cancelled while the worker was starting
                raise EOFError
            connection.send(request)
            return connection.recv()

        try:
            return await asyncio.get_running_loop().run_in_executor(None, exchange)
        except (EOFError, OSError, pickle.UnpicklingError):
            self._end()
            return None
        finally:
            self._cancelled = None

    def stop(self) -> None:
        """Cancel what the worker runs by ending it (the exchange waiting on it reads end of
        file, or sees the cancellation once the worker it was starting is up); the next
        analysis starts another."""
        if self._cancelled is not None:
            self._cancelled.set()
        self._end()

    def _end(self) -> None:
        process, self._process = self._process, None
        if process is not None and process.is_alive():
            process.terminate()
            process.join(timeout=5)


class AnalysisQueue:
    """Documents waiting for an analysis, analysed one at a time on the worker.

    ``current`` gives the request a document's analysis would be made of now (None once it is
    closed); a result is handed to ``done`` only if it still stands for that request, so a
    newer edit or new settings supersede an analysis: a running one that went stale is
    cancelled at once (``note`` says so), a finished one is dropped.
    """

    def __init__(
        self,
        current: Callable[[str], AnalysisRequest | None],
        done: Callable[[AnalysisResult], None],
        note: Callable[[str], None],
    ) -> None:
        self._current = current
        self._done = done
        self._note = note
        self._worker = AnalysisWorker()
        self._waiting: dict[str, None] = {}  # ordered: first asked, first analysed
        self._running: AnalysisRequest | None = None
        self._task: asyncio.Task[None] | None = None
        self._warming: asyncio.Task[None] | None = None  # held: the loop keeps only weak references

    def request(self, uri: str) -> None:
        """Analyse ``uri`` as it is now (after what is already running)."""
        self.supersede(uri)
        if self._running is None or self._running != self._current(uri):
            self._waiting[uri] = None
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._drain())

    def supersede(self, uri: str) -> None:
        """Cancel the running analysis of ``uri`` if it no longer stands for the document."""
        running = self._running
        if running is not None and running.uri == uri and running != self._current(uri):
            self._running = None  # cancelled once
            self._note(f"graphlint: cancelled the analysis of {uri} (version {running.version}): superseded")
            self._worker.stop()

    def warm(self) -> None:
        """Start the worker now, so the first analysis does not wait for it."""
        self._warming = asyncio.get_running_loop().create_task(self._worker.warm())

    def forget(self, uri: str) -> None:
        self._waiting.pop(uri, None)
        self.supersede(uri)

    def close(self) -> None:
        self._waiting.clear()
        self._worker.stop()

    async def _drain(self) -> None:
        while self._waiting:
            uri = next(iter(self._waiting))
            del self._waiting[uri]
            request = self._current(uri)
            if request is None:
                continue
            self._running = request
            try:
                result = await self._worker.analyse(request)
            finally:
                cancelled, self._running = self._running is None, None
            if result is not None and result.request == self._current(uri):
                self._done(result)
            elif result is None and not cancelled:
                self._note(
                    f"graphlint: the analysis of {uri} ended without a result (its worker died); it runs again on the next edit"
                )
