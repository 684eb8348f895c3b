"""The file phase's front door: bytes on disk to a `ModuleSummary`, never an exception.

Whatever is wrong with a file (gone, unreadable, binary, not UTF-8, not Python) becomes a
summary with an error, which the engine reports as GL000 while every other file is still
checked.
"""

from __future__ import annotations

import ast
import contextlib
import gc
import io
import os
import stat
import tokenize
import traceback
import warnings
from collections.abc import Callable, Iterator

from graphlint.checkers.machinery.core.model import ModuleSummary
from graphlint.checkers.machinery.summarize import FileSummarizer
from graphlint.deep_nesting import run_deep
from graphlint.suppressions import parse_suppressions


def read_source(path: str) -> tuple[bytes | None, str | None]:
    """The file's bytes, or why they could not be read. Only a regular file is read: a FIFO
    named `x.py` would block the run forever, `/dev/zero` never end. The file is opened
    without blocking and checked on its descriptor, so it cannot be swapped in between."""
    try:
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
        with open(descriptor, "rb") as handle:
            kind = os.fstat(descriptor).st_mode
            if stat.S_ISDIR(kind):
                return None, "is a directory, not a file"
            if not stat.S_ISREG(kind):
                return None, f"not a regular file ({_file_kind(kind)}); only regular files are read"
            return handle.read(), None
    except FileNotFoundError:
        return None, "file not found (it may have been removed during the run)"
    except IsADirectoryError:
        return None, "is a directory, not a file"
    except PermissionError:
        return None, "permission denied"
    except OSError as error:
        return None, f"cannot read file: {error.strerror or error}"


def _file_kind(mode: int) -> str:
    kinds: tuple[tuple[Callable[[int], bool], str], ...] = (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    )
    kinds += ((stat.S_ISSOCK, "a socket"),)
    return next((name for test, name in kinds if test(mode)), "a special file")


def decode_source(data: bytes) -> tuple[str | None, str | None]:
    if b"\x00" in data:
        return None, "binary file (contains NUL bytes), not Python source"
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError:
        encoding = "utf-8"  # no usable declaration: Python reads the file as UTF-8
    try:
        return data.decode(encoding if encoding != "utf-8" else "utf-8-sig"), None
    except (UnicodeDecodeError, LookupError) as error:
        position = f" at byte {error.start}" if isinstance(error, UnicodeDecodeError) else ""
        return None, f"file is not valid {encoding}{position}"


def summarize_source(data: bytes, module: str, is_package: bool, codes: frozenset[str] | None = None) -> ModuleSummary:
    """Parse and summarise one file's bytes, running the detectors of ``codes`` (all static
    rules by default). Pure: the cache relies on that. The file's own syntax warnings (an
    invalid escape, `1or 2` in a string annotation the analysis parses) are its business, not
    lines on the user's terminal."""
    with warnings.catch_warnings(), _one_file_heap():
        warnings.simplefilter("ignore", SyntaxWarning)
        warnings.simplefilter("ignore", DeprecationWarning)  # invalid escapes before 3.12
        return _summarize_source(data, module, is_package, codes)


@contextlib.contextmanager
def _one_file_heap() -> Iterator[None]:
    """No cycle collection while one file is analysed, and one young collection after it.

    A file's tree and walkers live exactly as long as its analysis, and the walkers' parts
    refer back to their walker (cycles that only the collector frees). Collecting during the
    analysis walks the live tree again and again for nothing; collecting once at the end walks
    only what the file left behind (its summary and those cycles). About a tenth of a cold
    run; the peak heap grows by one file's garbage."""
    if not gc.isenabled():  # the caller manages the collector
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        gc.collect(0)


def _summarize_source(data: bytes, module: str, is_package: bool, codes: frozenset[str] | None) -> ModuleSummary:
    text, error = decode_source(data)
    if text is None:
        return ModuleSummary(module=module, error=error)
    try:
        try:
            tree = _parse(text)
        except RecursionError:  # the parser's own depth limit counts the frames already used
            tree = run_deep(lambda: _parse(text))
    except SyntaxError as error:
        summary = ModuleSummary(module=module, error=f"syntax error: {error.msg}")
        summary.error_line = error.lineno or 1
        summary.error_column = error.offset or 1
        summary.skip_file = parse_suppressions(text, None).skip_file
        return summary
    except (ValueError, RecursionError, MemoryError) as error:
        return ModuleSummary(module=module, error=f"cannot parse file: {type(error).__name__}: {error}")

    def work() -> ModuleSummary:
        return _summarize_tree(tree, module, is_package, text, codes)

    try:
        try:
            return work()
        except RecursionError:
            return run_deep(work)  # as deep as CPython parses: again, with room for it
    except RecursionError:
        return ModuleSummary(module=module, error="file is nested too deeply to analyse")
    except Exception as error:  # a graphlint bug must not cost the user the rest of the run
        return ModuleSummary(
            module=module,
            internal_error=f"summarising the file failed: {type(error).__name__}: {error}",
            internal_traceback=traceback.format_exc(),
        )


def _parse(text: str) -> ast.Module:
    """The syntax tree.

    CPython's limit on how deep a tree `ast.parse` builds is a multiple of the recursion limit
    minus the frames already in use: a 2,900-term sum that parses at a script's top level
    overflows a few dozen frames down, inside graphlint. So a RecursionError is retried with
    `run_deep`'s room, and only what CPython cannot parse at all stays GL000."""
    return ast.parse(text)


def _summarize_tree(
    tree: ast.Module, module: str, is_package: bool, text: str, codes: frozenset[str] | None
) -> ModuleSummary:
    summary = FileSummarizer(tree, module, is_package, text, codes).run()
    suppressions = parse_suppressions(text, tree)
    summary.suppressions = suppressions.by_line
    summary.suppressed_blocks = suppressions.blocks
    summary.skip_file = suppressions.skip_file
    return summary
