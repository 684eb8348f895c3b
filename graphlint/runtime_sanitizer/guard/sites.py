"""Where a finding happened in the user's code: the innermost frame outside torch, graphlint
and the standard library; on autograd's engine thread, the line that called backward()."""

from __future__ import annotations

import dataclasses
import functools
import os
import sys
from types import FrameType

from graphlint.findings import Finding
from graphlint.runtime_sanitizer.guard.installed import INSTALLED

UNKNOWN_SITE = ("<unknown>", 1)


@functools.cache
def _library_dirs() -> tuple[str, ...]:
    """Where frames are never the user's: torch, graphlint, and Python's standard library (the
    threading code under every thread's frames, `copy`, `contextlib`, ...)."""
    import sysconfig

    import torch

    import graphlint

    dirs = [os.path.dirname(os.path.abspath(str(m.__file__))) for m in (torch, graphlint)]
    dirs += [sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platstdlib"]]
    return tuple(os.path.abspath(d) + os.sep for d in dirs)


def is_library(filename: str) -> bool:
    """A frame of torch, graphlint or the standard library (not of packages installed under it)."""
    if filename.startswith("<frozen "):
        return True
    path = os.path.abspath(filename)
    torch_dir, graphlint_dir, *stdlib = _library_dirs()
    if path.startswith((torch_dir, graphlint_dir)):
        return True
    installed = f"{os.sep}site-packages{os.sep}" in path or f"{os.sep}dist-packages{os.sep}" in path
    return path.startswith(tuple(stdlib)) and not installed


def user_frame() -> FrameType | None:
    """The innermost frame of this thread outside torch and graphlint (None if there is none,
    as on autograd's engine threads)."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        if not is_library(frame.f_code.co_filename):
            return frame
        frame = frame.f_back
    return None


def innermost_user_frame() -> tuple[str, int] | None:
    """The (path, line) of `user_frame()`."""
    frame = user_frame()
    return None if frame is None else (frame.f_code.co_filename, frame.f_lineno or 1)


def user_site() -> tuple[str, int]:
    """Where a finding happened in the user's code: the innermost frame outside torch and
    graphlint; on autograd's engine thread (no user frame), the line that called backward()."""
    frame = innermost_user_frame()
    if frame is not None:
        return frame
    for guard in reversed(INSTALLED):
        if guard._backward_sites:
            return guard._backward_sites[-1]
    return UNKNOWN_SITE


def located(finding: Finding, site: tuple[str, int]) -> Finding:
    """The finding at the user's line (the analysis places it at the callable's source)."""
    path, line = site
    return dataclasses.replace(finding, path=path, line=line, end_line=line)
